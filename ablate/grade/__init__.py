"""ablate.grade: see DESIGN §1."""

"""ablate.report: see DESIGN §1."""

"""ablate.run: see DESIGN §1."""

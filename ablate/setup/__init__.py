"""ablate.setup: see DESIGN §1."""

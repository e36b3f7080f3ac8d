"""ablate.mine: see DESIGN §1."""

"""ablate.probe: see DESIGN §1."""

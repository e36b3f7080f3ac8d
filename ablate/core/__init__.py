"""ablate.core: see DESIGN §1."""

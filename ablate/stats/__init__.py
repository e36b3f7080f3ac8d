"""ablate.stats: see DESIGN §1."""

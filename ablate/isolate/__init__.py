"""ablate.isolate: see DESIGN §1."""

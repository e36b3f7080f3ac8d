"""Observing what reaches the model in each cell: fingerprints, fidelity against the untouched setup."""

"""ablate.probe: prove, for free, which layers reach the model in each cell (docs/ARCHITECTURE.md)."""

"""``ablate compare``: head-to-head versions of a file layer and multi-arm layout experiments (issue 13)."""

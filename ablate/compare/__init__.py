"""Head-to-head versions of a file layer and the three-arm layout experiment, on the run folder's types."""

"""The run folder: its layout, lock, manifest and per-item results — the one contract between stages."""

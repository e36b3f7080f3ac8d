"""Where ablate's data folders (cells/, tasks/, shadow/, examples/) live.

In a source checkout (editable install) they sit at the repository root next to the package; in a wheel they
are shipped inside the package as ``ablate/_data/<name>``."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def data_dir(name: str) -> Path:
    """Return the shipped data folder ``name`` (``cells``, ``tasks``, ``shadow`` or ``examples``)."""
    bundled = _PACKAGE / "_data" / name
    if bundled.is_dir():
        return bundled
    return _PACKAGE.parent / name

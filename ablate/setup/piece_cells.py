"""Cells for any subset of pieces (docs/PIECES.md#cells): a design's rows as cells ``P01``… after ``C0``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ablate.core.errors import UsageError
from ablate.setup.cells import CellSet, ResolvedCell
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup
from ablate.setup.piece_cut import require_pieces, select_pieces
from ablate.setup.pieces import Piece, setup_pieces

#: Folder names are ``c00``..``c999``: the control and at most 999 rows (a drawn design holds up to
#: 1 + 4 × (2N − 1) rows: 223 at 24 pieces).
MAX_ROWS = 999
CONTROL = "C0"


def piece_cells(
    pieces: Sequence[Piece], design_rows: Sequence[Iterable[str]], *, name: str = "pieces"
) -> CellSet:
    """The control plus one cell per design row (the ids of the pieces it removes), checked before anything
    is built; a row that removes nothing is a second control (still built and run)."""
    require_pieces(pieces, where="piece design")
    if len(design_rows) > MAX_ROWS:
        raise UsageError(
            f"piece design: {len(design_rows)} rows; at most {MAX_ROWS} cells besides the control",
            hint="pick fewer pieces (--pieces ID,...) or a smaller design",
        )
    cells = [ResolvedCell(id=CONTROL, index=0, label="everything (control)", stripped=(), empty_config=False)]
    for i, row in enumerate(design_rows, start=1):
        chosen = select_pieces(pieces, row, where=f"piece design: row {i}")
        ids = tuple(p.id for p in chosen)
        label = "no " + ", ".join(ids) if ids else "everything (design row that removes nothing)"
        cells.append(
            ResolvedCell(id=f"P{i:02d}", index=i, label=label, stripped=(), empty_config=False, pieces=ids)
        )
    described = f"{len(design_rows)} piece cells over {len(pieces)} pieces"
    return CellSet(name, described, CONTROL, tuple(cells), source=Path(f"<{name}>"))


def one_out_rows(pieces: Sequence[Piece]) -> list[list[str]]:
    """Leave-one-out at the piece level: one row per piece."""
    return [[p.id] for p in pieces]


def piece_probe_set(setup: Setup, catalog: Catalog, spec: str) -> CellSet:
    """``ablate probe --pieces all|ID,...``: the control and one cell per chosen piece."""
    pieces = setup_pieces(setup, catalog)
    if spec.strip() != "all":
        pieces = select_pieces(pieces, [i.strip() for i in spec.split(",") if i.strip()])
    require_pieces(pieces, where=f"--pieces {spec}")
    return piece_cells(pieces, one_out_rows(pieces), name="pieces-one-out")

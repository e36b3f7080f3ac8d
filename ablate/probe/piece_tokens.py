"""``ablate pieces --measure``: what each piece adds to the first request, measured free with the real CLI:
one probe cell per piece, checked to differ from the control by just its piece (:mod:`ablate.probe.pieces`);
the characters it removes, at 4 a token, are the piece's ``tokens`` (``tokens_source = "request"``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ablate.core.claude import ClaudeBinary
from ablate.core.tokens import tokens_of_chars
from ablate.probe.probe import ProbeResult, probe
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup
from ablate.setup.piece_cells import one_out_rows, piece_cells
from ablate.setup.pieces import Piece


@dataclass
class Measured:
    rows: list[dict[str, Any]]
    """One ``Piece.to_json`` row per piece, ``tokens`` measured (``request``) where its cell passed the
    piece check, else the text estimate with the cell's verdict."""
    probe: ProbeResult


def measure_pieces(
    setup: Setup,
    catalog: Catalog,
    pieces: Sequence[Piece],
    claude: ClaudeBinary,
    *,
    jobs: int = 2,
    isolation: str | None = None,
    with_mcp: bool = False,
) -> Measured:
    cells = piece_cells(pieces, one_out_rows(pieces), name="pieces-measure")
    result = probe(setup, catalog, cells, claude, jobs=jobs, isolation=isolation, with_mcp=with_mcp)
    by_piece = {c.cut_pieces[0]: c for c in result.cells if len(c.cut_pieces) == 1}
    rows = []
    for p in pieces:
        cell = by_piece.get(p.id)
        if cell is not None and cell.verdict == "faithful" and cell.pieces:
            row = p.to_json(tokens_of_chars(int(cell.pieces["removed_chars"])), "request")
        else:
            row = p.to_json()
        row["probe"] = cell.verdict if cell is not None else "not probed"
        rows.append(row)
    return Measured(rows, result)

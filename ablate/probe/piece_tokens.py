"""``ablate pieces --measure``: what each piece adds to the first request, measured with the real CLI.

One probe of the control and one cell per piece (:func:`ablate.setup.piece_cells.piece_cells`): each cell's
first request is checked to differ from the control's by exactly its piece (:mod:`ablate.probe.pieces`), and
the difference of the two requests' characters, counted with the sim's estimator (4 characters a token), is
the piece's ``tokens`` (``tokens_source = "request"``). Free: the CLI talks to the capture endpoint."""

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

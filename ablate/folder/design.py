"""The per-piece design of a piece run (docs/PIECES.md#runs), recorded in manifest.json's ``design`` as run, so
the report rebuilds every piece's effect from the run folder alone."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ablate.core.constants import DEFAULT_MIN_EFFECT
from ablate.core.specs import Spec


class DesignPiece(Spec):
    """One column of the design: a piece of the setup, as ``ablate pieces`` lists it."""

    id: str
    layer: str = ""
    kind: str = ""
    tokens: int = 0
    """What the piece adds to the first request (4 characters a token)."""
    tokens_source: str = "estimate"
    """``estimate`` (from the piece's text) or ``request`` (measured from the captured first requests)."""


class DesignRow(Spec):
    """One row of the design: the cell that runs it and, per piece (column order), whether it keeps it."""

    cell: str
    keeps: list[bool]
    draw: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """A drawn design's draw this row belongs to (−1: the control, run in every block); repeat r's blocks run
    the rows of draw r mod the number of draws. None: every block runs the row."""


class ConfirmPlan(Spec):
    """``design.confirm``: the one-out confirmation stage after a screening design (docs/PIECES.md#confirm)."""

    named: list[str] = Field(default_factory=list)
    """The pieces ``--confirm`` names: confirmed whatever the screening finds."""
    cells: dict[str, str]
    """Piece id → its one-out cell (the full setup without that piece)."""
    pairs: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v)
    """``A+B`` → the cell that removes both (the full setup without A and B): a pair's interaction is the full
    setup − without A − without B + without both (docs/PIECES.md#interactions)."""
    named_pairs: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    """The pairs ``--pairs`` names: estimated whatever the screening finds."""
    first_repeat: int = Field(ge=1)
    """The stage's blocks are repeats ``first_repeat``, ``first_repeat + 1``, … (the screening's come first)."""
    max_sessions: int | None = None
    """``--max-sessions``: the whole run's cap, the stage included."""


class PieceDesignRecord(Spec):
    """``manifest.json`` → ``design``: everything the report needs to estimate each piece's effect."""

    kind: Literal["screening", "one-out"]
    construction: str = ""
    """How the rows were made, in words (``folded-over Plackett–Burman N=12: 24 rows for 8 pieces``)."""
    pieces: list[DesignPiece]
    rows: list[DesignRow]
    min_effect: float = Field(default=DEFAULT_MIN_EFFECT, gt=0)
    """The smallest effect of interest of a draw (``--min-effect``)."""
    confirm: ConfirmPlan | None = Field(default=None, exclude_if=lambda v: v is None)
    """The one-out confirmation stage (None: none, as for a one-out design or a planned run)."""
    drawn: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """A screening design whose columns were drawn at random from this seed (the run's): its pieces are tested
    by the conditional randomization test. None: fixed rows (a one-out design, or a run folder made before
    designs were drawn)."""

    @model_validator(mode="after")
    def _shape(self) -> PieceDesignRecord:
        k = len(self.pieces)
        for i, row in enumerate(self.rows):
            if len(row.keeps) != k:
                raise ValueError(f"rows[{i}] ({row.cell}): {len(row.keeps)} keeps for {k} pieces")
        cells = [r.cell for r in self.rows]
        if len(set(cells)) != len(cells):
            raise ValueError("rows: a cell runs two rows")
        return self

    def draws(self) -> list[int] | None:
        """A drawn design's draw per row (−1: the control), None for fixed rows."""
        return None if self.drawn is None else [-1 if r.draw is None else r.draw for r in self.rows]

    def cells_in(self, repeat: int) -> list[str]:
        """The cells the blocks of ``repeat`` run: every row's, or a drawn design's control and draw."""
        draws = self.draws()
        if not draws:
            return [r.cell for r in self.rows]
        g = repeat % (1 + max(draws))
        return [r.cell for r, d in zip(self.rows, draws, strict=True) if d in (-1, g)]

    def removed(self, row: int) -> list[str]:
        """The ids of the pieces row ``row`` removes."""
        return [p.id for p, on in zip(self.pieces, self.rows[row].keeps, strict=True) if not on]

    def piece_ids(self) -> tuple[str, ...]:
        """The pieces' ids in column order."""
        return tuple(p.id for p in self.pieces)

    def keeps(self) -> tuple[tuple[bool, ...], ...]:
        """The rows as on/off tuples (``ablate.stats.screening.Design.rows``)."""
        return tuple(tuple(r.keeps) for r in self.rows)

    def row_of(self) -> dict[str, int]:
        """Cell id → its row."""
        return {r.cell: i for i, r in enumerate(self.rows)}

    def one_out_cells(self) -> dict[str, str] | None:
        """Piece id → the cell that is the full setup without it (a one-out design's rows, else the confirmation
        stage's cells); None unless every piece has one: an adaptive run then cannot re-plan."""
        if self.kind == "one-out":
            return {p.id: r.cell for p, r in zip(self.pieces, self.rows[1:], strict=True)}
        cells = self.confirm.cells if self.confirm is not None else {}
        return cells if all(p.id in cells for p in self.pieces) else None

    def screens(self, repeat: int) -> bool:
        """Whether the block of ``repeat`` belongs to the design (not to the confirmation stage)."""
        return self.confirm is None or repeat < self.confirm.first_repeat

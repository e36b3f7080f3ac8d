"""Designs for per-piece attribution: which pieces each cell keeps, and how many sessions a design needs.

The designs (``screening``: a folded-over Plackett–Burman design; ``one-out``) and why a run draws its columns
are docs/ARCHITECTURE.md#drawn-designs. Sources: the fold-over's zero alias matrix of main effects on two-piece
interactions, Box GEP, Wilson KB, "On the experimental attainment of optimum conditions", JRSS B 13:1–45, 1951,
and Montgomery DC, *Design and Analysis of Experiments*, §8.6; the average contribution a drawn design
estimates, the Banzhaf value (Banzhaf JF, "Weighted voting doesn't work", Rutgers Law Rev 19:317–343, 1965).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from ablate.stats.screening_hadamard import pb_columns, pb_size

if TYPE_CHECKING:
    from ablate.folder.design import PieceDesignRecord

DesignName = Literal["screening", "one-out"]
DESIGNS: tuple[DesignName, DesignName] = ("screening", "one-out")
#: Up to this many pieces the default design is ``one-out`` (its k + 1 rows are fewer than screening's 2N = 8
#: at k ≤ 3 and equal at k = 7, but screening estimates every piece from every session: 4σ²/S against one-out's
#: 2σ²(k + 1)/S per piece for S sessions, already better at k = 2). "A handful": k ≤ 3.
ONE_OUT_DEFAULT_MAX = 3


class DesignError(ValueError):
    """A design that cannot be built for these pieces (too few, repeated ids, an unknown design)."""


@dataclass(frozen=True)
class Design:
    """The rows of a two-level design over named pieces; ``rows[i][j]`` is True when row i keeps piece j."""

    name: DesignName
    pieces: tuple[str, ...]
    rows: tuple[tuple[bool, ...], ...]
    construction: str
    """How the rows were made, in words (``folded-over Plackett–Burman N=20: 40 rows``)."""
    drawn: int | None = None
    """Set: every column was drawn at random from this seed (:func:`draw_columns`), and a piece is tested by
    the conditional randomization test of :mod:`ablate.stats.screening_crt`; None: the rows are fixed."""
    groups: tuple[int, ...] | None = None
    """A drawn design's draw per row (−1: the control, run in every block); repeat r's blocks run the control
    and the rows of draw r mod :attr:`draws`. None: every block runs every row."""

    @property
    def draws(self) -> int:
        """How many draws the rows hold (1 for an undrawn design)."""
        return 1 + max(self.groups) if self.groups else 1

    def rows_of(self, repeat: int) -> list[int]:
        """The rows the blocks of ``repeat`` run (every row, unless the design is drawn)."""
        if self.groups is None:
            return list(range(len(self.rows)))
        g = repeat % self.draws
        return [i for i, d in enumerate(self.groups) if d in (-1, g)]

    def sub(self, repeat: int) -> Design:
        """The design one block of ``repeat`` runs (its rows in :meth:`rows_of` order)."""
        if self.groups is None:
            return self
        rows = tuple(self.rows[i] for i in self.rows_of(repeat))
        return replace(self, rows=rows, groups=None)

    @property
    def k(self) -> int:
        return len(self.pieces)

    def matrix(self) -> npt.NDArray[np.float64]:
        return np.array(self.rows, dtype=np.float64).reshape(len(self.rows), self.k)

    def removed(self, row: int) -> tuple[str, ...]:
        """The pieces row ``row``'s cell removes (what a cell is built from)."""
        return tuple(p for p, on in zip(self.pieces, self.rows[row], strict=True) if not on)

    @property
    def control_row(self) -> int | None:
        """The row that keeps every piece (the untouched setup), if the design has one."""
        return next((i for i, r in enumerate(self.rows) if all(r)), None)


#: A drawn design whose columns cannot separate every piece (rare: two columns drawn equal) is drawn again,
#: at most this many times.
DRAW_ATTEMPTS = 100


#: Independent draws of a run's rows: repeat r runs draw r mod MAX_DRAWS, so the cells are at most
#: 1 + MAX_DRAWS × (2N − 1), and the test has that many rows to tell pieces apart by.
MAX_DRAWS = 4


def draw_columns(design: Design, seed: int, draws: int = 1) -> Design:
    """``design`` with its columns drawn at random ``draws`` times from ``seed`` (the same rows on every
    machine): each draw keeps the control row and permutes every piece's column over the other rows on its own;
    a draw that cannot separate every piece is drawn again (the conditioning of :mod:`ablate.stats.screening_crt`)."""
    if design.name != "screening":
        raise DesignError(f"the {design.name} design is not drawn: its rows are what its effect means")
    if draws < 1:
        raise DesignError(f"{draws} draws: a drawn design needs at least one")
    base = design.matrix() > 0
    control = design.control_row
    free = np.array([i for i in range(len(design.rows)) if i != control])
    rng = np.random.default_rng([seed, 0x5C4EE7])
    rows: list[npt.NDArray[np.bool_]] = [base[control]] if control is not None else []
    groups: list[int] = [-1] if control is not None else []
    for g in range(draws):
        for _ in range(DRAW_ATTEMPTS):
            keeps = base[free].copy()
            for j in range(design.k):
                keeps[:, j] = keeps[rng.permutation(free.size), j]
            if np.linalg.matrix_rank(keeps - keeps.mean(axis=0)) == design.k:
                break
        else:  # pragma: no cover - needs k close to the rows, which no design here has
            raise DesignError(f"no draw of {free.size} rows separates {design.k} pieces")
        rows.extend(keeps)
        groups.extend([g] * free.size)
    said = "once" if draws == 1 else f"{draws} times (repeat r runs draw r mod {draws})"
    return replace(
        design,
        rows=tuple(tuple(bool(v) for v in row) for row in rows),
        drawn=seed,
        groups=tuple(groups),
        construction=f"{design.construction}, columns drawn at random {said}, seed {seed}",
    )


def design_of(record: PieceDesignRecord) -> Design:
    """The design a run folder's manifest records (rows in record order)."""
    draws = record.draws()
    return Design(
        record.kind, record.piece_ids(), record.keeps(), record.construction, drawn=record.drawn,
        groups=None if draws is None else tuple(draws),
    )  # fmt: skip


def _check_pieces(pieces: tuple[str, ...]) -> None:
    if len(pieces) < 2:
        raise DesignError(
            f"{len(pieces)} piece(s): attribution needs at least two pieces (a single piece is a layer: use "
            "`ablate run` without --pieces)"
        )
    if (twice := next((p for i, p in enumerate(pieces) if p in pieces[:i]), None)) is not None:
        raise DesignError(f"piece id {twice!r} given twice: piece ids must be unique")


def screening_rows(k: int) -> int:
    """Rows of the screening design for ``k`` pieces: 2N, N the PB size for k columns."""
    return 2 * pb_size(k)


def design_name(design: str) -> DesignName:
    """``design`` as a design name, or a :class:`DesignError` naming the choices."""
    for name in DESIGNS:
        if design == name:
            return name
    raise DesignError(f"unknown design {design!r}; choose one of {', '.join(DESIGNS)}")


def rows_for(design: str, k: int) -> int:
    """Rows (cells) of ``design`` for ``k`` pieces."""
    return screening_rows(k) if design_name(design) == "screening" else k + 1


def screening_design(pieces: tuple[str, ...] | list[str]) -> Design:
    """The folded-over PB design over ``pieces`` (row 0 keeps every piece, row N removes every piece)."""
    ids = tuple(pieces)
    _check_pieces(ids)
    half = pb_columns(len(ids)) > 0
    folded = np.vstack([half, ~half])
    n = half.shape[0]
    return Design(
        "screening",
        ids,
        tuple(tuple(bool(v) for v in row) for row in folded),
        f"folded-over Plackett–Burman N={n}: {2 * n} rows for {len(ids)} pieces",
    )


def one_out_design(pieces: tuple[str, ...] | list[str]) -> Design:
    """The control (row 0) and one row per piece removing only that piece."""
    ids = tuple(pieces)
    _check_pieces(ids)
    rows = [tuple(True for _ in ids)] + [tuple(j != i for j in range(len(ids))) for i in range(len(ids))]
    return Design("one-out", ids, tuple(rows), f"leave-one-out: control + {len(ids)} cells")


def default_design(k: int) -> DesignName:
    """``one-out`` up to :data:`ONE_OUT_DEFAULT_MAX` pieces, ``screening`` beyond."""
    return "one-out" if k <= ONE_OUT_DEFAULT_MAX else "screening"


def make_design(design: str, pieces: tuple[str, ...] | list[str]) -> Design:
    """The named design over ``pieces`` (a run draws a screening design's columns: :func:`draw_columns`)."""
    return screening_design(pieces) if design_name(design) == "screening" else one_out_design(pieces)


def min_sessions(design: str, k: int, tasks: int) -> int:
    """The fewest sessions ``design`` can run: one repeat of every row on every task."""
    if tasks < 1:
        raise DesignError(f"{tasks} task(s): a run needs at least one task")
    if k < 2:
        raise DesignError(f"{k} piece(s): attribution needs at least two pieces")
    return rows_for(design, k) * tasks


def repeats_within(design: str, k: int, tasks: int, max_sessions: int) -> int:
    """The most whole repeats (every row on every task) that fit in ``max_sessions`` (0: not even one)."""
    return max_sessions // min_sessions(design, k, tasks)


@dataclass(frozen=True)
class BudgetRefusal:
    """A design that does not fit ``--max-sessions``: what it needs at least, and the message to print."""

    design: str
    pieces: int
    tasks: int
    rows: int
    minimum: int
    max_sessions: int

    @property
    def message(self) -> str:
        return (
            f"--max-sessions {self.max_sessions}: the {self.design} design for {self.pieces} pieces has "
            f"{self.rows} cells, so one repeat of {self.tasks} task(s) is {self.minimum} sessions; raise "
            f"--max-sessions to at least {self.minimum}, or pick fewer pieces (--pieces ID,...) or tasks"
        )


def budget_refusal(design: str, k: int, tasks: int, max_sessions: int | None) -> BudgetRefusal | None:
    """None when one repeat of ``design`` fits in ``max_sessions`` (or there is no limit), else the refusal."""
    minimum = min_sessions(design, k, tasks)
    if max_sessions is None or max_sessions >= minimum:
        return None
    return BudgetRefusal(design, k, tasks, rows_for(design, k), minimum, max_sessions)

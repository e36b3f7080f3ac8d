"""``ablate run --pieces``: a per-piece design as the run's cells (docs/PIECES.md#runs): row 0 is the control
``C0``, row i the cell of index i; the manifest records the design, so the report rebuilds each piece's effect
from the run folder alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ablate.core.constants import DEFAULT_MIN_EFFECT
from ablate.core.errors import UsageError
from ablate.folder.design import DesignPiece, DesignRow, PieceDesignRecord
from ablate.folder.layout import RunManifest
from ablate.run.piece_confirm import NONE, confirm_plan, named_pairs, named_pieces, reserve_refusal
from ablate.setup.cells import CellSet, ResolvedCell
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup
from ablate.setup.piece_cells import CONTROL, piece_cells
from ablate.setup.piece_cut import require_pieces, select_pieces
from ablate.setup.pieces import Piece, setup_pieces
from ablate.stats.screening import (
    MAX_DRAWS,
    Design,
    DesignError,
    budget_refusal,
    default_design,
    draw_columns,
    make_design,
    repeats_within,
)


@dataclass(frozen=True)
class PieceRequest:
    """``--pieces``, ``--design`` and ``--max-sessions`` as given."""

    spec: str
    """``all`` or comma-separated piece ids."""
    design: str | None = None
    max_sessions: int | None = None
    min_effect: float = DEFAULT_MIN_EFFECT
    confirm: str | None = None
    """``--confirm``: ``ID,...`` confirmed whatever the screening finds, ``none`` (no confirmation stage), or
    None (the pieces the screening marks real)."""
    pairs: str | None = None
    """``--pairs``: ``A+B,...`` whose interaction the stage estimates, besides the pairs of real pieces."""


@dataclass(frozen=True)
class PiecePlan:
    """What a piece run runs: the cells, the design record for the manifest and the repeats that fit."""

    cell_set: CellSet
    record: PieceDesignRecord
    repeats: int


def chosen_pieces(setup: Setup, catalog: Catalog, spec: str) -> list[Piece]:
    """The pieces ``--pieces`` names (``all``: every piece of the setup), at least two."""
    pieces = setup_pieces(setup, catalog)
    ids = [i.strip() for i in spec.split(",") if i.strip()]
    if not ids:
        raise UsageError(
            "--pieces is empty", hint="pass --pieces all, or --pieces ID,ID,... (`ablate pieces`)"
        )
    if ids != ["all"]:
        pieces = select_pieces(pieces, ids)
    require_pieces(pieces, where=f"--pieces {spec}")
    return pieces


def _design(pieces: list[Piece], name: str | None) -> Design:
    try:
        return make_design(name or default_design(len(pieces)), [p.id for p in pieces])
    except DesignError as exc:
        raise UsageError(f"--design {name}: {exc}", hint="--design screening or --design one-out") from exc


def _repeats(
    design: Design, tasks: int, req: PieceRequest, repeats: int, repeats_given: bool, reserve: int = 0
) -> int:
    """``--repeats``, or with only ``--max-sessions`` as many as fit beside the stage's ``reserve``."""
    refusal = budget_refusal(design.name, design.k, tasks, req.max_sessions)
    if refusal is not None:
        raise UsageError(refusal.message)
    if req.max_sessions is None:
        return repeats
    fit = repeats_within(design.name, design.k, tasks, req.max_sessions - reserve)
    if not repeats_given:
        return fit
    if repeats > fit:
        per = len(design.rows) * tasks
        raise UsageError(
            f"--repeats {repeats} with --max-sessions {req.max_sessions}: the {design.name} design runs {per} "
            f"sessions a repeat, {per * repeats} in all",
            hint=f"pass --repeats {fit} or fewer, or raise --max-sessions to {per * repeats + reserve}",
        )
    return repeats


def record_of(
    design: Design, pieces: list[Piece], cell_ids: list[str], min_effect: float
) -> PieceDesignRecord:
    """The manifest's record of ``design``: row i runs in cell ``cell_ids[i]``."""
    return PieceDesignRecord(
        kind=design.name,
        construction=design.construction,
        pieces=[
            DesignPiece(id=p.id, layer=p.layer, kind=p.kind, tokens=p.est_tokens, tokens_source="estimate")
            for p in pieces
        ],
        rows=[
            DesignRow(cell=c, keeps=list(r), draw=None if design.groups is None else design.groups[i])
            for i, (c, r) in enumerate(zip(cell_ids, design.rows, strict=True))
        ],
        min_effect=min_effect,
        drawn=design.drawn,
    )


def plan_pieces(
    setup: Setup,
    catalog: Catalog,
    req: PieceRequest,
    *,
    tasks: int,
    repeats: int,
    repeats_given: bool,
    seed: int,
    clashes: Sequence[str] = (),
) -> PiecePlan:
    """The cells, design record and repeats of ``ablate run --pieces`` (exit 2 for anything that cannot run);
    ``seed`` draws a screening design's columns, ``clashes`` are options that choose cells otherwise."""
    if clashes:
        said = " and ".join(clashes)
        raise UsageError(
            f"--pieces and {said}: a piece run's cells are its design's rows",
            hint=f"drop {said}, or drop --pieces to compare layers",
        )
    pieces = chosen_pieces(setup, catalog, req.spec)
    design = _design(pieces, req.design)
    named = named_pieces(pieces, req.confirm)
    pairs = named_pairs(pieces, req.pairs)
    staged = design.name == "screening" and (req.confirm or "").strip() != NONE
    for option, value, given in (("--confirm", req.confirm, named), ("--pairs", req.pairs, pairs)):
        if given and not staged:
            why = (
                f"with the {design.name} design: its effects are removal effects already"
                if design.name != "screening"
                else "with --confirm none: no stage runs to estimate them in"
            )
            raise UsageError(
                f"{option} {value} {why}", hint=f"drop {option}, or pass --design screening (and a stage)"
            )
    needs = len({p.id for p in named} | {p.id for pair in pairs for p in pair})
    refusal = reserve_refusal(design.name, len(design.rows), tasks, needs, req.max_sessions, pairs=len(pairs))
    if refusal is not None:
        raise refusal
    reserve = (1 + needs + len(pairs)) * tasks if needs else 0
    planned = _repeats(design, tasks, req, repeats, repeats_given, reserve)
    if design.name == "screening":  # its columns drawn at random: docs/PIECES.md#drawn
        design = draw_columns(design, seed, draws=min(planned, MAX_DRAWS))
    control = design.control_row
    if control != 0:  # both designs put the untouched setup first; the cells rely on it
        raise UsageError(f"--design {design.name}: the design has no control row first")
    cell_set = piece_cells(
        pieces, [design.removed(i) for i in range(1, len(design.rows))], name=f"pieces-{design.name}"
    )
    ids = [c.id for c in cell_set.cells]
    record = record_of(design, pieces, ids, req.min_effect)
    if staged:
        extra, stage = confirm_plan(
            pieces, named, first_index=len(ids), first_repeat=planned, max_sessions=req.max_sessions,
            pairs=pairs,
        )  # fmt: skip
        cell_set = replace(cell_set, cells=(*cell_set.cells, *extra))
        record = record.model_copy(update={"confirm": stage})
    return PiecePlan(cell_set, record, planned)


def design_cell_set(manifest: RunManifest) -> CellSet:
    """A piece run's cells rebuilt from its manifest (a resume or a planned shard: no cell-set file)."""
    cells = tuple(
        ResolvedCell(
            id=c.id,
            index=int(c.dirname.lstrip("c")),
            label=c.label,
            stripped=tuple(c.stripped),
            empty_config=c.empty_config,
            pieces=tuple(c.pieces),
        )
        for c in manifest.cells
    )
    control = next((c.id for c in cells if c.is_control), CONTROL)
    return CellSet(
        name=manifest.cell_set,
        description=f"{len(cells) - 1} piece cells",
        control=control,
        cells=cells,
        source=Path(f"<{manifest.cell_set}>"),
    )

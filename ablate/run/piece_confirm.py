"""The one-out confirmation stage of a screening piece run (docs/PIECES.md#confirm).

A screening design estimates each piece's *average contribution* over its sub-setups; the user's question is
usually another: what deleting the piece from the full setup does. So, in the same run, every piece the
screening marks real and every piece named with ``--confirm ID,...`` is confirmed by a one-out stage: its cell
is the full setup without that piece, and after the screening the stage runs blocks of its own (repeats
``first_repeat`` on), each the control and the confirmed pieces' cells in one shuffled sweep.

* At plan time (:func:`confirm_plan`): a one-out cell per candidate piece (every piece, or only the named ones
  when the design and a cell per piece would pass the 99-cell limit) and the record of the stage
  (:class:`~ablate.folder.design.ConfirmPlan`); the budget check reserves one block for the named pieces.
* After the screening (:func:`stage_items`): which pieces are real (the last adaptive look's decisions, or
  the fixed-n analysis of the pass/fail primary at α :data:`ALPHA`), and the stage's blocks: as many sessions
  as the screening ran, shared between the control and the confirmed cells, within ``--max-sessions``.
* :func:`confirming`: the rounds driver that runs the screening, then the stage, in one execution.

The report (:mod:`ablate.report.pieces`) compares each confirmed cell with the control on the stage's blocks
alone, Holm over the confirmed pieces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ablate.core.errors import UsageError
from ablate.folder.adaptive import read_state
from ablate.folder.design import ConfirmPlan
from ablate.folder.layout import PlanItem, RunFolder, RunManifest
from ablate.folder.result import ItemResult, iter_results
from ablate.setup.cells import ResolvedCell
from ablate.setup.piece_cells import MAX_ROWS
from ablate.setup.piece_cut import select_pieces
from ablate.setup.pieces import Piece
from ablate.stats.screening import DesignError
from ablate.stats.screening_inference import analyse

#: The screening's α when it decides which pieces the stage confirms (the report's default α).
ALPHA = 0.05
#: ``--confirm none``: no confirmation stage.
NONE = "none"


def named_pieces(pieces: Sequence[Piece], spec: str | None) -> list[Piece]:
    """The pieces ``--confirm`` names, among the run's pieces (an unknown id: the nearest, exit 2)."""
    if spec is None or spec.strip() == NONE:
        return []
    ids = [i.strip() for i in spec.split(",") if i.strip()]
    if not ids:
        raise UsageError("--confirm is empty", hint="pass --confirm ID,ID,... (ids of --pieces), or none")
    return select_pieces(pieces, ids, where=f"--confirm {spec}")


def confirm_plan(
    pieces: Sequence[Piece],
    named: Sequence[Piece],
    *,
    first_index: int,
    first_repeat: int,
    max_sessions: int | None,
) -> tuple[list[ResolvedCell], ConfirmPlan]:
    """The one-out cells (indices from ``first_index``) and the stage's record. Every piece gets a cell when
    they fit the 99-cell limit, else only the named ones (refused when even they do not fit)."""
    names = {p.id for p in named}
    room = MAX_ROWS - first_index + 1
    candidates = list(pieces) if len(pieces) <= room else [p for p in pieces if p.id in names]
    if len(candidates) > room:
        raise UsageError(
            f"--confirm: {len(candidates)} pieces need a one-out cell each, {room} fit beside the design's "
            f"{first_index} cells (at most {MAX_ROWS + 1})",
            hint=f"name at most {room} pieces in --confirm",
        )
    cells = [
        ResolvedCell(
            id=f"O{n:02d}",
            index=first_index + n - 1,
            label=f"no {p.id} (confirmation)",
            stripped=(),
            empty_config=False,
            pieces=(p.id,),
        )
        for n, p in enumerate(candidates, start=1)
    ]
    record = ConfirmPlan(
        named=[p.id for p in named],
        cells={p.id: c.id for p, c in zip(candidates, cells, strict=True)},
        first_repeat=first_repeat,
        max_sessions=max_sessions,
    )
    return cells, record


def reserve_refusal(
    design: str, rows: int, tasks: int, named: int, max_sessions: int | None
) -> UsageError | None:
    """``--max-sessions`` too small for one repeat of the design and one block of the named pieces."""
    minimum = (rows + 1 + named) * tasks
    if max_sessions is None or not named or max_sessions >= minimum:
        return None
    return UsageError(
        f"--max-sessions {max_sessions}: one repeat of the {design} design ({rows} cells) and one confirmation "
        f"block of the {named} piece(s) --confirm names (the control and {named} cells), on {tasks} task(s), "
        f"is {minimum} sessions",
        hint=f"raise --max-sessions to at least {minimum}, or name fewer pieces in --confirm",
    )


def marked_real(folder: RunFolder, manifest: RunManifest, results: Sequence[ItemResult]) -> list[str]:
    """The pieces the screening marks real: the last adaptive look's, or the fixed-n analysis's."""
    from ablate.run.piece_adaptive import piece_outcomes

    record = manifest.design
    assert record is not None
    state = read_state(folder)
    if state is not None:
        return [p for p, v in state.piece_decisions().items() if v.decision == "real"]
    outcomes, _order = piece_outcomes(manifest, record, results)
    try:
        got = analyse(record.design(), outcomes, binary=True, alpha=ALPHA, min_effect=record.min_effect)
    except DesignError:
        return []
    return [e.id for e in got.pieces if e.verdict in ("helps", "hurts")]


def stage_items(
    folder: RunFolder, manifest: RunManifest, plan: Sequence[PlanItem], results: Sequence[ItemResult]
) -> tuple[list[PlanItem], str | None]:
    """The confirmation stage's plan items after the screening, and a line saying what it confirms (no items:
    no stage, or it is planned already)."""
    from ablate.run.adaptive import next_round_items

    record = manifest.design
    stage = record.confirm if record is not None else None
    if record is None or stage is None or manifest.shard is not None:
        return [], None
    if any(not record.screens(p.repeat) for p in plan):
        return [], None  # planned already (a resume): plan.jsonl holds it
    real = set(marked_real(folder, manifest, results))
    why = {
        p: "named" if p in stage.named else "real at screening"
        for p in stage.cells
        if p in real or p in stage.named
    }
    if not why:
        return [], "confirmation: no piece is real at screening and --confirm names none"
    tasks = len(manifest.tasks)
    screened = sum(1 for p in plan if record.screens(p.repeat))
    blocks = stage_blocks(len(why), tasks=tasks, screened=screened, max_sessions=stage.max_sessions)
    if blocks < 1:  # the cap leaves no block for every real piece: the named ones keep their reserved one
        why = {p: w for p, w in why.items() if w == "named"}
        blocks = (
            stage_blocks(len(why), tasks=tasks, screened=screened, max_sessions=stage.max_sessions)
            if why
            else 0
        )
        if blocks < 1:
            return [], "confirmation: --max-sessions leaves no session for it"
    cells = [record.rows[0].cell, *(stage.cells[p] for p in why)]  # row 0: the control
    items: list[PlanItem] = []
    for r in range(stage.first_repeat, stage.first_repeat + blocks):
        items += next_round_items(manifest, [*plan, *items], cells, r)
    said = ", ".join(f"{p} ({w})" for p, w in why.items())
    return items, f"confirmation: {said}: {blocks} block(s) per task, {len(items)} sessions"


def stage_blocks(pieces: int, *, tasks: int, screened: int, max_sessions: int | None) -> int:
    """Blocks per task of a stage of ``pieces`` cells and the control: as many sessions as the screening ran,
    at least one block, within what ``max_sessions`` leaves."""
    per_block = (1 + pieces) * tasks
    blocks = max(1, screened // per_block)
    if max_sessions is not None:
        blocks = min(blocks, (max_sessions - screened) // per_block)
    return blocks


#: Runs every item of plan.jsonl with no complete result; returns the runner's outcome.
RunRound = Callable[[], str]


def confirm_after(
    folder: RunFolder, manifest: RunManifest, run_round: RunRound, say: Callable[[str], None]
) -> str | None:
    """Plan the stage once the screening has run, and run it (None: no stage to run)."""
    plan = folder.read_plan()
    items, said = stage_items(folder, manifest, plan, iter_results(folder))
    if said:
        say(said)
    if not items:
        return None
    folder.write_plan([*plan, *items])
    return run_round()


def confirming(
    folder: RunFolder, manifest: RunManifest, say: Callable[[str], None]
) -> Callable[[RunRound], None] | None:
    """A fixed piece run's rounds: the screening's plan, then the confirmation stage (None: no stage)."""
    if manifest.design is None or manifest.design.confirm is None or manifest.shard is not None:
        return None

    def drive(run_round: RunRound) -> None:
        if run_round() in ("finished", "failed-items"):
            confirm_after(folder, manifest, run_round, say)

    return drive

"""The one-out confirmation stage of a screening piece run (docs/PIECES.md#confirm): planned at plan time
(:func:`confirm_plan`), its blocks chosen after the screening (:func:`stage_items`), run by ``confirming``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ablate.core.errors import UsageError
from ablate.folder.adaptive import read_state
from ablate.folder.design import ConfirmPlan
from ablate.folder.layout import PlanItem, RunFolder, RunManifest
from ablate.folder.result import ItemResult, iter_results
from ablate.run.plan import next_round_items
from ablate.setup.cells import ResolvedCell
from ablate.setup.piece_cells import MAX_ROWS
from ablate.setup.piece_cut import select_pieces
from ablate.setup.pieces import Piece

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


def pair_key(a: str, b: str) -> str:
    """A pair's key in ``design.confirm.pairs`` and ``--pairs``: ``A+B``."""
    return f"{a}+{b}"


def named_pairs(pieces: Sequence[Piece], spec: str | None) -> list[tuple[Piece, Piece]]:
    """The pairs ``--pairs A+B,...`` names, each in the setup's order (an unknown id: the nearest, exit 2)."""
    if spec is None:
        return []
    said = [s.strip() for s in spec.split(",") if s.strip()]
    if not said:
        raise UsageError("--pairs is empty", hint="pass --pairs A+B,C+D (ids of --pieces)")
    out: list[tuple[Piece, Piece]] = []
    for text in said:
        ids = [i.strip() for i in text.split("+")]
        if len(ids) != 2 or not all(ids):
            raise UsageError(f"--pairs {spec}: {text!r} is not a pair", hint="a pair is two piece ids: A+B")
        if ids[0] == ids[1]:
            raise UsageError(
                f"--pairs {spec}: {text!r} pairs a piece with itself", hint="a pair is two different pieces"
            )
        a, b = select_pieces(pieces, ids, where=f"--pairs {spec}")
        if (a, b) not in out:
            out.append((a, b))
    return out


def confirm_plan(
    pieces: Sequence[Piece],
    named: Sequence[Piece],
    *,
    first_index: int,
    first_repeat: int,
    max_sessions: int | None,
    pairs: Sequence[tuple[Piece, Piece]] = (),
) -> tuple[list[ResolvedCell], ConfirmPlan]:
    """The one-out cells (indices from ``first_index``), the pair cells and the stage's record: every piece
    and pair gets a cell when all fit the cell limit, else only the named ones (refused when they do not fit)."""
    confirm_named = list(named)
    named = [*named, *(p for pair in pairs for p in pair if p not in named)]
    names = {p.id for p in named}
    room = MAX_ROWS - first_index + 1
    candidates = list(pieces) if len(pieces) <= room else [p for p in pieces if p.id in names]
    if len(candidates) > room:
        raise UsageError(
            f"--confirm: {len(candidates)} pieces need a one-out cell each, {room} fit beside the design's "
            f"{first_index} cells (at most {MAX_ROWS + 1})",
            hint=f"name at most {room} pieces in --confirm",
        )

    def cut(cell_id: str, index: int, label: str, ids: tuple[str, ...]) -> ResolvedCell:
        return ResolvedCell(id=cell_id, index=index, label=label, stripped=(), empty_config=False, pieces=ids)

    cells = [
        cut(f"O{n:02d}", first_index + n - 1, f"no {p.id} (confirmation)", (p.id,))
        for n, p in enumerate(candidates, start=1)
    ]
    index = {p.id: i for i, p in enumerate(pieces)}
    every = [(a, b) for i, a in enumerate(candidates) for b in candidates[i + 1 :]]
    room -= len(cells)
    chosen = every if len(every) <= room else list(pairs)
    if len(chosen) > room:
        raise UsageError(
            f"--pairs: {len(chosen)} pairs need a cell each, {room} fit beside the design's and the one-out "
            f"cells (at most {MAX_ROWS + 1})",
            hint=f"name at most {room} pairs in --pairs",
        )
    chosen = sorted(chosen, key=lambda ab: (index[ab[0].id], index[ab[1].id]))
    pair_cells = [
        cut(f"Q{n:02d}", first_index + len(cells) + n - 1, f"no {a.id}, {b.id} (interaction)", (a.id, b.id))
        for n, (a, b) in enumerate(chosen, start=1)
    ]
    record = ConfirmPlan(
        named=[p.id for p in confirm_named],
        cells={p.id: c.id for p, c in zip(candidates, cells, strict=True)},
        pairs={pair_key(a.id, b.id): c.id for (a, b), c in zip(chosen, pair_cells, strict=True)},
        named_pairs=[pair_key(a.id, b.id) for a, b in pairs],
        first_repeat=first_repeat,
        max_sessions=max_sessions,
    )
    return [*cells, *pair_cells], record


def reserve_refusal(
    design: str, rows: int, tasks: int, named: int, max_sessions: int | None, pairs: int = 0
) -> UsageError | None:
    """``--max-sessions`` too small for one repeat of the design and a block of the ``named`` pieces and pairs."""
    minimum = (rows + 1 + named + pairs) * tasks
    if max_sessions is None or not named or max_sessions >= minimum:
        return None
    what = (
        f"the {named} piece(s) --confirm and --pairs name"
        if pairs
        else f"the {named} piece(s) --confirm names"
    )
    cells = (
        f"the control, {named} one-out and {pairs} pair cells" if pairs else f"the control and {named} cells"
    )
    return UsageError(
        f"--max-sessions {max_sessions}: one repeat of the {design} design ({rows} cells) and one confirmation "
        f"block of {what} ({cells}), on {tasks} task(s), is {minimum} sessions",
        hint=f"raise --max-sessions to at least {minimum}, or name fewer pieces in --confirm"
        + (" or pairs in --pairs" if pairs else ""),
    )


def marked_real(folder: RunFolder, manifest: RunManifest, results: Sequence[ItemResult]) -> list[str]:
    """The pieces the screening marks real: the last adaptive look's, or the fixed-n analysis's."""
    from ablate.run.piece_adaptive import piece_outcomes
    from ablate.stats.screening import DesignError, design_of
    from ablate.stats.screening_inference import analyse

    record = manifest.design
    assert record is not None
    state = read_state(folder)
    if state is not None:
        return [p for p, v in state.piece_decisions().items() if v.decision == "real"]
    outcomes, _removals, _order = piece_outcomes(manifest, record, results)
    try:
        got = analyse(design_of(record), outcomes, binary=True, alpha=ALPHA, min_effect=record.min_effect)
    except DesignError:
        return []
    return [e.id for e in got.pieces if e.verdict in ("helps", "hurts")]


def stage_items(
    folder: RunFolder, manifest: RunManifest, plan: Sequence[PlanItem], results: Sequence[ItemResult]
) -> tuple[list[PlanItem], str | None]:
    """The confirmation stage's plan items after the screening, and a line saying what it confirms."""
    record = manifest.design
    stage = record.confirm if record is not None else None
    if record is None or stage is None or manifest.shard is not None:
        return [], None
    if any(not record.screens(p.repeat) for p in plan):
        return [], None  # planned already (a resume): plan.jsonl holds it
    model_of = {p.item: p.model for p in plan}  # a run of several models: a piece real on any is confirmed
    real = set().union(
        *(
            marked_real(folder, manifest, [r for r in results if model_of.get(r.item) == m])
            for m in (manifest.models or (None,))
        )
    )
    in_pairs = {p for key in stage.named_pairs for p in key.split("+")}
    why = {
        p: "named" if p in stage.named or p in in_pairs else "real at screening"
        for p in stage.cells
        if p in real or p in stage.named or p in in_pairs
    }
    if not why:
        return [], "confirmation: no piece is real at screening and --confirm names none"
    tasks = len(manifest.tasks) * max(1, len(manifest.models))  # sessions per cell and block
    screened = sum(1 for p in plan if record.screens(p.repeat))

    def blocks_for(cells: int) -> int:
        return stage_blocks(cells, tasks=tasks, screened=screened, max_sessions=stage.max_sessions)

    pairs = stage_pairs(stage, why)
    blocks = blocks_for(len(why) + len(pairs))
    if blocks < 1:  # the cap leaves no block for every real piece: the named ones keep their reserved one
        why = {p: w for p, w in why.items() if w == "named"}
        pairs = stage_pairs(stage, why)
        blocks = blocks_for(len(why) + len(pairs)) if why else 0
        if blocks < 1:
            return [], "confirmation: --max-sessions leaves no session for it"
    cells = [record.rows[0].cell, *(stage.cells[p] for p in why), *(stage.pairs[k] for k in pairs)]
    items: list[PlanItem] = []
    for r in range(stage.first_repeat, stage.first_repeat + blocks):
        items += next_round_items(manifest, [*plan, *items], cells, r)
    said = ", ".join(f"{p} ({w})" for p, w in why.items())
    if pairs:
        said += "; interactions of " + ", ".join(pairs)
    return items, f"confirmation: {said}: {blocks} block(s) per task, {len(items)} sessions"


def stage_pairs(stage: ConfirmPlan, confirmed: dict[str, str]) -> list[str]:
    """The pairs the stage estimates: the named ones and those of pieces real at screening, in record order."""
    real = {p for p, w in confirmed.items() if w == "real at screening"}
    return [key for key in stage.pairs if key in stage.named_pairs or all(p in real for p in key.split("+"))]


def stage_blocks(pieces: int, *, tasks: int, screened: int, max_sessions: int | None) -> int:
    """Blocks per task of a stage of ``pieces`` cells and the control: as many sessions as the screening ran
    (at least one block), within ``max_sessions``."""
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

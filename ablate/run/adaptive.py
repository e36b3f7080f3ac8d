"""Adaptive runs: rounds of (task, repeat) blocks over the cells still undecided, a look after every round
(docs/ARCHITECTURE.md#statistics, #inert-tasks, #replan); every figure is recomputed from the results, so a
resume (even after kill -9 mid-round) continues the same analysis, never scheduling an item twice."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ablate.core.errors import UsageError
from ablate.folder.adaptive import (
    ADAPTIVE_FILE,
    AdaptiveOptions,
    AdaptiveState,
    CellLook,
    Look,
    PieceLook,
    StopReason,
    control_of,
    read_state,
    write_state,
)
from ablate.folder.layout import PlanItem, RunFolder, RunManifest, utcnow
from ablate.folder.result import ItemResult, iter_results
from ablate.run.plan import next_round_items
from ablate.stats.adaptive import analyse, discordance, inert_after, primary_outcome

if TYPE_CHECKING:
    from ablate.run.execute import ExecuteRequest, ExecutionResult
    from ablate.run.prepare import PreparedRun
    from ablate.run.scheduler import Progress

#: How a run of items ended (the runner's outcomes).
RunOutcome = str
#: Runs the given plan items (already written to plan.jsonl) to completion; returns the runner's outcome
#: (``finished``, ``failed-items``, ``budget``, ``rate-limited``, ``interrupted``).
RunItems = Callable[[Sequence[PlanItem]], RunOutcome]


@dataclass
class AdaptiveSummary:
    """What an adaptive invocation did."""

    state: AdaptiveState
    rounds_run: int
    """Rounds this invocation ran (a resumed partial round counts)."""
    last_outcome: RunOutcome | None
    """The last round's runner outcome."""
    notes: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.state.stopped in ("decided", "max-repeats", "budget", "tasks-inert")

    def to_json(self) -> dict[str, Any]:
        decisions: dict[str, CellLook | PieceLook] = {
            **self.state.decisions(),
            **self.state.piece_decisions(),
        }
        return {
            "stopped": self.state.stopped,
            "rounds": len(self.state.looks),
            "rounds_run": self.rounds_run,
            "sessions": self.state.looks[-1].sessions if self.state.looks else 0,
            "decisions": {c: {"decision": v.decision, "reason": v.reason} for c, v in decisions.items()},
            "inert": dict(self.state.inert),
        }


def start_state(folder: RunFolder, manifest: RunManifest, options: AdaptiveOptions | None) -> AdaptiveState:
    """The run's adaptive state: read back on a resume; on a fresh run made, and the plan emptied to grow a
    round at a time. A fixed run's folder (results, no adaptive.json) is refused."""
    state = read_state(folder)
    if state is not None:
        return state
    if options is None:
        raise UsageError(f"{folder.root}: not an adaptive run (no {ADAPTIVE_FILE})")
    if iter_results(folder):
        raise UsageError(
            f"{folder.root}: a fixed run with results cannot become adaptive",
            hint="start a new run with --adaptive",
        )
    if manifest.shard is not None:
        raise UsageError("--adaptive cannot run one shard: every round needs every cell's last look")
    state = AdaptiveState(options=options, control=control_of(manifest))
    folder.write_plan([])
    write_state(folder, state)
    return state


def run_adaptive(
    folder: RunFolder,
    manifest: RunManifest,
    run_items: RunItems,
    options: AdaptiveOptions | None = None,
    *,
    on_look: Callable[[Look], None] | None = None,
) -> AdaptiveSummary:
    """Drive an adaptive run to its end (or to an interruption, after which a resume continues it)."""
    state = start_state(folder, manifest, options)
    opts = state.options
    rounds_run = 0
    outcome: RunOutcome | None = None
    notes: list[str] = []
    plan = folder.read_plan()
    pending = _pending(folder, plan, manifest)
    state = state.model_copy(update={"stopped": None, "stopped_at": None})
    while True:
        if pending:
            outcome = run_items(pending)
            rounds_run += 1
            plan = folder.read_plan()  # with the attempts the runner recorded: the next write keeps them
            if outcome == "interrupted" or outcome == "rate-limited":
                why: StopReason = "interrupted" if outcome == "interrupted" else "rate-limited"
                return AdaptiveSummary(_stop(folder, state, why), rounds_run, outcome, notes)
            if outcome == "failed-items":
                notes.append(
                    f"round {_rounds(plan, manifest)}: some items failed; their blocks leave the comparison"
                )
        results = iter_results(folder)
        done = _rounds(plan, manifest)
        if done and (not state.looks or state.looks[-1].round < done):
            look = _look(manifest, results, opts, state, done)
            state = state.model_copy(update={"looks": [*state.looks, look]})
            if on_look is not None:
                on_look(look)
        if done:
            state = _replan(manifest, results, state, done)
            write_state(folder, state)
        active = _active(manifest, state) if done else None
        spend = sum(r.cost_usd or 0.0 for r in results)
        if active == []:
            return AdaptiveSummary(_stop(folder, state, "decided"), rounds_run, outcome, notes)
        if len(state.inert) == len(manifest.tasks):
            return AdaptiveSummary(_stop(folder, state, "tasks-inert"), rounds_run, outcome, notes)
        if done >= opts.max_repeats:
            return AdaptiveSummary(_stop(folder, state, "max-repeats"), rounds_run, outcome, notes)
        if outcome == "budget" or (opts.budget_usd is not None and spend >= opts.budget_usd):
            return AdaptiveSummary(_stop(folder, state, "budget"), rounds_run, outcome, notes)
        cells = [state.control, *(active if active is not None else _tested(manifest, state.control))]
        new = next_round_items(manifest, plan, _round_cells(manifest, state, cells, done), done, state.inert)
        plan = [*plan, *new]
        folder.write_plan(plan)
        pending = new


def look_line(look: Look) -> str:
    """One look in a line: round, sessions and spend so far, how many cells each decision holds."""
    counts: dict[str, int] = {}
    looks: list[CellLook | PieceLook] = [*look.cells.values(), *look.pieces.values()]
    for v in looks:
        counts[v.decision] = counts.get(v.decision, 0) + 1
    said = ", ".join(f"{n} {d}" for d, n in sorted(counts.items()))
    return f"round {look.round}: {look.sessions} sessions, ${look.spend_usd:.4f}; {said}"


def _look(
    manifest: RunManifest,
    results: Sequence[ItemResult],
    opts: AdaptiveOptions,
    state: AdaptiveState,
    done: int,
) -> Look:
    from ablate.run.piece_adaptive import piece_looks

    t0 = time.perf_counter()
    cells = analyse(manifest, results, opts, state.control) if manifest.design is None else {}
    pieces = piece_looks(manifest, results, opts, state.replans[0].round if state.replans else None)
    return Look(
        round=done,
        at=utcnow(),
        sessions=sum(1 for r in results if r.complete),
        spend_usd=round(sum(r.cost_usd or 0.0 for r in results), 6),
        analysis_s=round(time.perf_counter() - t0, 4),
        cells=cells,
        pieces=pieces,
    )


def _replan(
    manifest: RunManifest, results: Sequence[ItemResult], state: AdaptiveState, done: int
) -> AdaptiveState:
    """After round ``done``'s look: drop the tasks inert long enough (:func:`ablate.stats.adaptive.inert_after`)
    and, in a piece run, re-plan for the pieces still undecided; both recorded in adaptive.json."""
    from ablate.run.piece_adaptive import next_replan

    opts = state.options
    need = inert_after(opts.min_effect, opts.draw_beta)
    scored = (r for r in results if _screens(manifest, r.repeat))
    seen = discordance(
        {(r.task, r.cell, r.repeat): v for r in scored if (v := primary_outcome(r)) is not None}
    )
    inert = {
        t: done for t, (blocks, odd) in seen.items() if not odd and blocks >= need and t not in state.inert
    }
    replan = next_replan(manifest, state, done)
    return state.model_copy(
        update={"inert": {**state.inert, **inert}, "replans": [*state.replans, *([replan] if replan else [])]}
    )


def _round_cells(manifest: RunManifest, state: AdaptiveState, cells: list[str], repeat: int) -> list[str]:
    """The cells of round ``repeat``: ``cells``, or in a piece run the design's (or re-plan's)."""
    design = manifest.design
    if design is None:
        return cells
    if state.replans:
        out = design.one_out_cells() or {}
        return [state.control, *(out[p] for p in state.replans[-1].pieces)]
    return design.cells_in(repeat)


def _active(manifest: RunManifest, state: AdaptiveState) -> list[str]:
    """The cells still to run (a piece run: every cell while any piece is undecided)."""
    if manifest.design is not None:
        pieces = state.piece_decisions().values()
        undecided = not pieces or any(v.decision == "undecided" for v in pieces)
        return _tested(manifest, state.control) if undecided else []
    return [c for c, v in state.decisions().items() if v.decision == "undecided"]


def _tested(manifest: RunManifest, control: str) -> list[str]:
    return [c.id for c in manifest.cells if c.id != control]


def _rounds(plan: Sequence[PlanItem], manifest: RunManifest) -> int:
    """Rounds scheduled so far (round r holds repeat r; a confirmation stage is no round)."""
    return max((p.repeat for p in plan if _screens(manifest, p.repeat)), default=-1) + 1


def _pending(folder: RunFolder, plan: Sequence[PlanItem], manifest: RunManifest) -> list[PlanItem]:
    done = {r.item for r in iter_results(folder) if r.complete}
    return [p for p in plan if p.item not in done and _screens(manifest, p.repeat)]


def _screens(manifest: RunManifest, repeat: int) -> bool:
    """Whether the block of ``repeat`` is an adaptive round (not a block of the confirmation stage)."""
    return manifest.design is None or manifest.design.screens(repeat)


def _stop(folder: RunFolder, state: AdaptiveState, why: StopReason) -> AdaptiveState:
    state = state.model_copy(update={"stopped": why, "stopped_at": utcnow()})
    write_state(folder, state)
    return state


def execute_adaptive(
    prepared: PreparedRun,
    request: ExecuteRequest,
    options: AdaptiveOptions | None,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> tuple[ExecutionResult, AdaptiveSummary]:
    """:func:`run_adaptive`'s rounds as the passes of one :func:`ablate.run.execute.execute` (one login check,
    guard and lock; environments kept across rounds); ``options`` None: a resume, which keeps the folder's."""
    from ablate.run.execute import RunRound, execute

    say = on_note or (lambda _text: None)
    summaries: list[AdaptiveSummary] = []

    def drive(run_round: RunRound) -> None:
        from ablate.run.piece_confirm import confirm_after

        summaries.append(
            run_adaptive(
                prepared.folder,
                prepared.manifest,
                lambda _items: run_round(),
                options,
                on_look=lambda look: say(look_line(look)),
            )
        )
        if summaries[-1].finished and summaries[-1].state.stopped != "budget":
            confirm_after(prepared.folder, prepared.manifest, run_round, say)

    done = execute(prepared, request, on_progress=on_progress, on_note=on_note, rounds=drive)
    (summary,) = summaries
    return done, summary

"""Adaptive runs: rounds of (task, repeat) blocks over the cells still undecided, a look after every round.

A round is one repeat of every task for every cell still undecided, plus the control while any cell needs it;
each (task, repeat) block keeps its cells in one shuffled sweep (``ablate.run.plan.block_order``) and blocks
stay paired. After each round :func:`analyse` computes, for every cell against the control, the anytime-valid
figures of ``ablate.stats.sequential`` on the binary primary outcome (pitfall-free), and each cell is
decided ``real`` (Holm-adjusted anytime p ≤ α over all the run's comparisons), ``no-effect`` (its futility
e-processes have rejected every effect of at least min-effect both ways at the draw error) or left ``undecided``; a decided
cell runs no more blocks. The run ends when every cell is decided, at ``max_repeats`` or at the budget.

Files: ``plan.jsonl`` holds only the rounds scheduled so far (the manifest's plan hash and item count describe
the largest plan, ``max_repeats`` repeats of every cell); ``adaptive.json`` holds the options and every look
(round, sessions so far, per-cell statistic, decisions and reasons). Every figure is recomputed from the
results at each look, so a resume (even after kill -9 mid-round) continues the same analysis: the items of a
scheduled round that have no complete result are run first, and no item is ever scheduled twice.

The driver runs items through a narrow interface, :data:`RunItems`: a callable that runs the given plan items
(already in ``plan.jsonl``) to completion and says how it ended. ``ablate run``/``ab`` and ``compare`` pass
one that runs a scheduler pass in environments kept across rounds (``ablate.run.execute.execute`` with
``rounds``): each cell's environment is built once per invocation, not once per round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from ablate.core.errors import RunFolderError, UsageError
from ablate.core.fsutil import atomic_write_bytes
from ablate.core.specs import Spec, read_json_object
from ablate.folder.layout import PlanItem, RunFolder, RunManifest, item_id, utcnow
from ablate.folder.result import ItemResult, iter_results
from ablate.run.plan import block_order
from ablate.stats.sequential import (
    DECISIONS,
    DEFAULT_DRAW_BETA,
    anytime_p,
    betting_cs,
    decide,
    discordant_path,
    futility_log_e,
    holm_adjust,
    prior_for,
)

if TYPE_CHECKING:
    from ablate.run.execute import ExecuteRequest, ExecutionResult
    from ablate.run.prepare import PreparedRun
    from ablate.run.scheduler import Progress

ADAPTIVE_FILE = "adaptive.json"
ADAPTIVE_SCHEMA_VERSION: Literal[1] = 1
#: The primary outcome the stopping rule reads.
PRIMARY = "pitfall_free"

#: How a run of items ended (the runner's outcomes).
RunOutcome = str
#: Runs the given plan items (already written to plan.jsonl) to completion; returns the runner's outcome
#: (``finished``, ``failed-items``, ``budget``, ``rate-limited``, ``interrupted``).
RunItems = Callable[[Sequence[PlanItem]], RunOutcome]

StopReason = Literal["decided", "max-repeats", "budget", "interrupted", "rate-limited"]


class AdaptiveOptions(Spec):
    """The stopping rule of an adaptive run (fixed when the run starts; a resume keeps them)."""

    max_repeats: int = Field(ge=1)
    """Rounds at most: a cell still undecided then stops undecided."""
    min_effect: float = Field(gt=0, lt=1)
    """The smallest difference in the primary rate worth finding; smaller ones are a draw."""
    alpha: float = Field(gt=0, lt=1)
    """Family-wise error of the "real" marks (Holm over all comparisons of the run)."""
    draw_beta: float = Field(default=DEFAULT_DRAW_BETA, gt=0, lt=0.5)
    """Largest chance that a cell whose effect is at least min-effect is called "no effect"."""
    budget_usd: float | None = Field(default=None, ge=0)
    """No round starts once the recorded spend reaches this."""


class CellLook(Spec):
    """One cell against the control at one look."""

    blocks: int
    """Paired blocks compared (both items complete and not flagged)."""
    gained: int
    """Blocks where only the cell was pitfall-free."""
    lost: int
    """Blocks where only the control was."""
    delta: float | None
    """Cell rate − control rate on those blocks."""
    e_value: float
    """The beta-binomial mixture e-value now."""
    p_anytime: float
    """1 / the largest e-value so far (capped at 1)."""
    p_holm: float
    """Holm-adjusted over every comparison of the run."""
    cs_low: float | None
    """Confidence sequence for delta at 1 − α (None: empty)."""
    cs_high: float | None
    futility_up: float = 1.0
    """Largest e-value so far against "the effect is at least +min-effect" (the "no effect" decision reads it
    and ``futility_down``: both at least 1 / draw_beta)."""
    futility_down: float = 1.0
    """Largest e-value so far against "the effect is at most −min-effect"."""
    draw_low: float | None = None
    draw_high: float | None = None
    """Runs recorded before the futility e-processes: the confidence sequence their "no effect" read."""
    decision: Literal["real", "no-effect", "undecided"]
    reason: str
    """The decision in words, with the figure that made it."""
    turns_blocks: int = 0
    """Secondary (never decides): blocks where both items report turns."""
    turns_delta: float | None = None
    """Mean paired difference in turns (cell − control)."""
    turns_cs_low: float | None = None
    """Confidence sequence for it at 1 − α (turns lie in [0, max turns], so differences are bounded)."""
    turns_cs_high: float | None = None


class Look(Spec):
    """The analysis after one round."""

    round: int
    """Rounds complete (1 = the first)."""
    at: str
    """ISO-8601 UTC time of the look."""
    sessions: int
    """Complete items of the run so far."""
    spend_usd: float
    """Recorded spend so far."""
    analysis_s: float
    """Wall time of the analysis."""
    cells: dict[str, CellLook]


class AdaptiveState(Spec):
    """adaptive.json."""

    schema_version: Literal[1] = ADAPTIVE_SCHEMA_VERSION
    options: AdaptiveOptions
    control: str
    """The control cell (strips nothing)."""
    primary: str = PRIMARY
    looks: list[Look] = Field(default_factory=list)
    stopped: StopReason | None = None
    """Why the run stopped (None: not yet)."""
    stopped_at: str | None = None

    def decisions(self) -> dict[str, CellLook]:
        """Each cell's latest figures and decision."""
        return dict(self.looks[-1].cells) if self.looks else {}


def state_path(folder: RunFolder) -> Path:
    return folder.root / ADAPTIVE_FILE


def read_state(folder: RunFolder) -> AdaptiveState | None:
    """adaptive.json, or None for a fixed run."""
    data = read_json_object(state_path(folder))
    if data is None:
        return None
    try:
        return AdaptiveState.model_validate(data)
    except ValueError as exc:
        raise RunFolderError(f"{state_path(folder)}: invalid adaptive state: {exc}") from exc


def write_state(folder: RunFolder, state: AdaptiveState) -> None:
    import orjson

    data = orjson.dumps(state.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
    atomic_write_bytes(state_path(folder), data + b"\n")


def control_of(manifest: RunManifest) -> str:
    """The cell that strips nothing (the first cell when every cell strips something)."""
    return next((c.id for c in manifest.cells if not c.stripped), manifest.cells[0].id)


# -------------------------------------------------------------------------------------------------- analysis


def primary_outcome(result: ItemResult) -> bool | None:
    """Pitfall-free, or None when the item does not count (failed, or flagged by its provenance)."""
    if not result.complete or result.flags:
        return None
    return not any(v for v in result.pitfall_hits.values())


def _turns(result: ItemResult) -> float | None:
    if primary_outcome(result) is None or result.turns is None:
        return None
    return float(result.turns)


def paired_outcomes(
    manifest: RunManifest,
    results: Sequence[ItemResult],
    cell: str,
    control: str,
    value: Callable[[ItemResult], Any] = primary_outcome,
) -> tuple[list[Any], list[Any]]:
    """The cell's and the control's values (default: the primary outcome) on their common blocks, in the order
    the blocks completed (:func:`block_time`).

    The anytime-valid figures are maxima over a path, so the path must be the one that happened in time: a
    block enters when the later of its two items finished, whatever its place in the plan (items of a round
    finish in any order; a failed item re-run by a resume completes its block rounds later). Plan order
    (repeat, then task) breaks ties (finish times are recorded to the second) and places results without a
    finish time (some recovered ones) first; neither depends on an outcome, which is what keeps each
    e-process a test (super)martingale along the path.
    """
    got: dict[tuple[str, str, int], tuple[Any, str | None]] = {}
    for r in results:
        v = value(r)
        if v is not None:
            got[(r.task, r.cell, r.repeat)] = (v, r.finished_at)
    blocks: list[tuple[tuple[float, int, int], Any, Any]] = []
    for rep in sorted({r for (_, _, r) in got}):
        for ti, t in enumerate(manifest.tasks):
            a, b = got.get((t.id, cell, rep)), got.get((t.id, control, rep))
            if a is not None and b is not None:
                blocks.append(((block_time(a[1], b[1]), rep, ti), a[0], b[0]))
    blocks.sort(key=lambda blk: blk[0])
    return [blk[1] for blk in blocks], [blk[2] for blk in blocks]


def block_time(*finished_at: str | None) -> float:
    """When a block was complete: the latest of its items' finish times (POSIX seconds; −inf when an item
    has none, so such blocks keep plan order ahead of the timed ones)."""
    from datetime import datetime

    times = []
    for f in finished_at:
        if f is None:
            return float("-inf")
        try:
            times.append(datetime.fromisoformat(f).timestamp())
        except ValueError:
            return float("-inf")
    return max(times)


def analyse(
    manifest: RunManifest, results: Sequence[ItemResult], options: AdaptiveOptions, control: str
) -> dict[str, CellLook]:
    """Every cell's anytime-valid figures and decision from the results so far (pure; no files)."""
    cells = [c.id for c in manifest.cells if c.id != control]
    if not cells:
        return {}
    pairs = [paired_outcomes(manifest, results, cell, control) for cell in cells]
    diffs = [np.asarray(xs, dtype=np.float64) - np.asarray(ys, dtype=np.float64) for xs, ys in pairs]
    cs = _last_bounds(diffs, 1.0, options.alpha)
    # the secondary outcome, turns: bounded by the run's largest --max-turns (a session stops there)
    bound = float(max([manifest.max_turns, *(t.max_turns or 0 for t in manifest.tasks)]))
    turn_pairs = [paired_outcomes(manifest, results, cell, control, _turns) for cell in cells]
    tdiffs = [np.asarray(xs, dtype=np.float64) - np.asarray(ys, dtype=np.float64) for xs, ys in turn_pairs]
    in_range = [d if bound > 0 and not np.any(np.abs(d) > bound) else d[:0] for d in tdiffs]
    tcs = _last_bounds(in_range, bound, options.alpha)
    figures: list[dict[str, Any]] = []
    for i, (xs, ys) in enumerate(pairs):
        f = _figures(xs, ys, cs[i], options.min_effect)
        f["turns_blocks"] = len(tdiffs[i])
        if len(in_range[i]):
            f.update(
                turns_delta=round(float(in_range[i].mean()), 6),
                turns_cs_low=tcs[i][0],
                turns_cs_high=tcs[i][1],
            )
        figures.append(f)
    p = np.array([f["p_anytime"] for f in figures], dtype=np.float64)
    up = np.log([f["futility_up"] for f in figures])
    down = np.log([f["futility_down"] for f in figures])
    codes = decide(p, up, down, alpha=options.alpha, beta=options.draw_beta)
    adjusted = holm_adjust(p)
    out: dict[str, CellLook] = {}
    for i, cell in enumerate(cells):
        f = figures[i]
        decision = DECISIONS[int(codes[i])]
        f["p_holm"] = float(adjusted[i])
        out[cell] = CellLook(**f, decision=decision, reason=_reason(decision, f, options))
    return out


Bounds = tuple[float | None, float | None]


def _last_bounds(diffs: Sequence[np.ndarray[Any, Any]], bound: float, alpha: float) -> list[Bounds]:
    """The betting confidence sequence's bounds after the last block of each series in [−bound, bound];
    series of one length are computed together (one vectorised pass instead of one per cell)."""
    out: list[Bounds] = [(None, None)] * len(diffs)
    for n in sorted({len(d) for d in diffs if len(d)}):
        idx = [i for i, d in enumerate(diffs) if len(d) == n]
        lo, hi = betting_cs(np.stack([diffs[i] for i in idx]), -bound, bound, alpha, every=n)
        for k, i in enumerate(idx):
            out[i] = (_num(lo[k, -1]), _num(hi[k, -1]))
    return out


def _figures(xs: list[bool], ys: list[bool], cs: Bounds, min_effect: float) -> dict[str, Any]:
    x, y = np.asarray(xs, dtype=bool), np.asarray(ys, dtype=bool)
    n = len(x)
    if n == 0:
        return dict(
            blocks=0, gained=0, lost=0, delta=None, e_value=1.0, p_anytime=1.0,
            cs_low=None, cs_high=None, futility_up=1.0, futility_down=1.0,
        )  # fmt: skip
    path = discordant_path(x, y, prior_for(min_effect))
    up, down = futility_log_e(x.astype(np.float64) - y, min_effect)
    return dict(
        blocks=n,
        gained=int(np.sum(x & ~y)),
        lost=int(np.sum(~x & y)),
        delta=float(np.mean(x.astype(np.float64) - y)),
        e_value=float(np.exp(path[-1])),
        p_anytime=float(anytime_p(path)[-1]),
        cs_low=cs[0],
        cs_high=cs[1],
        futility_up=float(np.exp(up[-1])),
        futility_down=float(np.exp(down[-1])),
    )


def _num(v: float) -> float | None:
    return None if np.isnan(v) else round(float(v), 6)


def _reason(decision: str, f: dict[str, Any], options: AdaptiveOptions) -> str:
    d, bar = (
        f"{100 * options.min_effect:.0f} pts",
        1.0 / options.draw_beta,
    )  # rate changes in pts, as the report
    if decision == "real":
        return (
            f"real: Holm-adjusted anytime p {f['p_holm']:.4g} <= {options.alpha} "
            f"({f['gained']} blocks gained, {f['lost']} lost of {f['blocks']})"
        )
    if decision == "no-effect":
        return (
            f"no effect of interest: effects of +{d} or more and of -{d} or less both rejected "
            f"(e-values {f['futility_up']:.3g} and {f['futility_down']:.3g} >= {bar:.3g}, "
            f"delta {100 * f['delta']:+.1f} pts) after {f['blocks']} blocks"
        )
    if f["blocks"] == 0:
        return "undecided: no paired blocks yet"
    return (
        f"undecided: anytime p {f['p_holm']:.3g} (Holm) > {options.alpha}, and the e-values against "
        f"an effect of +{d} or -{d} ({f['futility_up']:.3g}, {f['futility_down']:.3g}) have not both "
        f"reached {bar:.3g}"
    )


# ------------------------------------------------------------------------------------------------- the driver


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
        return self.state.stopped in ("decided", "max-repeats", "budget")

    def to_json(self) -> dict[str, Any]:
        decisions = self.state.decisions()
        return {
            "stopped": self.state.stopped,
            "rounds": len(self.state.looks),
            "rounds_run": self.rounds_run,
            "sessions": self.state.looks[-1].sessions if self.state.looks else 0,
            "decisions": {c: {"decision": v.decision, "reason": v.reason} for c, v in decisions.items()},
        }


def start_state(folder: RunFolder, manifest: RunManifest, options: AdaptiveOptions | None) -> AdaptiveState:
    """The run's adaptive state: read back on a resume, made (and the plan emptied) on a fresh run.

    A fresh adaptive run's folder was planned with ``max_repeats`` repeats; its plan is cut to nothing here
    and grows a round at a time. A folder with results but no adaptive.json is a fixed run: refused.
    """
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


def next_round_items(
    manifest: RunManifest, plan: Sequence[PlanItem], cells: Sequence[str], repeat: int
) -> list[PlanItem]:
    """The plan items of round ``repeat`` for ``cells`` (the control included), each block in its own shuffle."""
    items: list[PlanItem] = []
    order = max((p.order for p in plan), default=-1) + 1
    known = {p.item for p in plan}
    for t in manifest.tasks:
        for c in block_order(cells, seed=manifest.seed, task=t.id, repeat=repeat):
            iid = item_id(t.id, c, repeat)
            if iid in known:
                raise RunFolderError(f"plan.jsonl already holds {iid}: an adaptive round never runs twice")
            items.append(PlanItem(item=iid, task=t.id, cell=c, repeat=repeat, order=order + len(items)))
    return items


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
    pending = _pending(folder, plan)
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
                notes.append(f"round {_rounds(plan)}: some items failed; their blocks leave the comparison")
        results = iter_results(folder)
        done = _rounds(plan)
        if done and (not state.looks or state.looks[-1].round < done):
            look = _look(manifest, results, opts, state.control, done)
            state = state.model_copy(update={"looks": [*state.looks, look]})
            write_state(folder, state)
            if on_look is not None:
                on_look(look)
        active = [c for c, v in state.decisions().items() if v.decision == "undecided"] if done else None
        spend = sum(r.cost_usd or 0.0 for r in results)
        if active == []:
            return AdaptiveSummary(_stop(folder, state, "decided"), rounds_run, outcome, notes)
        if done >= opts.max_repeats:
            return AdaptiveSummary(_stop(folder, state, "max-repeats"), rounds_run, outcome, notes)
        if outcome == "budget" or (opts.budget_usd is not None and spend >= opts.budget_usd):
            return AdaptiveSummary(_stop(folder, state, "budget"), rounds_run, outcome, notes)
        cells = [state.control, *(active if active is not None else _tested(manifest, state.control))]
        new = next_round_items(manifest, plan, cells, done)
        plan = [*plan, *new]
        folder.write_plan(plan)
        pending = new


def look_line(look: Look) -> str:
    """One look in a line: round, sessions and spend so far, how many cells each decision holds."""
    counts: dict[str, int] = {}
    for v in look.cells.values():
        counts[v.decision] = counts.get(v.decision, 0) + 1
    said = ", ".join(f"{n} {d}" for d, n in sorted(counts.items()))
    return f"round {look.round}: {look.sessions} sessions, ${look.spend_usd:.4f}; {said}"


def _look(
    manifest: RunManifest, results: Sequence[ItemResult], opts: AdaptiveOptions, control: str, done: int
) -> Look:
    t0 = time.perf_counter()
    cells = analyse(manifest, results, opts, control)
    return Look(
        round=done,
        at=utcnow(),
        sessions=sum(1 for r in results if r.complete),
        spend_usd=round(sum(r.cost_usd or 0.0 for r in results), 6),
        analysis_s=round(time.perf_counter() - t0, 4),
        cells=cells,
    )


def _tested(manifest: RunManifest, control: str) -> list[str]:
    return [c.id for c in manifest.cells if c.id != control]


def _rounds(plan: Sequence[PlanItem]) -> int:
    """Rounds scheduled so far (round r holds the items of repeat r)."""
    return max((p.repeat for p in plan), default=-1) + 1


def _pending(folder: RunFolder, plan: Sequence[PlanItem]) -> list[PlanItem]:
    done = {r.item for r in iter_results(folder) if r.complete}
    return [p for p in plan if p.item not in done]


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
    """:func:`run_adaptive`'s rounds as the passes of one :func:`ablate.run.execute.execute`: one login check,
    one listing of the user's files, one folder lock, and environments built once and kept across rounds.
    ``options`` None: a resume, which keeps the folder's own. Every look is said through ``on_note``."""
    from ablate.run.execute import RunRound, execute

    say = on_note or (lambda _text: None)
    summaries: list[AdaptiveSummary] = []

    def drive(run_round: RunRound) -> None:
        summaries.append(
            run_adaptive(
                prepared.folder,
                prepared.manifest,
                lambda _items: run_round(),
                options,
                on_look=lambda look: say(look_line(look)),
            )
        )

    done = execute(prepared, request, on_progress=on_progress, on_note=on_note, rounds=drive)
    (summary,) = summaries
    return done, summary

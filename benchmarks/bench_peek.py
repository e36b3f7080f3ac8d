"""Peeking at a fixed run whose blocks complete out of plan order: the family-wise error of the "real" marks.

A fixed run read before its end (``ablate report`` on a partial folder) gets anytime-valid figures: the
report's peek (:func:`ablate.report.sequential.sequential_of`) calls :func:`ablate.stats.adaptive.analyse`
with :data:`ablate.report.sequential.PEEK_MIN_EFFECT`, and a cell is "real" when its Holm-adjusted anytime p
(Holm over every cell of the run) is at most α. Those figures are maxima over a path of blocks, so they are
valid only when that path is the one that happened in time. Each simulated run here is a family of null cells
against the control (every item pitfall-free with its task's rate, whatever the cell), its items finish in a
random order (a parallel run's order, at its most shuffled), and the report peeks after every ``PEEK_EVERY``
completed run blocks' worth of items (a run block: one (task, repeat), every cell); a run is a family-wise
error when any peek marks any cell real. Two orders of the blocks are compared on the very same simulated
runs:

* **completion time** (what ablate does): each cell's block enters when the later of its two items finished
  (the results' ``finished_at``);
* **plan order** (what ablate did before): every peek re-sorts the complete blocks by (repeat, task), a path
  that never existed in time (the results' ``finished_at`` removed, which falls back to plan order).

``python -m benchmarks.run peek`` (runs per scenario: ``ABLATE_BENCH_SIMS``, default 400). Each rate is
printed with its Monte-Carlo standard error; before each scenario the fast path this benchmark takes
(:func:`peek_decisions`) is checked against ``analyse`` itself at every peek of a run with an effect. Measured
(400 runs per scenario, the seed below, 2 tasks × 100 repeats, a peek every 5 run blocks, α 0.05; 4.3 minutes
wall, 2.0 minutes CPU, on a loaded 2-core machine):

==========  ========================  ===================
null cells  completion time (ablate)  plan order (before)
==========  ========================  ===================
1           0.020 ± 0.007             0.083 ± 0.014
4           0.020 ± 0.007             0.065 ± 0.012
11          0.020 ± 0.007             0.058 ± 0.012
==========  ========================  ===================

Completion order keeps the family-wise error below α for every family (Holm over the cells' anytime p, as the
report does); the re-sorted plan-order path broke α for one cell (2.4 standard errors above it) and was above
it for the families too, though not conclusively at 400 runs (1.3 and 0.7 standard errors: Holm's larger
multiplier absorbs part of the extra looks). A quick version is no unit
test: at the few runs that fit in seconds, the plan-order rates are not distinguishable from α, so such a test
would not fail on the old path; ``tests/test_peek_bench.py`` holds the fast path to ``analyse`` instead.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from tabulate import tabulate

from ablate.core.claude import ClaudeBinary
from ablate.folder.adaptive import AdaptiveOptions
from ablate.folder.layout import ManifestCell, ManifestTask, RunManifest, item_id
from ablate.folder.result import ItemResult
from ablate.report.sequential import PEEK_MIN_EFFECT
from ablate.stats.adaptive import analyse, paired_outcomes, primary_outcome
from ablate.stats.multiplicity import holm_adjust
from ablate.stats.sequential import anytime_p, discordant_path, prior_for

ALPHA = 0.05
#: A peek after every this many complete run blocks' worth of items (a run block: one (task, repeat)).
PEEK_EVERY = 5
TASK_RATES = (0.4, 0.6)
REPEATS = 100
#: The families simulated: null cells against the control.
FAMILIES = (1, 4, 11)
SEED = 20261202
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def cell_ids(null_cells: int) -> list[str]:
    """The control C0 and ``null_cells`` cells."""
    return [f"C{i}" for i in range(null_cells + 1)]


def manifest(null_cells: int, tasks: int = len(TASK_RATES), repeats: int = REPEATS) -> RunManifest:
    """A minimal fixed run's manifest: C0 (the control) and ``null_cells`` cells."""
    cells = cell_ids(null_cells)
    return RunManifest(
        run_id="bench-peek",
        created_at=T0.isoformat(),
        ablate_version="0",
        claude=ClaudeBinary(path="/opt/claude", version="0", sha256="0" * 64, pinned=True),
        model="m",
        max_turns=8,
        argv=[],
        max_retries=0,
        cell_set="bench",
        cells=[
            ManifestCell(id=c, dirname=c.lower(), label=c, stripped=[] if i == 0 else [f"l{i}"])
            for i, c in enumerate(cells)
        ],
        tasks=[ManifestTask(id=f"t{i}", sha256="0" * 64, source="-", split="dev") for i in range(tasks)],
        repeats=repeats,
        seed=0,
        plan_sha256="0" * 64,
        items=tasks * repeats * len(cells),
    )


def result(task: str, cell: str, repeat: int, order: int, ok: bool, finished: int | None) -> ItemResult:
    """One complete item's result, pitfall-free when ``ok``, finished ``finished`` seconds after T0."""
    return ItemResult(
        item=item_id(task, cell, repeat),
        task=task,
        cell=cell,
        repeat=repeat,
        order=order,
        attempt=1,
        session_id=f"s{order}",
        status="completed",
        turns=3,
        pitfall_hits={"p": 0 if ok else 1},
        finished_at=None if finished is None else (T0 + timedelta(seconds=finished)).isoformat(),
    )


def peek_decisions(m: RunManifest, results: Sequence[ItemResult], rank: Mapping[str, int]) -> list[bool]:
    """Whether the report's peek marks any cell real, at every peek of one run: the decision of
    :func:`ablate.stats.adaptive.analyse` (Holm-adjusted anytime p <= α over the run's cells), computed with
    the functions it calls — :func:`~ablate.stats.adaptive.paired_outcomes` (the blocks in the order the run
    folder's ``finished_at`` says, plan order without it), the discordant e-process, its anytime p, Holm —
    without the confidence sequences and the turns, which never decide.

    ``rank``: each item's place in the finishing order. paired_outcomes orders a block by its own items only,
    so a peek's path is the whole run's path cut to the blocks complete at the peek: each cell is paired once
    and cut at every peek (:func:`check_against_analyse` holds this to ``analyse`` on each peek's results)."""
    control = m.cells[0].id
    prior = prior_for(PEEK_MIN_EFFECT)
    value = {r.item: (primary_outcome(r), rank[r.item]) for r in results}
    paths = []
    for cell in (c.id for c in m.cells[1:]):
        xs, ys = paired_outcomes(m, results, cell, control, lambda r: value[r.item])
        x, y = np.asarray(xs), np.asarray(ys)
        paths.append((x[:, 0].astype(bool), y[:, 0].astype(bool), np.maximum(x[:, 1], y[:, 1])))
    out = []
    for seen in peek_sizes(m, len(results)):
        p = []
        for x, y, done_at in paths:
            done = done_at < seen
            p.append(float(anytime_p(discordant_path(x[done], y[done], prior))[-1]) if done.any() else 1.0)
        out.append(bool(np.any(holm_adjust(np.asarray(p)) <= ALPHA)))
    return out


def peek_sizes(m: RunManifest, items: int) -> range:
    """Complete items at each peek: every PEEK_EVERY run blocks' worth (the complete run is not a peek)."""
    every = PEEK_EVERY * len(m.cells)
    return range(every, items, every)


def analyse_real(m: RunManifest, results: Sequence[ItemResult]) -> bool:
    """Whether :func:`ablate.stats.adaptive.analyse`, as the report's peek calls it, marks any cell real."""
    opts = AdaptiveOptions(max_repeats=m.repeats, min_effect=PEEK_MIN_EFFECT, alpha=ALPHA)
    return any(v.decision == "real" for v in analyse(m, results, opts, m.cells[0].id).values())


def simulate(
    rng: np.random.Generator, m: RunManifest, shift: float = 0.0
) -> tuple[list[ItemResult], list[ItemResult], list[int]]:
    """One run, null unless ``shift`` (added to the last cell's pitfall-free rates): its results with finish
    times, the same without (plan order), and the items' indices in the order they finished."""
    items = [(t.id, c.id, r) for r in range(m.repeats) for t in m.tasks for c in m.cells]
    rates = {t.id: TASK_RATES[i % len(TASK_RATES)] for i, t in enumerate(m.tasks)}
    last = m.cells[-1].id
    finish = rng.permutation(len(items))
    ok = rng.random(len(items))
    timed = [
        result(t, c, r, i, bool(ok[i] < rates[t] + (shift if c == last else 0.0)), int(finish[i]))
        for i, (t, c, r) in enumerate(items)
    ]
    plan = [r.model_copy(update={"finished_at": None}) for r in timed]
    return timed, plan, sorted(range(len(items)), key=lambda i: finish[i])


def one_run(rng: np.random.Generator, m: RunManifest) -> tuple[bool, bool]:
    """Whether any peek of one simulated null run marks any cell real: (completion time, plan order), the
    very same items and finishing order read both ways."""
    timed, plan, by_time = simulate(rng, m)
    rank = {timed[i].item: k for k, i in enumerate(by_time)}
    return any(peek_decisions(m, timed, rank)), any(peek_decisions(m, plan, rank))


def check_against_analyse(rng: np.random.Generator, m: RunManifest, shift: float = 0.0) -> list[bool]:
    """Every peek of one simulated run (:func:`simulate`), both orders: :func:`peek_decisions` must say what
    ``analyse`` says on the results complete at that peek (raises AssertionError otherwise). Returns the
    decisions checked (completion order's peeks, then plan order's)."""
    timed, plan, by_time = simulate(rng, m, shift)
    rank = {timed[i].item: k for k, i in enumerate(by_time)}
    checked: list[bool] = []
    for results in (timed, plan):
        fast = peek_decisions(m, results, rank)
        full = [analyse_real(m, [results[i] for i in by_time[:seen]]) for seen in peek_sizes(m, len(results))]
        if fast != full:
            raise AssertionError(f"peek_decisions {fast} disagree with analyse {full}")
        checked += full
    return checked


@dataclass(frozen=True)
class Fwer:
    """A simulated family-wise error rate of both orders, with its Monte-Carlo standard error."""

    null_cells: int
    sims: int
    timed: float
    plan: float

    @staticmethod
    def se(rate: float, sims: int) -> float:
        return math.sqrt(rate * (1 - rate) / sims)

    def row(self) -> list[object]:
        return [
            self.null_cells,
            f"{self.timed:.3f} ± {self.se(self.timed, self.sims):.3f}",
            f"{self.plan:.3f} ± {self.se(self.plan, self.sims):.3f}",
        ]


def fwer(null_cells: int, sims: int, seed: int = SEED, repeats: int = REPEATS) -> Fwer:
    """The family-wise error of ``sims`` simulated null runs of ``null_cells`` cells, read both ways."""
    rng = np.random.default_rng(seed + null_cells)
    m = manifest(null_cells, repeats=repeats)
    runs = [one_run(rng, m) for _ in range(sims)]
    return Fwer(null_cells, sims, sum(t for t, _ in runs) / sims, sum(p for _, p in runs) / sims)


def main() -> None:
    sims = int(os.environ.get("ABLATE_BENCH_SIMS", "400"))
    print(
        f"null runs: {', '.join(map(str, FAMILIES))} cells against the control, {len(TASK_RATES)} tasks × "
        f"{REPEATS} repeats, items finishing in random order, a peek every {PEEK_EVERY} run blocks, Holm over "
        f"the cells; {sims} runs each"
    )
    rows = []
    for k in FAMILIES:
        m = manifest(k)
        checked = check_against_analyse(np.random.default_rng(SEED - k), m, shift=0.3)
        print(
            f"{k} cells: the fast peek agrees with analyse() at all {len(checked)} peeks of a run with an effect "
            f"(real at {sum(checked)} of them)",
            flush=True,
        )
        rows.append(fwer(k, sims).row())
    print(
        tabulate(rows, headers=["null cells", "FWER, completion time (ablate)", "FWER, plan order (before)"])
    )
    print(f"α = {ALPHA}: a family-wise error is any cell marked real at any peek")


if __name__ == "__main__":
    main()

"""Peeking at a fixed run whose blocks complete out of plan order: the family-wise error of the "real" marks.

A fixed run read before its end (``ablate report`` on a partial folder) gets anytime-valid figures
(:func:`ablate.stats.adaptive.analyse`). They are maxima over a path of blocks, so they are valid only when that
path is the one that happened in time. Each simulated run here has null cells (every item pitfall-free with
its task's rate, whatever the cell), its items finish in a random order (a parallel run's order), and the
report peeks after every ``PEEK_EVERY`` completed items; a run is a false positive when any peek marks any
cell real. Two orders of the blocks are compared on the very same simulated runs:

* **completion time** (what ablate does): each block enters when the later of its two items finished
  (the results' ``finished_at``);
* **plan order** (what ablate did before): every peek re-sorts the complete blocks by (repeat, task), a path
  that never existed in time (the results' ``finished_at`` removed, which falls back to plan order).

``python -m benchmarks.run peek`` (sims: ``ABLATE_BENCH_SIMS``, default 400; about 15 minutes on a loaded
2-core machine). Each rate is printed with its Monte-Carlo standard error. Measured (400 runs, the seed
below): completion time 0.010 ± 0.005, plan order 0.083 ± 0.014 — the re-sorted path broke α = 0.05.
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime, timedelta

import numpy as np
from tabulate import tabulate

from ablate.folder.adaptive import AdaptiveOptions
from ablate.folder.layout import ClaudeInfo, ManifestCell, ManifestTask, RunManifest, item_id
from ablate.folder.result import ItemResult
from ablate.stats.adaptive import analyse

ALPHA = 0.05
PEEK_EVERY = 10
CELLS = ["C0", "C1"]
TASK_RATES = (0.4, 0.6)
REPEATS = 100
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def manifest(tasks: int = len(TASK_RATES), repeats: int = REPEATS, cells: list[str] = CELLS) -> RunManifest:
    """A minimal fixed run's manifest: the first cell is the control."""
    return RunManifest(
        run_id="bench-peek",
        created_at=T0.isoformat(),
        ablate_version="0",
        claude=ClaudeInfo(path="/opt/claude", version="0", sha256="0" * 64, pinned=True),
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


def one_run(rng: np.random.Generator, m: RunManifest, *, timed: bool) -> bool:
    """Whether any peek of one simulated null run marks any cell real."""
    opts = AdaptiveOptions(max_repeats=m.repeats, min_effect=0.2, alpha=ALPHA)
    items = [(t.id, c.id, r) for r in range(m.repeats) for t in m.tasks for c in m.cells]
    rates = {t.id: TASK_RATES[i % len(TASK_RATES)] for i, t in enumerate(m.tasks)}
    finish = rng.permutation(len(items))
    results = [
        result(t, c, r, i, bool(rng.random() < rates[t]), int(finish[i]) if timed else None)
        for i, (t, c, r) in enumerate(items)
    ]
    by_time = sorted(range(len(items)), key=lambda i: finish[i])
    control = m.cells[0].id
    for seen in range(PEEK_EVERY, len(items), PEEK_EVERY):  # the complete run is not a peek
        done = [results[i] for i in by_time[:seen]]
        if any(v.decision == "real" for v in analyse(m, done, opts, control).values()):
            return True
    return False


def fwer(sims: int, seed: int, *, timed: bool) -> float:
    rng = np.random.default_rng(seed)
    m = manifest()
    return sum(one_run(rng, m, timed=timed) for _ in range(sims)) / sims


def main() -> None:
    sims = int(os.environ.get("ABLATE_BENCH_SIMS", "400"))
    rows = []
    for timed, name in ((True, "completion time (ablate)"), (False, "plan order (before)")):
        rate = fwer(sims, 20261201, timed=timed)
        se = math.sqrt(rate * (1 - rate) / sims)
        rows.append([name, f"{rate:.3f} ± {se:.3f}", ALPHA])
    print(
        f"null runs: {len(CELLS) - 1} cells against the control, {len(TASK_RATES)} tasks × {REPEATS} repeats, "
        f"items finishing in random order, a peek every {PEEK_EVERY} items; {sims} runs"
    )
    print(tabulate(rows, headers=["blocks ordered by", "P(any false 'real' at any peek)", "α"]))


if __name__ == "__main__":
    main()

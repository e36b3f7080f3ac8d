"""Tasks that tell the cells nothing: the rule that drops them from an adaptive run, its guarantee, the driver
that stops scheduling them (and a resume that goes on without them) and the report's ``tasks`` rows and caveat."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ablate.folder.adaptive import AdaptiveOptions, read_state
from ablate.folder.layout import PlanItem, RunFolder
from ablate.report import write_report
from ablate.report.sections import build_report
from ablate.run.adaptive import run_adaptive
from ablate.stats.adaptive import discordance, inert_after
from tests.run_folder import write_outcome
from tests.test_adaptive_run import _planned


@pytest.mark.parametrize("d", [0.05, 0.1, 0.2, 0.3, 0.5])
@pytest.mark.parametrize("beta", [0.01, 0.05, 0.2])
def test_the_rule_is_the_fewest_blocks_whose_run_of_concordance_has_probability_at_most_beta(
    d: float, beta: float
) -> None:
    n = inert_after(d, beta)
    assert n == math.ceil(math.log(beta) / math.log(1 - d))
    assert (1 - d) ** n <= beta < (1 - d) ** (n - 1)
    assert inert_after(0.2, 0.05) == 14 and inert_after(0.5, 0.05) == 5


def test_a_task_where_a_cell_differs_by_the_min_effect_is_dropped_at_most_beta_of_the_time() -> None:
    """The rule's guarantee, simulated with the function the driver uses: the control always passes, the cell
    passes with 1 − d (the least discordance an effect of d allows)."""
    d, beta, runs = 0.2, 0.05, 4000
    n = inert_after(d, beta)
    rng = np.random.default_rng(5)
    dropped = 0
    for _ in range(runs):
        cell = rng.random(n) < 1 - d
        values = {("t", "C0", r): True for r in range(n)} | {("t", "C1", r): bool(cell[r]) for r in range(n)}
        blocks, odd = discordance(values)["t"]
        dropped += blocks == n and odd == 0
    assert dropped / runs <= beta + 3 * math.sqrt(beta * (1 - beta) / runs)


def test_discordance_counts_blocks_with_two_cells_and_those_whose_cells_differ() -> None:
    values = {
        ("a", "C0", 0): 1.0, ("a", "C1", 0): 1.0,  # concordant
        ("a", "C0", 1): 1.0, ("a", "C1", 1): 0.0,  # discordant
        ("a", "C0", 2): 1.0,  # one cell: no block
        ("b", "C0", 0): 0.0, ("b", "C1", 0): 0.0, ("b", "C2", 0): 0.0,
        ("c", "C0", 0): 0.5,
    }  # fmt: skip
    assert discordance(values) == {"a": (2, 1), "b": (1, 0), "c": (0, 0)}


class ByTask:
    """Writes a result per item: t1 passes in every cell, t0 passes with the cell's rate."""

    def __init__(self, folder: RunFolder, rates: dict[str, float]) -> None:
        self.folder, self.rates, self.rng = folder, rates, random.Random(3)
        self.rounds: list[set[str]] = []

    def __call__(self, items: Sequence[PlanItem]) -> str:
        self.rounds.append({i.task for i in items})
        for it in items:
            free = it.task == "t1" or self.rng.random() < self.rates[it.cell]
            write_outcome(self.folder, it, free)
        return "finished"


def test_an_adaptive_run_stops_scheduling_a_task_that_tells_nothing_and_the_report_names_the_saving(
    tmp_path: Path,
) -> None:
    folder, manifest = _planned(tmp_path, tasks=2, repeats=20, cells=3)
    options = AdaptiveOptions(max_repeats=20, min_effect=0.3, alpha=0.05)
    n = inert_after(0.3, options.draw_beta)  # 9 blocks
    executor = ByTask(folder, dict.fromkeys((c.id for c in manifest.cells), 0.5))
    first = run_adaptive(folder, manifest, executor, options, on_look=lambda lk: None)
    assert first.state.stopped == "max-repeats"  # null cells at 0.5: nothing is decided in 20 rounds here
    state = read_state(folder)
    assert state is not None and state.inert == {"t1": n}
    assert all(r == {"t0", "t1"} for r in executor.rounds[:n]) and all(
        r == {"t0"} for r in executor.rounds[n:]
    )
    plan = folder.read_plan()
    assert max(p.repeat for p in plan if p.task == "t1") == n - 1 and max(p.repeat for p in plan) == 19
    written = write_report(folder.root, formats=["md"])
    report = written.report
    rows = {r["id"]: r for r in (report.model_extra or {})["tasks"]}
    assert rows["t0"]["discriminating"] and rows["t0"]["dropped_after"] is None
    saved = sum(1 for p in plan if p.task == "t0" and p.repeat >= n)  # what its later rounds ran
    assert rows["t1"] == {
        "id": "t1", "blocks": n, "discordant": 0, "discriminating": False, "dropped_after": n,
        "sessions_saved": saved, "usd_saved": pytest.approx(saved * 0.01),
    }  # fmt: skip
    caveat = next(c for c in report.caveats if c.id == "inert-tasks")
    assert f"saved {saved} sessions" in caveat.text and "t1" in caveat.text
    md = written.paths["md"].read_text()
    assert "## Tasks that tell the cells apart" in md and f"after {n} blocks without a discordant one" in md
    assert "| t1 | 9 | 0 | no | 9 |" in md


def test_when_every_task_tells_nothing_the_run_stops_and_a_fixed_run_names_them_too(tmp_path: Path) -> None:
    folder, manifest = _planned(tmp_path / "adaptive", tasks=1, repeats=20, cells=2)
    executor = ByTask(folder, dict.fromkeys((c.id for c in manifest.cells), 1.0))  # every session passes
    options = AdaptiveOptions(max_repeats=20, min_effect=0.2, alpha=0.05)
    summary = run_adaptive(folder, manifest, executor, options)
    assert summary.state.stopped == "tasks-inert" and summary.finished
    assert len(executor.rounds) == inert_after(0.2, options.draw_beta) == 14
    (row,) = (build_report(folder.root).model_extra or {})["tasks"]
    assert not row["discriminating"] and row["sessions_saved"] == 0  # the run ended with it: nothing to save
    fixed, plan = _planned(tmp_path / "fixed", tasks=2, repeats=3, cells=2)
    ByTask(fixed, dict.fromkeys((c.id for c in plan.cells), 0.0))(fixed.read_plan())  # t0 fails, t1 passes
    report = build_report(fixed.root)
    rows = (report.model_extra or {})["tasks"]
    assert [(r["id"], r["blocks"], r["discriminating"], r["dropped_after"]) for r in rows] == [
        ("t0", 3, False, None), ("t1", 3, False, None)
    ]  # fmt: skip
    caveat = next(c for c in report.caveats if c.id == "inert-tasks")
    assert caveat.text.startswith("t0, t1: every cell scored the same") and "saved" not in caveat.text

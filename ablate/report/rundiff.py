"""``ablate diff RUN_A RUN_B``: two runs of the same cells and tasks compared cell by cell: each cell's
pitfall-free Δ in each run, the change Δ_B − Δ_A and its task-stratified Welch test (:mod:`ablate.stats.run_change`),
Holm over the cells. Verdict words that changed are named, but only the test decides whether an effect changed
(a "helps" that became a "draw" can be noise); ``ablate gate --baseline`` fails a layer that helped for real and
helps less now (:func:`lost_help`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ablate.core.errors import UsageError
from ablate.folder.adaptive import control_of
from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.result import ItemResult, iter_results
from ablate.report.paired import holm_some
from ablate.stats.adaptive import paired_outcomes, primary_outcome
from ablate.stats.run_change import run_change

METRIC = "pitfall_free"
METHOD = (
    "Welch t-test of the change in the per-block paired differences, stratified by task (runs independent), "
    "Holm over cells"
)


@dataclass(frozen=True)
class CellDiff:
    """One cell's pooled pitfall-free effect in each run and its change."""

    cell: str
    layers: list[str]
    effect_a: float | None
    """Δ = cell − control in run A (None: no paired block)."""
    effect_b: float | None
    blocks_a: int
    blocks_b: int
    change: float | None
    """Δ_B − Δ_A (+: stripping the layer costs less in B, i.e. the layer helps less or hurts more)."""
    ci_low: float | None
    ci_high: float | None
    p: float | None
    p_adjusted: float | None
    changed: bool
    """The change is real (Holm-adjusted p ≤ α)."""
    verdict_a: str
    """Run A's report verdict for the cell (helps, hurts, mixed, draw)."""
    verdict_b: str


@dataclass
class RunDiff:
    run_a: str
    run_b: str
    control: str
    alpha: float
    metric: str = METRIC
    method: str = METHOD
    cells: list[CellDiff] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    helped_a: list[str] = field(default_factory=list)
    """Cells whose layer helps for real on pooled pitfall-free in run A (its report's own test)."""

    @property
    def verdicts_changed(self) -> list[CellDiff]:
        return [c for c in self.cells if c.verdict_a != c.verdict_b]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            **{k: v for k, v in asdict(self).items() if k != "cells"},
            "cells": [asdict(c) for c in self.cells],
            "verdicts_changed": [
                {"cell": c.cell, "from": c.verdict_a, "to": c.verdict_b} for c in self.verdicts_changed
            ],
        }


def _same_design(a: Path, b: Path) -> tuple[list[str], list[str], str]:
    ma, mb = read_manifest(RunFolder(a)), read_manifest(RunFolder(b))
    cells_a, cells_b = [c.id for c in ma.cells], [c.id for c in mb.cells]
    tasks_a, tasks_b = sorted(t.id for t in ma.tasks), sorted(t.id for t in mb.tasks)
    for what, x, y in (("cells", cells_a, cells_b), ("tasks", tasks_a, tasks_b)):
        if sorted(x) != sorted(y):
            raise UsageError(
                f"{a} and {b} do not run the same {what} ({', '.join(x)} against {', '.join(y)})",
                hint="ablate diff compares two runs of the same cell set and tasks",
            )
    if several := next((str(r) for r, m in ((a, ma), (b, mb)) if m.models), None):
        raise UsageError(
            f"{several} ran several models (--models)", hint="ablate diff compares runs of one model"
        )
    control = control_of(ma)
    if control != control_of(mb):
        raise UsageError(f"{a} and {b} have different controls ({control}, {control_of(mb)})")
    return [c for c in cells_a if c != control], tasks_a, control


def _diffs(run: Path, cell: str, control: str) -> dict[str, list[float]]:
    """Task → the cell's per-block paired differences (cell − control) of the primary outcome."""
    folder = RunFolder(run)

    def tagged(r: ItemResult) -> tuple[str, float] | None:
        v = primary_outcome(r)
        return None if v is None else (r.task, float(v))

    xs, ys = paired_outcomes(read_manifest(folder), iter_results(folder), cell, control, tagged)
    out: dict[str, list[float]] = {}
    for (task, x), (_task, y) in zip(xs, ys, strict=True):
        out.setdefault(task, []).append(x - y)
    return out


def diff_runs(run_a: Path, run_b: Path, *, alpha: float = 0.05) -> RunDiff:
    """Compare two runs of the same cells and tasks (see the module docstring). Pure: reads, never writes."""
    from ablate.report.sections import build_report

    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: must be between 0 and 1")
    cells, _tasks, control = _same_design(run_a, run_b)
    reports = [build_report(r, alpha=alpha) for r in (run_a, run_b)]
    verdicts = [{e.cell: e.verdict for e in r.ranking} for r in reports]
    layers = {e.cell: e.layers for r in reports for e in r.ranking}
    no_op = {n.cell for r in reports for n in r.no_op_cells}
    tested = [c for c in cells if c not in no_op]
    rows = []
    for cell in tested:
        da, db = _diffs(run_a, cell, control), _diffs(run_b, cell, control)
        rows.append((cell, da, db, run_change(da, db, level=1 - alpha)))
    adjusted = holm_some([r[3].p for r in rows])
    out = RunDiff(run_a=str(run_a), run_b=str(run_b), control=control, alpha=alpha)
    out.helped_a = [
        c.cell
        for c in reports[0].comparisons
        if c.metric == METRIC and c.task is None and c.real and c.verdict == "helps"
    ]
    for (cell, da, db, got), padj in zip(rows, adjusted, strict=True):
        out.cells.append(
            CellDiff(
                cell=cell,
                layers=list(layers.get(cell, [])),
                effect_a=_pooled(da),
                effect_b=_pooled(db),
                blocks_a=sum(len(v) for v in da.values()),
                blocks_b=sum(len(v) for v in db.values()),
                **asdict(got),
                p_adjusted=padj,
                changed=padj is not None and padj <= alpha,
                verdict_a=verdicts[0].get(cell, "not tested"),
                verdict_b=verdicts[1].get(cell, "not tested"),
            )
        )
    if no_op:
        out.notes.append(f"not compared (a no-op cell in either run): {', '.join(sorted(no_op))}")
    return out


def _pooled(by_task: dict[str, list[float]]) -> float | None:
    """Δ over a run's paired blocks, each task weighted alike (the change's own weighting)."""
    means = [float(np.mean(v)) for v in by_task.values() if v]
    return float(np.mean(means)) if means else None


def lost_help(diff: RunDiff) -> list[str]:
    """The layers that helped for real in the baseline (A) and help less in B by the diff's test."""
    out = []
    for c in diff.cells:
        if c.cell in diff.helped_a and c.changed and c.change is not None and c.change > 0:
            out.append(
                f"{c.cell} ({', '.join(c.layers) or 'its layer'}) helped in the baseline (Δ {c.effect_a:+.2f}) "
                f"and helps less now (Δ {c.effect_b:+.2f}; change {c.change:+.2f} "
                f"[{_num(c.ci_low)}, {_num(c.ci_high)}], Holm p {c.p_adjusted:.3g})"
            )
    return out


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:+.2f}"


def render_text(diff: RunDiff) -> str:
    """The diff as a table and the named verdict changes."""
    from tabulate import tabulate

    rows = [
        [
            c.cell,
            ", ".join(c.layers) or "–",
            f"{_num(c.effect_a)} ({c.blocks_a})",
            f"{_num(c.effect_b)} ({c.blocks_b})",
            _num(c.change),
            f"[{_num(c.ci_low)}, {_num(c.ci_high)}]",
            "–" if c.p_adjusted is None else f"{c.p_adjusted:.3g}",
            "changed" if c.changed else "no real change",
            f"{c.verdict_a} → {c.verdict_b}" if c.verdict_a != c.verdict_b else c.verdict_a,
        ]
        for c in diff.cells
    ]
    head = ["cell", "strips", "Δ A (blocks)", "Δ B (blocks)", "B − A", f"{100 * (1 - diff.alpha):.0f}% CI", "Holm p",
            "effect", "verdict"]  # fmt: skip
    lines = [
        f"{diff.run_a} → {diff.run_b}: Δ {diff.metric} = cell − {diff.control} in each run",
        tabulate(rows, headers=head),
        f"test: {diff.method}",
    ]
    changed = ", ".join(f"{c.cell} {c.verdict_a} → {c.verdict_b}" for c in diff.verdicts_changed)
    lines += [f"verdicts changed: {changed or 'none'}", *(f"note: {n}" for n in diff.notes)]
    return "\n".join(lines)

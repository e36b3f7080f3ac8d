"""``ablate diff RUN_A RUN_B``: two runs of the same cells and tasks compared cell by cell.

Between the runs something changed (a new Claude Code version, another model, an edited setup); the question is
whether a layer's effect changed with it. Per tested cell: its pooled pitfall-free effect Δ = cell − control in
each run (on the paired (task, repeat) blocks where both items count, as the run's own analysis pairs them),
the difference Δ_B − Δ_A with a Welch t interval, and a permutation test of that difference that is valid for
**independent** runs: the per-block paired differences of A and of B are two independent samples, and under
the null that the cell's effect did not change, a block's difference is as likely to have come from either
run (``scipy.stats.permutation_test``, ``permutation_type="independent"``, seeded, with resamples scaled to
Holm's first step). Holm over the cells decides which changes are real. Each run's own verdict (its report's
ranking) is shown, and the cells whose verdict word changed are named — but whether an effect changed is
decided by the test, never by comparing verdict words (a "helps" that became a "draw" can be noise).

``ablate gate --baseline RUN_A`` fails when a layer that helped for real in the baseline helps less in the
new run by this test (:func:`lost_help`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from ablate.core.errors import UsageError
from ablate.folder.adaptive import control_of
from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.result import iter_results
from ablate.stats import holm, resamples_for
from ablate.stats.adaptive import paired_outcomes

METRIC = "pitfall_free"
METHOD = (
    "two-sample permutation test of the per-block paired differences (runs independent), Holm over cells; "
    "Welch t interval"
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
    if set(cells_a) != set(cells_b):
        raise UsageError(
            f"{a} and {b} do not run the same cells ({', '.join(cells_a)} against {', '.join(cells_b)})",
            hint="ablate diff compares two runs of the same cell set and tasks",
        )
    if tasks_a != tasks_b:
        raise UsageError(
            f"{a} and {b} do not run the same tasks ({', '.join(tasks_a)} against {', '.join(tasks_b)})",
            hint="ablate diff compares two runs of the same cell set and tasks",
        )
    control = control_of(ma)
    if control != control_of(mb):
        raise UsageError(f"{a} and {b} have different controls ({control}, {control_of(mb)})")
    return [c for c in cells_a if c != control], tasks_a, control


def _diffs(run: Path, cell: str, control: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    folder = RunFolder(run)
    xs, ys = paired_outcomes(read_manifest(folder), iter_results(folder), cell, control)
    return np.asarray(xs, dtype=np.float64) - np.asarray(ys, dtype=np.float64)


def _welch(
    da: np.ndarray[Any, Any], db: np.ndarray[Any, Any], level: float
) -> tuple[float | None, float | None]:
    if len(da) < 2 or len(db) < 2:
        return None, None
    va, vb = float(np.var(da, ddof=1)) / len(da), float(np.var(db, ddof=1)) / len(db)
    se = math.sqrt(va + vb)
    if se == 0:
        return None, None
    df = (va + vb) ** 2 / ((va**2 / (len(da) - 1) if va else 0.0) + (vb**2 / (len(db) - 1) if vb else 0.0))
    half = float(sps.t.ppf(0.5 + level / 2, df)) * se
    change = float(db.mean() - da.mean())
    return max(-2.0, change - half), min(2.0, change + half)


def _permutation_p(
    da: np.ndarray[Any, Any], db: np.ndarray[Any, Any], floor: float, seed: int
) -> float | None:
    if len(da) < 1 or len(db) < 1 or np.ptp(np.concatenate([da, db])) == 0:
        return None
    res = sps.permutation_test(
        (db, da),
        lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        permutation_type="independent",
        alternative="two-sided",
        n_resamples=resamples_for(floor),
        vectorized=True,
        random_state=seed,
    )
    return float(res.pvalue)


def diff_runs(run_a: Path, run_b: Path, *, alpha: float = 0.05, seed: int = 0) -> RunDiff:
    """Compare two runs of the same cells and tasks (see the module docstring). Pure: reads, never writes."""
    from ablate.report import build_report

    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: must be between 0 and 1")
    cells, _tasks, control = _same_design(run_a, run_b)
    reports = [build_report(r, alpha=alpha) for r in (run_a, run_b)]
    verdicts = [{e.cell: e.verdict for e in r.ranking} for r in reports]
    layers = {e.cell: e.layers for r in reports for e in r.ranking}
    no_op = {n.cell for r in reports for n in r.no_op_cells}
    tested = [c for c in cells if c not in no_op]
    floor = alpha / max(1, len(tested))
    rows = []
    for cell in tested:
        da, db = _diffs(run_a, cell, control), _diffs(run_b, cell, control)
        rows.append((cell, da, db, _permutation_p(da, db, floor, seed)))
    testable = [i for i, r in enumerate(rows) if r[3] is not None]
    adjusted = dict(zip(testable, holm([rows[i][3] or 0.0 for i in testable]), strict=True))
    out = RunDiff(run_a=str(run_a), run_b=str(run_b), control=control, alpha=alpha)
    out.helped_a = [
        c.cell
        for c in reports[0].comparisons
        if c.metric == METRIC and c.task is None and c.real and c.verdict == "helps"
    ]
    for i, (cell, da, db, p) in enumerate(rows):
        lo, hi = _welch(da, db, 1 - alpha)
        padj = adjusted.get(i)
        ea = float(da.mean()) if len(da) else None
        eb = float(db.mean()) if len(db) else None
        out.cells.append(
            CellDiff(
                cell=cell,
                layers=list(layers.get(cell, [])),
                effect_a=ea,
                effect_b=eb,
                blocks_a=len(da),
                blocks_b=len(db),
                change=None if ea is None or eb is None else eb - ea,
                ci_low=lo,
                ci_high=hi,
                p=p,
                p_adjusted=padj,
                changed=padj is not None and padj <= alpha,
                verdict_a=verdicts[0].get(cell, "not tested"),
                verdict_b=verdicts[1].get(cell, "not tested"),
            )
        )
    if no_op:
        out.notes.append(f"not compared (a no-op cell in either run): {', '.join(sorted(no_op))}")
    return out


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
    head = [
        "cell",
        "strips",
        "Δ A (blocks)",
        "Δ B (blocks)",
        "B − A",
        f"{100 * (1 - diff.alpha):.0f}% CI",
        "Holm p",
        "effect",
        "verdict",
    ]
    lines = [
        f"{diff.run_a} → {diff.run_b}: Δ {diff.metric} = cell − {diff.control} in each run",
        tabulate(rows, headers=head),
        f"test: {diff.method}",
    ]
    changed = diff.verdicts_changed
    lines.append(
        "verdicts changed: "
        + (", ".join(f"{c.cell} {c.verdict_a} → {c.verdict_b}" for c in changed) if changed else "none")
    )
    lines += [f"note: {n}" for n in diff.notes]
    return "\n".join(lines)

"""Dev/holdout: does a cell's change measured on the dev tasks hold on the holdout tasks?

Tasks carry ``split = "dev" | "holdout"``. A setup tuned against the dev tasks can look better there and
no better (or worse) on tasks nobody tuned against. :func:`holdout_finding` compares a cell's per-block change
against the control on both splits and returns:

* an **overfitting** warning when the dev improvement reverses on holdout and the gap between the splits is
  significant (one-sided permutation test of the mean per-block change, dev > holdout, at ``alpha``);
* one **reassuring** line when it reverses within noise;
* ``None`` when holdout agrees (the change goes the same way) or there is no dev improvement to check.

A block is a (task, repeat) pair: its change is metric(cell) − metric(control) on that block (DESIGN §7).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Literal

from scipy import stats

from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.result import ItemResult, iter_results
from ablate.grade.record import read_grade

Metric = Literal["pitfall_free", "checks_passed", "judge_pass"]


@dataclass(frozen=True)
class SplitFinding:
    """What the holdout says about a cell's dev change."""

    cell: str
    metric: str
    kind: Literal["overfitting", "within-noise", "untested"]
    """overfitting: a significant reversal; within-noise: a reversal the data cannot tell from noise;
    untested: a reversal with fewer than two blocks in a split (nothing can be tested)."""
    dev_delta: float
    """Mean per-block change on dev (cell − control; for lower-is-better metrics, control − cell)."""
    holdout_delta: float
    """The same on holdout."""
    n_dev: int
    n_holdout: int
    p: float | None
    """One-sided permutation p-value of dev > holdout (None: untested)."""
    message: str
    """One line for the report."""


def holdout_finding(
    cell: str,
    metric: str,
    dev: Sequence[float],
    holdout: Sequence[float],
    *,
    higher_is_better: bool = True,
    alpha: float = 0.05,
    seed: int = 0,
) -> SplitFinding | None:
    """Compare per-block changes (cell − control) on dev and holdout; see the module docstring."""
    if not dev or not holdout:
        return None
    sign = 1.0 if higher_is_better else -1.0
    d = [sign * x for x in dev]
    h = [sign * x for x in holdout]
    dev_delta, hold_delta = fmean(d), fmean(h)
    if dev_delta <= 0 or hold_delta > 0:
        return None  # nothing gained on dev, or holdout agrees
    counts = f"{len(d)} dev / {len(h)} holdout blocks"
    change = f"{cell} {metric}: {dev_delta:+.2f} on dev, {hold_delta:+.2f} on holdout"
    if len(d) < 2 or len(h) < 2:
        return SplitFinding(
            cell, metric, "untested", dev_delta, hold_delta, len(d), len(h), None,
            f"{change} ({counts}: too few to test the reversal)",
        )  # fmt: skip
    res = stats.permutation_test(
        (d, h),
        lambda x, y, axis: x.mean(axis=axis) - y.mean(axis=axis),
        permutation_type="independent",
        alternative="greater",
        n_resamples=9999,
        vectorized=True,
        random_state=seed,
    )
    p = float(res.pvalue)
    if p < alpha:
        return SplitFinding(
            cell, metric, "overfitting", dev_delta, hold_delta, len(d), len(h), p,
            f"WARNING overfitting? {change}; the drop is significant (permutation p = {p:.3g}, {counts}): "
            "the dev gain does not carry over to tasks nobody tuned against",
        )  # fmt: skip
    return SplitFinding(
        cell, metric, "within-noise", dev_delta, hold_delta, len(d), len(h), p,
        f"{change}; the gap is within noise (permutation p = {p:.2f}, {counts}): no evidence of overfitting",
    )  # fmt: skip


def item_outcome(
    folder: RunFolder, result: ItemResult, metric: Metric, judge_model: str | None
) -> float | None:
    """1.0 / 0.0 for a binary outcome of one item, None when it has none (no checks, no verdict, failed)."""
    if not result.complete:
        return None
    if metric == "pitfall_free":
        return 0.0 if any(n for n in result.pitfall_hits.values()) else 1.0
    grade = read_grade(folder, result.item)
    if grade is None:
        return None
    if metric == "checks_passed":
        checks = grade.checks_for(result.attempt)
        return None if checks is None or checks.passed is None else float(checks.passed)
    verdicts = [v for v in grade.judges if v.attempt == result.attempt and v.verdict != "error"]
    if judge_model is not None:
        verdicts = [v for v in verdicts if v.judge_model == judge_model]
    if not verdicts:
        return None
    return float(verdicts[0].verdict == "pass")


def block_deltas(
    run_dir: Path,
    cell: str,
    *,
    control: str = "C0",
    metric: Metric = "pitfall_free",
    judge_model: str | None = None,
) -> dict[str, list[float]]:
    """Per-block changes (cell − control) of a run folder, by split: ``{"dev": [...], "holdout": [...]}``."""
    folder = RunFolder(run_dir)
    manifest = read_manifest(folder)
    split_of = {t.id: t.split for t in manifest.tasks}
    value: dict[tuple[str, int, str], float] = {}
    outcome: Callable[[ItemResult], float | None] = lambda r: item_outcome(folder, r, metric, judge_model)  # noqa: E731
    for res in iter_results(folder):
        if res.cell in (cell, control):
            v = outcome(res)
            if v is not None:
                value[(res.task, res.repeat, res.cell)] = v
    out: dict[str, list[float]] = {"dev": [], "holdout": []}
    for task, repeat, c in sorted(value):
        if c != cell or (task, repeat, control) not in value:
            continue
        out.setdefault(split_of.get(task, "dev"), []).append(
            value[(task, repeat, cell)] - value[(task, repeat, control)]
        )
    return out


def holdout_findings(
    run_dir: Path,
    cells: Sequence[str],
    *,
    control: str = "C0",
    metric: Metric = "pitfall_free",
    judge_model: str | None = None,
    alpha: float = 0.05,
) -> list[SplitFinding]:
    """:func:`holdout_finding` for every cell of a run folder (cells whose holdout agrees are left out)."""
    found = []
    for cell in cells:
        if cell == control:
            continue
        deltas = block_deltas(run_dir, cell, control=control, metric=metric, judge_model=judge_model)
        f = holdout_finding(cell, metric, deltas["dev"], deltas["holdout"], alpha=alpha)
        if f is not None:
            found.append(f)
    return found


__all__ = ["Metric", "SplitFinding", "block_deltas", "holdout_finding", "holdout_findings", "item_outcome"]

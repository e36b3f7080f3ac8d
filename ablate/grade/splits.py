"""Dev/holdout: does a cell's change measured on the dev tasks hold on the holdout tasks? Tasks are the unit,
compared by an exact one-sided permutation test (docs/ARCHITECTURE.md#statistics says why not blocks)."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Literal

from scipy import stats

from ablate.core.errors import RunFolderError
from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.metrics import BY_NAME, fmt_delta, metric_named  # fmt_delta: the report's units ("pts")
from ablate.folder.result import ItemResult, iter_results
from ablate.grade.finding import HoldoutFinding
from ablate.grade.record import read_grade

Split = Literal["dev", "holdout"]
SPLITS: tuple[Split, Split] = ("dev", "holdout")
#: Per-task lists of per-block changes, by split: ``{"dev": {task: [...]}, "holdout": {...}}``.
TaskDeltas = dict[Split, dict[str, list[float]]]


def holdout_finding(
    cell: str,
    metric: str,
    dev: Mapping[str, Sequence[float]],
    holdout: Mapping[str, Sequence[float]],
    *,
    higher_is_better: bool,
    alpha: float,
) -> HoldoutFinding | None:
    """An overfitting warning (a significant reversal), a reversal within noise, an untested line (a split too
    small to test), or None (holdout agrees, or no dev improvement)."""
    sign = 1.0 if higher_is_better else -1.0
    d = [sign * fmean(v) for v in dev.values() if v]
    h = [sign * fmean(v) for v in holdout.values() if v]
    if not d or not h:
        return None
    dev_delta, hold_delta = fmean(d), fmean(h)
    if dev_delta <= 0 or hold_delta > 0:
        return None  # nothing gained on dev, or holdout agrees
    counts = f"{len(d)} dev / {len(h)} holdout tasks"
    found = functools.partial(
        HoldoutFinding, cell=cell, metric=metric, dev_delta=dev_delta, holdout_delta=hold_delta,
        n_dev_tasks=len(d), n_holdout_tasks=len(h),
    )  # fmt: skip
    change = (
        f"{cell} {metric}: {fmt_delta(metric, dev_delta)} on dev, {fmt_delta(metric, hold_delta)} on holdout"
    )
    if len(d) < 2 or len(h) < 2:
        return found(
            kind="untested", p=None,
            message=f"{change} ({counts}: a split needs at least 2 tasks to test the reversal)",
        )  # fmt: skip
    smallest = 1 / math.comb(len(d) + len(h), len(d))  # the one-sided permutation test's least p
    if smallest > alpha:
        return found(
            kind="untested", p=None,
            message=f"{change} ({counts}): the split cannot warn — its permutation test's smallest p is "
            f"1/{math.comb(len(d) + len(h), len(d))} = {smallest:.2g}, above α {alpha}; more tasks in each split "
            "are needed to tell overfitting from noise",
        )  # fmt: skip
    res = stats.permutation_test(
        (d, h),
        lambda x, y, axis: x.mean(axis=axis) - y.mean(axis=axis),
        permutation_type="independent",
        alternative="greater",
        n_resamples=100_000,
        vectorized=True,
    )
    p = float(res.pvalue)
    if p <= alpha:
        return found(
            kind="overfitting", p=p,
            message=f"WARNING overfitting? {change}; the drop is significant (permutation p = {p:.3g}, {counts}): "
            "the dev gain does not carry over to tasks nobody tuned against",
        )  # fmt: skip
    return found(
        kind="within-noise", p=p,
        message=f"{change}; the gap is within noise (permutation p = {p:.2f}, {counts}): no evidence of overfitting",
    )  # fmt: skip


def item_outcome(folder: RunFolder, result: ItemResult, metric: str, judge_model: str | None) -> float | None:
    """1.0 / 0.0 for a binary outcome of one item, None when it has none."""
    if not metric_named(metric).binary:
        raise ValueError(f"{metric}: the dev/holdout check takes a binary metric")
    if not result.complete:
        return None
    if (value := BY_NAME[metric].value) is not None:
        return value(result)
    grade = read_grade(folder, result.item)
    if grade is None:
        return None
    if metric == "checks_passed":
        checks = grade.checks_for(result.attempt)
        return None if checks is None or checks.passed is None else float(checks.passed)
    if metric != "judge_pass":
        raise ValueError(f"{metric}: a graded metric the dev/holdout check does not read")
    verdicts = [v for v in grade.judges if v.attempt == result.attempt and v.verdict != "error"]
    if judge_model is not None:
        verdicts = [v for v in verdicts if v.judge_model == judge_model]
    if not verdicts:
        return None
    return float(verdicts[0].verdict == "pass")


def split_of_tasks(folder: RunFolder) -> dict[str, Split]:
    """Task id → split from the manifest; a split other than dev or holdout is a located error."""
    out: dict[str, Split] = {}
    for t in read_manifest(folder).tasks:
        if t.split not in SPLITS:
            raise RunFolderError(
                f"{folder.root}/manifest.json: task {t.id!r} has split {t.split!r}",
                hint="a task's split is dev or holdout; fix the task file and plan the run again",
            )
        out[t.id] = "dev" if t.split == "dev" else "holdout"
    return out


def task_deltas(
    run_dir: Path, cell: str, *, control: str, metric: str, judge_model: str | None = None
) -> TaskDeltas:
    """Per-block changes (cell − control) of a run folder, by split and task."""
    folder = RunFolder(run_dir)
    split_of = split_of_tasks(folder)
    value: dict[tuple[str, int, str], float] = {}
    for res in iter_results(folder):
        if res.cell in (cell, control):
            v = item_outcome(folder, res, metric, judge_model)
            if v is not None:
                value[(res.task, res.repeat, res.cell)] = v
    out: TaskDeltas = {"dev": {}, "holdout": {}}
    for task, repeat, c in sorted(value):
        if c != cell or (task, repeat, control) not in value:
            continue
        out[split_of[task]].setdefault(task, []).append(
            value[(task, repeat, cell)] - value[(task, repeat, control)]
        )
    return out


def holdout_findings(
    run_dir: Path,
    cells: Sequence[str],
    *,
    control: str,
    metric: str,
    alpha: float,
    judge_model: str | None = None,
) -> list[HoldoutFinding]:
    """:func:`holdout_finding` for every cell of a run folder (cells whose holdout agrees are left out)."""
    higher = BY_NAME[metric].higher_is_better
    found = []
    for cell in (c for c in cells if c != control):
        deltas = task_deltas(run_dir, cell, control=control, metric=metric, judge_model=judge_model)
        found.append(
            holdout_finding(
                cell, metric, deltas["dev"], deltas["holdout"], higher_is_better=higher, alpha=alpha
            )
        )
    return [f for f in found if f is not None]

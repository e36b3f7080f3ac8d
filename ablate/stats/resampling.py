"""Counts and costs (turns, tool calls, cost): task-stratified bootstrap interval and sign-flip permutation test.

Both work on the per-block differences ``d = cell − control`` of paired (task, repeat) blocks.

* Interval: percentile bootstrap of the mean difference, resampling blocks *within each task*
  (``scipy.stats.bootstrap`` with one sample per task: scipy resamples each sample independently, which is
  exactly stratified resampling), seeded. When a task has a single block, resampling within it would
  pretend it has no variance, so the blocks are resampled across tasks instead and the method says so.
* Test: paired permutation test (``scipy.stats.permutation_test``, ``permutation_type="samples"``): under
  the null the cell and control labels of each block are exchangeable, i.e. each difference's sign is a
  coin flip. Exact when the 2^n sign patterns fit in ``n_resamples``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from ablate.stats.types import Interval, NotComputable, PairedResult

#: Resamples for the bootstrap and the permutation test (the permutation test is exact below 2^13 blocks).
N_RESAMPLES = 9999


def _pooled_mean(*samples: npt.NDArray[np.float64], axis: int = -1) -> Any:
    total = sum(s.shape[axis] for s in samples)
    return sum(np.sum(s, axis=axis) for s in samples) / total


def stratified_bootstrap(
    diffs: Sequence[float],
    strata: Sequence[Hashable],
    *,
    level: float = 0.95,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> Interval | NotComputable:
    """Percentile interval for the mean of ``diffs``, resampling within each stratum (task), seeded."""
    if len(diffs) != len(strata):
        raise ValueError("one stratum per difference")
    if len(diffs) < 2:
        return NotComputable("fewer than 2 paired blocks (n < 2)")
    d = np.asarray(diffs, dtype=np.float64)
    groups: dict[Hashable, list[int]] = {}
    for i, s in enumerate(strata):
        groups.setdefault(s, []).append(i)
    method = "bootstrap-stratified-percentile"
    samples = [d[idx] for idx in groups.values()]
    if any(len(s) < 2 for s in samples):
        samples, method = [d], "bootstrap-percentile (unstratified: a task has one block)"
    if np.all(d == d[0]):
        return Interval(float(d[0]), float(d[0]), level, method + " (every block has the same difference)")
    res = sps.bootstrap(
        tuple(samples),
        _pooled_mean,
        vectorized=True,
        paired=False,
        n_resamples=n_resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return Interval(float(res.confidence_interval.low), float(res.confidence_interval.high), level, method)


def _mean_diff(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], axis: int = -1) -> Any:
    return np.mean(x - y, axis=axis)


def sign_flip_p(
    cell: Sequence[float], control: Sequence[float], *, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> float | NotComputable:
    """Two-sided p of the paired sign-flip permutation test of mean(cell − control) = 0."""
    if len(cell) != len(control):
        raise ValueError("cell and control must have one value per block")
    if len(cell) < 2:
        return NotComputable("fewer than 2 paired blocks (n < 2)")
    x, y = np.asarray(cell, dtype=np.float64), np.asarray(control, dtype=np.float64)
    if np.all(x == y):
        return NotComputable(f"no block differs: both cells gave the same value in all {len(x)} blocks")
    res = sps.permutation_test(
        (x, y),
        _mean_diff,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(res.pvalue)


def paired_mean(
    cell: Sequence[float],
    control: Sequence[float],
    strata: Sequence[Hashable],
    *,
    level: float = 0.95,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> PairedResult:
    """Compare a count or cost on paired blocks: means, Δ, stratified bootstrap interval, sign-flip p."""
    if not len(cell) == len(control) == len(strata):
        raise ValueError("cell, control and strata must have one entry per block")
    n = len(cell)
    method = "sign-flip-permutation"
    if n == 0:
        reason = NotComputable("no paired blocks")
        return PairedResult(0, None, None, None, reason, reason, method)
    cm, km = float(np.mean(cell)), float(np.mean(control))
    if n < 2:
        reason = NotComputable("one paired block: nothing can be significant (n < 2)")
        return PairedResult(n, cm, km, cm - km, reason, reason, method)
    diffs = [float(a) - float(b) for a, b in zip(cell, control, strict=True)]
    interval = stratified_bootstrap(diffs, strata, level=level, seed=seed, n_resamples=n_resamples)
    p = sign_flip_p(cell, control, seed=seed, n_resamples=n_resamples)
    return PairedResult(n, cm, km, cm - km, interval, p, method)

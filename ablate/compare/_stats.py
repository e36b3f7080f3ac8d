"""The few statistics ``ablate compare`` calls, behind one seam.

``ablate.stats`` (issue 11) is the project's statistics module; until it is on this branch these thin
wrappers over scipy/numpy stand in, with the same formulas (DESIGN §7): Wilson intervals, the exact paired
test over discordant blocks, a paired sign-flip permutation test, a seeded task-stratified bootstrap, Holm.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest

BOOTSTRAP_RESAMPLES = 2000
PERMUTATIONS = 10_000


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Wilson score interval for k successes in n trials; (None, None) when n == 0."""
    if n == 0:
        return None, None
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def paired_exact_p(improved: int, regressed: int) -> float:
    """Two-sided exact binomial (McNemar exact) test on discordant blocks; 1.0 when there are none."""
    n = improved + regressed
    if n == 0:
        return 1.0
    return float(binomtest(improved, n, 0.5, alternative="two-sided").pvalue)


def sign_flip_p(diffs: Sequence[float], *, seed: int = 0) -> float:
    """Two-sided paired permutation (sign-flip) test of mean difference 0: exact for up to 16 non-zero
    differences, else seeded Monte Carlo with ``(hits + 1) / (draws + 1)``."""
    nz = np.array([d for d in diffs if d != 0], dtype=float)
    if nz.size == 0:
        return 1.0
    observed = abs(nz.sum())
    if nz.size <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=int(nz.size))))
        sums = np.abs(signs @ nz)
        return float(np.mean(sums >= observed - 1e-12))
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(PERMUTATIONS, nz.size))
    hits = int(np.sum(np.abs(signs @ nz) >= observed - 1e-12))
    return (hits + 1) / (PERMUTATIONS + 1)


def stratified_bootstrap_ci(
    pairs: Sequence[tuple[str, float]], *, seed: int = 0, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Percentile interval of the mean paired difference, resampling blocks within each task (stratum)."""
    if not pairs:
        return None, None
    strata: dict[str, list[float]] = defaultdict(list)
    for task, d in pairs:
        strata[task].append(d)
    rng = np.random.default_rng(seed)
    total = np.zeros(BOOTSTRAP_RESAMPLES)
    for task in sorted(strata):
        values = np.array(strata[task], dtype=float)
        idx = rng.integers(0, values.size, size=(BOOTSTRAP_RESAMPLES, values.size))
        total += values[idx].sum(axis=1)
    means = total / len(pairs)
    tail = (1 - confidence) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (monotone, capped at 1), in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted

"""Power: how many paired blocks a run needs to detect an effect, and the smallest effect a run can detect.

* Binary metrics: the exact power of the exact discordant-block test (:mod:`ablate.stats.proportions`),
  outcomes in a block independent given their rates (positive within-block correlation only adds power: the
  cautious figure). Gained = p_cell (1 − p_control), lost = p_control (1 − p_cell); discordant blocks
  K ~ Binomial(n, gained + lost) and, given K = k, gained ~ Binomial(k, gained / (gained + lost)).
* Counts and costs: the paired t-test's power (non-central t, ``scipy.stats.nct``), the large-sample sign-flip
  test, for a mean difference ``effect`` and a per-block sd ``sd_diff``.

Pass ``alpha`` already divided by m (Holm's first step): the figure then holds for every comparison."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from ablate.stats.types import NotComputable

FloatArray = npt.NDArray[np.float64]
#: The power every "runs needed" figure is computed for.
DEFAULT_POWER = 0.8
#: Largest number of paired blocks :func:`runs_needed_binary` and :func:`runs_needed_mean` search.
MAX_BLOCKS = 5000


def _check_rate(name: str, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}={p!r} outside [0, 1]")


def _first_n(enough: Callable[[int], bool], max_blocks: int = MAX_BLOCKS) -> int | NotComputable:
    """The smallest n >= 2 with ``enough(n)``: strides through large n, then steps back one block at a time."""
    prev, n = 1, 2
    while n <= max_blocks:
        if enough(n):
            while n - 1 > prev and enough(n - 1):
                n -= 1
            return n
        prev, n = n, n + max(1, n // 50)
    return NotComputable(f"more than {max_blocks} paired blocks")


def _power_binary_many(n: int, p_control: float, p_cells: FloatArray, alpha: float) -> FloatArray:
    """:func:`power_binary` for many cell rates at once (one row of the exact computation per rate)."""
    gained = p_cells * (1 - p_control)
    lost = p_control * (1 - p_cells)
    psi = gained + lost
    q = np.divide(gained, psi, out=np.zeros_like(psi), where=psi > 0)[:, None]
    k = np.arange(n + 1)
    # c_k: the largest c with 2 * P(Bin(k, 1/2) <= c) <= alpha (-1: no rejection possible with k blocks).
    c = sps.binom.ppf(alpha / 2, k, 0.5)
    c = np.where(2 * sps.binom.cdf(c, k, 0.5) <= alpha, c, c - 1)
    reject = np.where(c >= 0, sps.binom.cdf(c, k, q) + sps.binom.sf(k - c - 1, k, q), 0.0)
    power = np.sum(sps.binom.pmf(k, n, psi[:, None]) * reject, axis=1)
    return np.where(psi > 0, power, 0.0).astype(np.float64)


def power_binary(n: int, p_control: float, p_cell: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided exact discordant-block test with ``n`` blocks."""
    _check_rate("p_control", p_control)
    _check_rate("p_cell", p_cell)
    if n < 1:
        return 0.0
    return float(_power_binary_many(n, p_control, np.array([p_cell], dtype=np.float64), alpha)[0])


def runs_needed_binary(
    p_control: float, p_cell: float, alpha: float = 0.05, power: float = DEFAULT_POWER
) -> int | NotComputable:
    """The smallest number of paired blocks whose exact power reaches ``power``."""
    if p_control == p_cell:
        return NotComputable("no effect to detect (equal rates)")
    return _first_n(lambda n: power_binary(n, p_control, p_cell, alpha) >= power)


def blocks_to_detect(
    p_control: float, change: float, alpha: float = 0.05, power: float = DEFAULT_POWER
) -> int | NotComputable:
    """The paired blocks the exact test needs to detect a change of ``change`` from ``p_control`` with
    ``power`` in both directions: the weaker one (a direction that would leave [0, 1] is not required)."""
    _check_rate("p_control", p_control)
    moved = [p for p in (p_control - change, p_control + change) if 0.0 <= p <= 1.0]
    needs = [runs_needed_binary(p_control, p, alpha, power) for p in moved]
    if not needs:
        return NotComputable(f"a change of {change:g} leaves [0, 1] both ways from {p_control:g}")
    bad = [n for n in needs if isinstance(n, NotComputable)]
    return bad[0] if bad else max(n for n in needs if isinstance(n, int))


def detectable_binary(
    n: int, p_control: float, alpha: float = 0.05, power: float = DEFAULT_POWER, steps: int = 200
) -> float | NotComputable:
    """The smallest |Δ rate| the exact test detects with ``power`` in ``n`` blocks **in both directions**: from
    a rate other than ½ a rise and a fall differ in power, and a gate that says "detects d" must detect a
    regression of d as surely as a gain (a direction that would leave [0, 1] is not required)."""
    _check_rate("p_control", p_control)
    if n < 2:
        return NotComputable("fewer than 2 paired blocks (n < 2)")
    return weaker_direction(
        lambda cells: _power_binary_many(n, p_control, cells, alpha), p_control, power, steps, n
    )


def weaker_direction(
    powers: Callable[[FloatArray], FloatArray], p_control: float, power: float, steps: int, n: int
) -> float | NotComputable:
    """The smallest d on a grid of ``steps`` with ``powers`` ≥ ``power`` at p_control + d and at p_control − d
    (each side only where it stays in [0, 1]); ``powers`` maps cell rates to the test's power."""
    d = np.arange(1, steps + 1, dtype=np.float64) / steps
    ok = np.ones(steps, dtype=bool)
    feasible = np.zeros(steps, dtype=bool)
    for sign in (1.0, -1.0):
        cells = p_control + sign * d
        inside = (cells >= -1e-12) & (cells <= 1 + 1e-12)
        got = np.zeros(steps, dtype=bool)
        if inside.any():
            got[inside] = powers(np.clip(cells[inside], 0.0, 1.0)) >= power
        ok &= got | ~inside
        feasible |= inside
    reached = np.nonzero(ok & feasible)[0]
    if not reached.size:
        return NotComputable(f"no change of the rate is detectable with {power:.0%} power in {n} blocks")
    return float(d[reached[0]])


def power_mean(n: int, effect: float, sd_diff: float, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test with ``n`` blocks for a mean difference ``effect``."""
    if n < 2:
        return 0.0
    if sd_diff <= 0:
        raise ValueError("sd_diff must be > 0")
    df = n - 1
    nc = effect * math.sqrt(n) / sd_diff
    t = sps.t.ppf(1 - alpha / 2, df)
    value = float(sps.nct.sf(t, df, nc) + sps.nct.cdf(-t, df, nc))
    if math.isnan(value):
        # scipy's nct loses precision for few degrees of freedom and a large non-centrality: average
        # P(|Z + nc| > t sqrt(V / df)) over V ~ chi2(df) instead (the definition of the non-central t),
        # on 4,000 equal-probability quantiles of V (error well below 1e-3).
        v = sps.chi2.ppf((np.arange(4000) + 0.5) / 4000, df)
        s_ = t * np.sqrt(v / df)
        value = float(np.mean(sps.norm.sf(s_ - nc) + sps.norm.cdf(-s_ - nc)))
    return min(1.0, max(0.0, value))


def runs_needed_mean(
    effect: float, sd_diff: float, alpha: float = 0.05, power: float = DEFAULT_POWER
) -> int | NotComputable:
    """The smallest number of paired blocks for which the paired test reaches ``power``."""
    if effect == 0:
        return NotComputable("no effect to detect (effect = 0)")
    if sd_diff <= 0:
        return NotComputable("no spread of the per-block differences observed (sd = 0)")
    return _first_n(lambda n: power_mean(n, effect, sd_diff, alpha) >= power)


def detectable_mean(
    n: int, sd_diff: float, alpha: float = 0.05, power: float = DEFAULT_POWER
) -> float | NotComputable:
    """The smallest |mean difference| the paired test detects with ``power`` in ``n`` blocks."""
    if n < 2:
        return NotComputable("fewer than 2 paired blocks (n < 2)")
    if sd_diff <= 0:
        return NotComputable("no spread of the per-block differences observed (sd = 0)")
    from scipy.optimize import brentq

    hi = sd_diff
    while power_mean(n, hi, sd_diff, alpha) < power:
        hi *= 2
    return float(brentq(lambda e: power_mean(n, e, sd_diff, alpha) - power, 0.0, hi, xtol=1e-9 * hi))


def spread(per_repeat_means: list[float]) -> float | NotComputable:
    """Run-to-run spread: the sample sd (ddof=1) of a cell's per-repeat means."""
    if len(per_repeat_means) < 2:
        return NotComputable("one repeat: run-to-run spread needs at least 2")
    return float(np.std(np.asarray(per_repeat_means, dtype=np.float64), ddof=1))

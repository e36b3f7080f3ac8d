"""Binary outcomes: Wilson intervals, the exact paired test on discordant blocks, Newcombe's paired interval.

Only discordant blocks carry information: ``gained`` (the cell succeeded, the control did not) and ``lost``.
Under the null each is a fair coin, so the test is the two-sided binomial test of ``gained`` out of
``gained + lost`` at 1/2 (the exact McNemar test; Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.5)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from ablate.stats.types import Interval, NotComputable, PairedResult


def wilson(successes: int, n: int, level: float = 0.95) -> Interval | NotComputable:
    """Wilson score interval for ``successes`` out of ``n`` (Wilson 1927; Newcombe 1998, method 3), by scipy's
    ``binomtest(...).proportion_ci(method="wilson")``; ``n == 0`` is not computable."""
    if n <= 0:
        return NotComputable("no observations")
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside 0..{n}")
    ci = sps.binomtest(successes, n).proportion_ci(confidence_level=level, method="wilson")
    return Interval(float(ci.low), float(ci.high), level, "wilson")


def exact_paired_p(gained: npt.ArrayLike, lost: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Two-sided exact binomial p of ``gained`` vs ``lost`` discordant blocks, vectorised: ``scipy.stats.binomtest
    (gained, gained + lost, 0.5).pvalue`` (at ½, twice the smaller tail, capped at 1); none discordant: NaN."""
    g = np.asarray(gained, dtype=np.int64)
    lo = np.asarray(lost, dtype=np.int64)
    k = g + lo
    with np.errstate(invalid="ignore"):
        p = np.minimum(1.0, 2.0 * sps.binom.cdf(np.minimum(g, lo), k, 0.5))
    return np.where(k > 0, p, np.nan).astype(np.float64)


def newcombe_paired(
    both: int, cell_only: int, control_only: int, neither: int, level: float = 0.95
) -> Interval | NotComputable:
    """Interval for (cell rate − control rate) on paired blocks: Newcombe RG, "Improved confidence intervals for
    the difference between binomial proportions based on paired data", Stat Med 17:2635–2650, 1998, method 10:
    the marginal Wilson intervals squared and added with the continuity-corrected phi correlation (worked
    example: Altman et al., *Statistics with Confidence*, 2000, Table 6.2)."""
    n = both + cell_only + control_only + neither
    if n <= 0:
        return NotComputable("no paired blocks")
    p1, p2 = (both + cell_only) / n, (both + control_only) / n
    w1, w2 = wilson(both + cell_only, n, level), wilson(both + control_only, n, level)
    assert isinstance(w1, Interval) and isinstance(w2, Interval)
    l1, u1, l2, u2 = w1.low, w1.high, w2.low, w2.high
    denom = (both + cell_only) * (control_only + neither) * (both + control_only) * (cell_only + neither)
    phi = 0.0
    if denom > 0:
        b = both * neither - cell_only * control_only
        c = b - n / 2 if b > n / 2 else (b if b < 0 else 0.0)
        phi = c / math.sqrt(denom)
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return Interval(max(-1.0, low), min(1.0, high), level, "newcombe-paired")


def paired_binary(cell: Sequence[bool], control: Sequence[bool], level: float = 0.95) -> PairedResult:
    """Compare a binary metric on paired blocks (``cell[i]``, ``control[i]``: block i): rates, Δ, Newcombe
    interval, exact discordant-block test; fewer than two blocks: neither computable; no discordant block: no p."""
    if len(cell) != len(control):
        raise ValueError("cell and control must have one outcome per block")
    n = len(cell)
    if n == 0:
        reason = NotComputable("no paired blocks")
        return PairedResult(0, None, None, None, reason, reason, "exact-binomial-discordant")
    x, y = np.asarray(cell, dtype=bool), np.asarray(control, dtype=bool)
    both = int(np.sum(x & y))
    gained = int(np.sum(x & ~y))
    lost = int(np.sum(~x & y))
    neither = n - both - gained - lost
    cell_rate, control_rate = float(x.mean()), float(y.mean())
    delta = cell_rate - control_rate
    if n < 2:
        reason = NotComputable("one paired block: nothing can be significant (n < 2)")
        return PairedResult(
            n, cell_rate, control_rate, delta, reason, reason, "exact-binomial-discordant", gained, lost
        )
    interval = newcombe_paired(both, gained, lost, neither, level)
    p: float | NotComputable
    if gained + lost == 0:
        p = NotComputable(f"no discordant blocks: both cells gave the same outcome in all {n} blocks")
    else:
        p = float(exact_paired_p(gained, lost))
    return PairedResult(
        n, cell_rate, control_rate, delta, interval, p, "exact-binomial-discordant", gained, lost
    )

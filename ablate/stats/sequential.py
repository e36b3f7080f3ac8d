"""Anytime-valid inference for adaptive runs: e-processes, anytime p-values, confidence sequences, decisions.

Each figure is valid at every look and any data-dependent stopping time: it is built from a nonnegative
(super)martingale under its null, and Ville's inequality bounds the chance that it *ever* reaches 1/α by α
(Ville J, *Étude critique de la notion de collectif*, 1939). Sources, by function:

* :func:`discordant_log_e`: Robbins H, "Statistical methods related to the law of the iterated logarithm", Ann
  Math Stat 41:1397–1409, 1970 (the mixture martingale), its Beta(a, a) prior tuned by :func:`prior_for`.
* :func:`anytime_p`: Ramdas A, Grünwald P, Vovk V, Shafer G, "Game-theoretic statistics and safe anytime-valid
  inference", Stat Sci 38:576–601, 2023.
* :func:`betting_cs`: Waudby-Smith I & Ramdas A, "Estimating means of bounded random variables by betting", JRSS
  B 86:1–27, 2024 (§4, hedged capital with λ^PrPl of eq. 26).
* :func:`futility_log_e`: Shafer G, "Testing by betting", JRSS A 184:407–431, 2021; the aGRAPA bet aimed at
  Δ = 0 as in Stark PB, "ALPHA: Audit that learns from previously hand-audited ballots", Ann Appl Stat 17(1),
  2023. Testing the alternative directly (rather than reading a two-sided confidence sequence) makes the error
  on an effect well beyond d decay fast: a bet against "Δ ≥ d" loses money steadily when Δ = 0.35.
* :func:`decide`: like a non-binding futility bound of a group-sequential design, a draw costs power, never a
  false "real".

Every function is vectorised over leading axes (simulated experiments, cells), so the simulations that check
these properties run the very code a real run uses."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special

from ablate.core.constants import DEFAULT_DRAW_BETA
from ablate.stats.multiplicity import holm_adjust

FloatArray = npt.NDArray[np.float64]

#: Beta(a, a) mixing prior of :func:`discordant_log_e`: a = 1 (uniform over the discordant success rate).
DEFAULT_PRIOR_A = 1.0
#: Pseudo-blocks at a discordance rate of ½ that regularise the futility bets' running estimate.
FUTILITY_PRIOR_BLOCKS = 10.0
#: The largest futility bet, as a fraction of the one that would stake everything (1 / (1 − d)).
FUTILITY_BET_CAP = 0.75
#: Candidate means in :func:`betting_cs` (per unit of the range; the interval's ends are rounded outwards).
DEFAULT_GRID = 201
#: The largest bet of the capital process, as a fraction of what keeps the capital positive (c in WSR §4).
BET_CAP = 0.5

Decision = Literal["real", "no-effect", "undecided"]
#: Codes of :func:`decide`'s array, indexable by the code.
DECISIONS: tuple[Decision, Decision, Decision] = ("undecided", "real", "no-effect")
UNDECIDED, REAL, NO_EFFECT = 0, 1, 2


def discordant_log_e(
    gained: npt.ArrayLike, lost: npt.ArrayLike, prior_a: float = DEFAULT_PRIOR_A
) -> FloatArray:
    """log E of the beta-binomial mixture martingale (Robbins 1970) after ``gained`` and ``lost`` discordant blocks:
    E = ∫ θ^g (1−θ)^l dBeta(a, a)(θ) / (1/2)^(g+l) = B(a+g, a+l) / B(a, a) · 2^(g+l), a nonnegative martingale
    from 1 under the null over the discordant blocks, so P(E ever ≥ 1/α) ≤ α; the symmetric prior makes it
    two-sided. Vectorised; ``gained`` and ``lost`` broadcast."""
    if prior_a <= 0:
        raise ValueError(f"prior_a={prior_a!r} must be positive")
    g = np.asarray(gained, dtype=np.float64)
    lo = np.asarray(lost, dtype=np.float64)
    if np.any(g < 0) or np.any(lo < 0):
        raise ValueError("discordant counts must be non-negative")
    out = (
        special.betaln(prior_a + g, prior_a + lo) - special.betaln(prior_a, prior_a) + (g + lo) * math.log(2)
    )
    return np.asarray(out, dtype=np.float64)


def discordant_path(
    cell: npt.ArrayLike, control: npt.ArrayLike, prior_a: float = DEFAULT_PRIOR_A
) -> FloatArray:
    """log E after each block of paired binary outcomes (last axis = blocks, in the order they were observed).

    ``cell`` and ``control`` broadcast (one control row against many cells)."""
    x = np.asarray(cell, dtype=bool)
    y = np.asarray(control, dtype=bool)
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"cell {x.shape} and control {y.shape} outcomes must pair block by block")
    gained = np.cumsum(x & ~y, axis=-1)
    lost = np.cumsum(~x & y, axis=-1)
    return discordant_log_e(gained, lost, prior_a)


def anytime_p(log_e_path: npt.ArrayLike) -> FloatArray:
    """Anytime-valid p-values along a path of log e-values (last axis = time): min(1, 1 / max_{s≤t} E_s).

    By Ville's inequality P(p_τ ≤ α) ≤ α at every stopping time τ (Ramdas et al. 2023, §2); the p-value never
    rises, so a comparison once significant stays so."""
    le = np.asarray(log_e_path, dtype=np.float64)
    running = np.maximum.accumulate(np.maximum(le, 0.0), axis=-1)
    return np.asarray(np.exp(-running), dtype=np.float64)


def betting_cs(
    x: npt.ArrayLike, low: float, high: float, alpha: float = 0.05, grid: int = DEFAULT_GRID, every: int = 1
) -> tuple[FloatArray, FloatArray]:
    """Confidence sequence for the mean of observations in [low, high] (last axis = time), at level 1 − α.

    Waudby-Smith & Ramdas (2024), hedged capital process over candidate means m (the observations rescaled to
    [0, 1]): K_t(m) = max(½ ∏(1 + λ⁺_i (z_i − m)), ½ ∏(1 − λ⁻_i (z_i − m))), predictable plug-in bets
    λ_t = √(2 log(2/α) / (σ̂²_{t−1} t log(1+t))) capped at c/m and c/(1−m), c = 1/2 (eq. 26, with eq. 27's
    regularised running mean and variance). K_t(m*) is at most a nonnegative martingale from 1, so the running
    intersection {m : K_s(m) < 1/α, s ≤ t} covers m* at every t at once with probability ≥ 1 − α; the ends of
    the ``grid`` candidates kept are moved outwards to the next excluded one. Returns (lower, upper) after
    every ``every``-th observation (last axis cut to ``n // every``); NaN when every candidate is excluded."""
    if not high > low:
        raise ValueError(f"range [{low}, {high}] is empty")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} outside (0, 1)")
    xs = np.asarray(x, dtype=np.float64)
    z = (xs - low) / (high - low)
    if np.any(z < -1e-12) or np.any(z > 1 + 1e-12):
        raise ValueError(f"observations outside the declared range [{low}, {high}]")
    z = np.clip(z, 0.0, 1.0)
    m = np.linspace(0.0, 1.0, grid + 2)[1:-1]  # candidates strictly inside (0, 1)
    batch, n = z.shape[:-1], z.shape[-1]
    if every < 1:
        raise ValueError(f"every={every!r} must be at least 1")
    log_kp = np.zeros((*batch, grid), dtype=np.float32)
    log_km = np.zeros((*batch, grid), dtype=np.float32)
    excluded = np.zeros((*batch, grid), dtype=bool)
    lows = np.full((*batch, n // every), np.nan)
    highs = np.full((*batch, n // every), np.nan)
    threshold = math.log(1.0 / alpha)
    mu_sum = np.zeros(batch)
    var_sum = np.zeros(batch)
    sigma2 = np.full(batch, 0.25)
    mf = m.astype(np.float32)
    cap_p, cap_m = (BET_CAP / mf).astype(np.float32), (BET_CAP / (1.0 - mf)).astype(np.float32)
    for t in range(1, n + 1):
        zt = z[..., t - 1]
        lam = np.sqrt(2.0 * math.log(2.0 / alpha) / (sigma2 * t * math.log(1.0 + t)))
        diff = zt[..., None].astype(np.float32) - mf
        log_kp += np.log1p(np.minimum(lam[..., None].astype(np.float32), cap_p) * diff)
        log_km += np.log1p(-np.minimum(lam[..., None].astype(np.float32), cap_m) * diff)
        excluded |= np.maximum(log_kp, log_km) >= threshold + math.log(2.0)
        mu_sum += zt
        mu = (0.5 + mu_sum) / (t + 1)
        var_sum += (zt - mu) ** 2
        sigma2 = (0.25 + var_sum) / (t + 1)
        if t % every == 0:
            lows[..., t // every - 1], highs[..., t // every - 1] = _ends(excluded, m)
    scale = high - low
    return low + lows * scale, low + highs * scale


def _ends(excluded: npt.NDArray[np.bool_], m: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Outward-rounded ends of the kept candidates (NaN where none is kept)."""
    kept = ~excluded
    anyk = kept.any(axis=-1)
    first = np.argmax(kept, axis=-1)
    last = kept.shape[-1] - 1 - np.argmax(kept[..., ::-1], axis=-1)
    edges = np.concatenate(([0.0], m, [1.0]))
    lo = np.where(anyk, edges[first], np.nan)  # the excluded point below the first kept one (or 0)
    hi = np.where(anyk, edges[last + 2], np.nan)  # the excluded point above the last kept one (or 1)
    return lo, hi


def prior_for(min_effect: float) -> float:
    """The Beta(a, a) prior of :func:`discordant_log_e` tuned to ``min_effect`` d (at least 1, the uniform): at a
    rate of ½ an effect d moves a discordant block's chance of favouring the cell to ½ + d, and the prior's sd
    1 / (2√(2a + 1)) equals d at a = (1 / (4d²) − 1) / 2 (2.6 for d = 0.2). Any fixed prior keeps it valid."""
    if not 0 < min_effect < 1:
        raise ValueError(f"min_effect={min_effect!r} outside (0, 1)")
    return max(1.0, (1.0 / (4.0 * min_effect**2) - 1.0) / 2.0)


def power_anytime(
    n: int, p_control: float, p_cells: npt.ArrayLike, alpha: float, prior_a: float = DEFAULT_PRIOR_A
) -> FloatArray:
    """Exact power of the test that decides an adaptive run or a peek: the chance that the anytime p of
    :func:`discordant_path`, looked at after every block, reaches ``alpha`` within ``n`` blocks, per cell rate
    in ``p_cells`` (outcomes independent given their rates, as :mod:`ablate.stats.power`). E crosses within n
    blocks when it crosses within the K ~ Binomial(n, gained + lost) discordant ones; that chance within j,
    each a gain with probability q, is one dynamic programme over the gained count, crossings absorbed."""
    cells = np.atleast_1d(np.asarray(p_cells, dtype=np.float64))
    gained = cells * (1 - p_control)
    lost = p_control * (1 - cells)
    psi = gained + lost
    q = np.divide(gained, psi, out=np.zeros_like(psi), where=psi > 0)[:, None]
    threshold = math.log(1.0 / alpha)
    g = np.arange(n + 1)
    alive = np.zeros((len(cells), n + 1))
    alive[:, 0] = 1.0
    crossed = np.zeros((len(cells), n + 1))  # crossed[:, j]: P(E reached 1/α within j discordant blocks)
    for j in range(1, n + 1):
        nxt = alive * (1 - q)
        nxt[:, 1:] += alive[:, :-1] * q
        hit = np.zeros(n + 1, dtype=bool)
        hit[: j + 1] = discordant_log_e(g[: j + 1], j - g[: j + 1], prior_a) >= threshold
        crossed[:, j] = crossed[:, j - 1] + nxt[:, hit].sum(axis=1)
        nxt[:, hit] = 0.0
        alive = nxt
    from scipy import stats as sps

    k = np.arange(n + 1)
    power = np.sum(sps.binom.pmf(k, n, psi[:, None]) * crossed, axis=1)
    return np.asarray(np.where(psi > 0, power, 0.0), dtype=np.float64)


def detectable_anytime(
    n: int,
    p_control: float,
    alpha: float,
    prior_a: float = DEFAULT_PRIOR_A,
    power: float = 0.8,
    steps: int = 100,
) -> float | None:
    """The smallest |Δ rate| the anytime-valid test (:func:`power_anytime`) detects with ``power`` within ``n``
    blocks in both directions (the weaker one decides); None when no change is detectable."""
    from ablate.stats.power import weaker_direction

    if n < 1:
        return None
    d = weaker_direction(
        lambda cells: power_anytime(n, p_control, cells, alpha, prior_a), p_control, power, steps, n
    )
    return d if isinstance(d, float) else None


def futility_log_e(diff: npt.ArrayLike, min_effect: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Running maxima of log e-processes against "effect ≥ +d" and "effect ≤ −d" (last axis = blocks), over
    ``diff``, the paired differences cell − control of a binary outcome in the order observed.

    Against H⁺ (E[X_t | past] ≥ d each block), ∏(1 − λ_t (X_t − d)) with a predictable λ_t in [0, 1 / (1 − d))
    is a nonnegative supermartingale starting at 1 (Shafer 2021; Waudby-Smith & Ramdas 2024), so by Ville's
    inequality it ever reaches 1/β with probability at most β; likewise ∏(1 + λ_t (X_t + d)) against H⁻. The
    bet is aGRAPA (Waudby-Smith & Ramdas 2024) for "no effect": λ_t = d / (q̂_{t−1} + d²), q̂ the discordant
    rate so far with :data:`FUTILITY_PRIOR_BLOCKS` pseudo-blocks at ½, capped at :data:`FUTILITY_BET_CAP` /
    (1 − d). An effect varying across tasks around d is checked by simulation in the tests. ``min_effect`` may
    vary by block: a block's d is fixed before it runs. Returns (against H⁺, against H⁻), shaped like ``diff``."""
    d = np.asarray(min_effect, dtype=np.float64)
    if not np.all((d > 0) & (d < 1)):
        raise ValueError(f"min_effect={min_effect!r} outside (0, 1)")
    x = np.asarray(diff, dtype=np.float64)
    if np.any(np.abs(x) > 1 + 1e-12):
        raise ValueError("paired differences of a binary outcome lie in [-1, 1]")
    k = FUTILITY_PRIOR_BLOCKS
    seen = np.cumsum(np.abs(x), axis=-1) - np.abs(x)  # discordant blocks before each one
    t = np.arange(x.shape[-1], dtype=np.float64)
    q = (0.5 * k + seen) / (k + t)
    lam = np.minimum(d / (q + d * d), FUTILITY_BET_CAP / (1.0 - d))
    up = np.cumsum(np.log1p(-lam * (x - d)), axis=-1)
    down = np.cumsum(np.log1p(lam * (x + d)), axis=-1)
    return (
        np.maximum.accumulate(np.maximum(up, 0.0), axis=-1),
        np.maximum.accumulate(np.maximum(down, 0.0), axis=-1),
    )


def decide(
    p_anytime: npt.ArrayLike,
    futility_up: npt.ArrayLike,
    futility_down: npt.ArrayLike,
    *,
    alpha: float,
    beta: float = DEFAULT_DRAW_BETA,
) -> npt.NDArray[np.int8]:
    """The decision of every comparison at one look (last axis = the run's comparisons), as codes of DECISIONS:
    ``real`` (1), Holm-adjusted anytime p ≤ α (it only falls, so a "real" stays real); ``no-effect`` (2), not
    real and both :func:`futility_log_e` maxima past log(1/β); ``undecided`` (0) otherwise (NaN never decides)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} outside (0, 1)")
    if not 0 < beta < 1:
        raise ValueError(f"beta={beta!r} outside (0, 1)")
    adjusted = holm_adjust(p_anytime)
    up = np.asarray(futility_up, dtype=np.float64)
    down = np.asarray(futility_down, dtype=np.float64)
    threshold = math.log(1.0 / beta)
    with np.errstate(invalid="ignore"):
        drawn = (up >= threshold) & (down >= threshold)
    out = np.where(adjusted <= alpha, REAL, np.where(drawn, NO_EFFECT, UNDECIDED))
    return out.astype(np.int8)

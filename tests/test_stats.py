"""ablate.stats against published worked examples, guards, and simulation (docs/ARCHITECTURE.md#statistics).

The simulations are in-process and vectorised: under a null the "real" mark (Holm-adjusted p <= alpha) fires
at most at the nominal rate; under a planted effect it is found at the power runs-needed predicted.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from ablate.stats.agreement import cohen_kappa
from ablate.stats.multiplicity import holm
from ablate.stats.power import (
    detectable_binary,
    detectable_mean,
    power_binary,
    power_mean,
    runs_needed_binary,
    runs_needed_mean,
    spread,
)
from ablate.stats.proportions import exact_paired_p, newcombe_paired, paired_binary, wilson
from ablate.stats.resampling import (
    min_interval_blocks,
    paired_mean,
    resamples_for,
    sign_flip_p,
    sign_flip_p_batch,
    t_interval,
)
from ablate.stats.types import Interval, NotComputable

# ---------------------------------------------------------------------------------------------- worked examples


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # Newcombe RG (1998), "Two-sided confidence intervals for the single proportion: comparison of seven
        # methods", Stat Med 17:857-872, Table II, method 3 (Wilson score, no continuity correction).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0000, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombe_1998_table_ii(k: int, n: int, low: float, high: float) -> None:
    ci = wilson(k, n)
    assert isinstance(ci, Interval)
    assert (round(ci.low, 4), round(ci.high, 4)) == (low, high)


def test_wilson_without_observations_is_not_computable() -> None:
    assert isinstance(wilson(0, 0), NotComputable)


def test_exact_paired_p_is_the_sign_test() -> None:
    # 9 of 10 discordant pairs one way: two-sided sign test p = 2 * (1 + 10) / 2**10 = 0.021484375
    # (Conover, Practical Nonparametric Statistics, 3rd ed., §3.4, the sign test as an exact binomial test).
    assert float(exact_paired_p(9, 1)) == pytest.approx(22 / 1024, abs=1e-15)
    # equal to scipy's binomtest on every small table
    for g in range(0, 15):
        for lo in range(0, 15):
            if g + lo:
                ref = sps.binomtest(g, g + lo, 0.5).pvalue
                assert float(exact_paired_p(g, lo)) == pytest.approx(ref, rel=1e-12)
    assert math.isnan(float(exact_paired_p(0, 0)))


def test_holm_matches_the_worked_example() -> None:
    # Holm (1979) procedure on four p-values (the example of the Wikipedia article "Holm-Bonferroni method"):
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, max(2*0.03, 0.04): H1 and H4 rejected at 0.05.
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [p <= 0.05 for p in adjusted] == [True, False, False, True]
    assert holm([]) == []
    assert holm([0.9, 0.8]) == [1.0, 1.0]
    with pytest.raises(ValueError):
        holm([1.5])


def test_cohen_kappa_matches_the_worked_example() -> None:
    # Cohen (1960); the worked example of the Wikipedia article "Cohen's kappa": 50 proposals, both yes 20,
    # A yes/B no 5, A no/B yes 10, both no 15: p_o = 0.70, p_e = 0.50, kappa = 0.40.
    a = ["y"] * 20 + ["y"] * 5 + ["n"] * 10 + ["n"] * 15
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert isinstance(cohen_kappa([], []), NotComputable)
    assert isinstance(cohen_kappa(["y", "y"], ["y", "y"]), NotComputable)


# ------------------------------------------------------------------------------------------------------- guards


def test_paired_binary_guards() -> None:
    empty = paired_binary([], [])
    assert empty.n_pairs == 0 and isinstance(empty.p, NotComputable) and empty.delta is None
    one = paired_binary([True], [False])
    assert one.delta == 1.0
    assert isinstance(one.p, NotComputable) and "n < 2" in one.p.reason
    all_pass = paired_binary([True] * 8, [True] * 8)
    assert isinstance(all_pass.p, NotComputable) and "no discordant" in all_pass.p.reason
    assert isinstance(all_pass.interval, Interval) and all_pass.interval.contains(0.0)
    all_fail = paired_binary([False] * 8, [False] * 8)
    assert isinstance(all_fail.p, NotComputable) and all_fail.delta == 0.0


def test_paired_binary_counts_discordant_blocks() -> None:
    cell = [True] * 9 + [False] * 1 + [True] * 5
    control = [False] * 9 + [True] * 1 + [True] * 5
    res = paired_binary(cell, control)
    assert (res.gained, res.lost, res.n_pairs) == (9, 1, 15)
    assert res.p == pytest.approx(22 / 1024)
    assert res.delta == pytest.approx(8 / 15)
    assert isinstance(res.interval, Interval) and res.interval.low > 0 and res.interval.contains(8 / 15)


def test_newcombe_interval_properties() -> None:
    ci = newcombe_paired(14, 5, 0, 22)
    assert isinstance(ci, Interval) and ci.contains(5 / 41) and ci.low > 0
    # swapping cell and control mirrors the interval
    mirror = newcombe_paired(14, 0, 5, 22)
    assert isinstance(mirror, Interval)
    assert (mirror.low, mirror.high) == pytest.approx((-ci.high, -ci.low))
    assert isinstance(newcombe_paired(0, 0, 0, 0), NotComputable)


def test_newcombe_interval_covers_at_nominal_rate() -> None:
    rng = np.random.default_rng(7)
    p_cell, p_control, n, sims = 0.6, 0.4, 30, 2000
    x = rng.random((sims, n)) < p_cell
    y = rng.random((sims, n)) < p_control
    covered = 0
    for xi, yi in zip(x, y, strict=True):
        ci = newcombe_paired(
            int(np.sum(xi & yi)), int(np.sum(xi & ~yi)), int(np.sum(~xi & yi)), int(np.sum(~xi & ~yi))
        )
        assert isinstance(ci, Interval)
        covered += ci.contains(p_cell - p_control)
    assert covered / sims >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / sims)


def test_paired_mean_guards() -> None:
    assert paired_mean([], [], []).n_pairs == 0
    one = paired_mean([3.0], [1.0], ["t"])
    assert one.delta == 2.0 and isinstance(one.p, NotComputable) and isinstance(one.interval, NotComputable)
    same = paired_mean([2.0, 3.0, 4.0], [2.0, 3.0, 4.0], ["t", "t", "t"])
    assert isinstance(same.p, NotComputable) and "no block differs" in same.p.reason
    # three blocks: below the interval's minimum (the exact test cannot reach p <= 0.05 with fewer than 6)
    assert isinstance(same.interval, NotComputable) and "at least 6" in same.interval.reason


def test_sign_flip_is_exact_for_small_samples() -> None:
    # 5 positive differences of distinct size: only the all-positive and all-negative sign patterns reach
    # |mean| >= observed: p = 2 / 2**5.
    assert sign_flip_p([2, 3, 4, 5, 6], [1, 1, 1, 1, 1]) == pytest.approx(2 / 32)


def test_t_interval_has_a_minimum_of_blocks_and_no_zero_width() -> None:
    assert min_interval_blocks(0.95) == 6 and min_interval_blocks(0.99) == 8
    assert isinstance(t_interval([1.0] * 5 + [2.0]), Interval)
    assert isinstance(t_interval([1.0, 2.0, 3.0, 4.0, 5.0]), NotComputable)
    flat = t_interval([1.0] * 8)
    assert isinstance(flat, NotComputable) and "same difference" in flat.reason
    d = [0.5, 1.5, 2.0, -1.0, 3.0, 0.0, 1.0]
    ci = t_interval(d)
    assert isinstance(ci, Interval)
    ref = sps.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert (ci.low, ci.high) == pytest.approx((ref.low, ref.high))


def test_sign_flip_is_exact_up_to_16_blocks_and_scales_its_resamples_above() -> None:
    rng = np.random.default_rng(5)
    for n in (3, 8, 12):
        d = rng.normal(0.3, 1.0, n)
        ref = sps.permutation_test(
            (d,), np.mean, permutation_type="samples", n_resamples=2**n, alternative="two-sided"
        ).pvalue
        assert sign_flip_p(list(d), [0.0] * n) == pytest.approx(ref, rel=1e-9)
    # 15 blocks all one way: 2 / 2**15, far below the 1e-4 floor 9,999 resamples would impose
    assert sign_flip_p([11.0 + 0.1 * i for i in range(15)], [0.0] * 15) == pytest.approx(2 / 2**15)
    # above 16 blocks, Monte Carlo: the smallest reachable p is below p_floor / 20
    assert resamples_for(1e-4) == 200_000 and resamples_for(None) == 9999
    p = sign_flip_p([5.0 + i for i in range(20)], [0.0] * 20, p_floor=1e-4)
    assert isinstance(p, float) and p < 1e-4 / 5


def test_spread_and_power_guards() -> None:
    assert isinstance(spread([1.0]), NotComputable)
    assert spread([1.0, 3.0]) == pytest.approx(math.sqrt(2))
    assert isinstance(runs_needed_binary(0.5, 0.5), NotComputable)
    assert isinstance(runs_needed_mean(1.0, 0.0), NotComputable)
    assert isinstance(detectable_binary(1, 0.5), NotComputable)
    assert isinstance(detectable_mean(10, 0.0), NotComputable)
    assert power_binary(0, 0.2, 0.9) == 0.0


def test_runs_needed_is_the_first_n_reaching_the_power() -> None:
    n = runs_needed_binary(0.3, 0.9)
    assert isinstance(n, int)
    assert power_binary(n, 0.3, 0.9) >= 0.8 > power_binary(n - 1, 0.3, 0.9)
    m = runs_needed_mean(1.0, 2.0)
    assert isinstance(m, int)
    assert power_mean(m, 1.0, 2.0) >= 0.8 > power_mean(m - 1, 1.0, 2.0)
    # a stricter alpha needs more blocks; the detectable effect at n is consistent with runs-needed
    stricter = runs_needed_binary(0.3, 0.9, alpha=0.05 / 8)
    assert isinstance(stricter, int) and stricter > n
    e = detectable_mean(m, 2.0)
    assert isinstance(e, float) and e <= 1.0 + 1e-6 and power_mean(m, e, 2.0) == pytest.approx(0.8, abs=1e-6)


# --------------------------------------------------------------------------------------------------- simulation

SIMS = 2000


def _max_rate(rate: float, sims: int) -> float:
    """Upper 3-sigma bound of an observed rate whose true value is ``rate``."""
    return rate + 3 * math.sqrt(rate * (1 - rate) / sims)


def test_null_binary_real_mark_fires_at_most_at_the_nominal_rate() -> None:
    """No layer matters: 4 layers x 24 blocks, outcome rate 0.5 everywhere; Holm over the 4 comparisons."""
    rng = np.random.default_rng(11)
    layers, blocks, alpha = 4, 24, 0.05
    control = rng.random((SIMS, 1, blocks)) < 0.5
    cells = rng.random((SIMS, layers, blocks)) < 0.5
    gained = np.sum(cells & ~control, axis=2)
    lost = np.sum(~cells & control, axis=2)
    p = exact_paired_p(gained, lost)
    p = np.where(np.isnan(p), 1.0, p)  # no discordant block: never real
    real = np.array([[q <= alpha for q in holm(list(row))] for row in p])
    family_rate = float(np.mean(real.any(axis=1)))
    per_test_rate = float(np.mean(p <= alpha))
    assert family_rate <= _max_rate(alpha, SIMS)
    assert per_test_rate <= _max_rate(alpha, SIMS * layers)


def test_null_counts_real_mark_fires_at_most_at_the_nominal_rate() -> None:
    """Sign-flip test on skewed counts (turns) with no effect: the rejection rate stays at most alpha."""
    rng = np.random.default_rng(12)
    alpha, blocks = 0.05, 10
    base = rng.poisson(6.0, size=(SIMS, blocks)).astype(float)
    cell = base + rng.poisson(2.0, size=(SIMS, blocks))
    control = base + rng.poisson(2.0, size=(SIMS, blocks))
    p = sign_flip_p_batch(cell - control)
    assert float(np.mean(p <= alpha)) <= _max_rate(alpha, SIMS)


def test_planted_binary_effect_is_found_at_the_predicted_power() -> None:
    """Pitfall-free 0.3 -> 0.9 (the demo's planted layer); alpha split over 4 comparisons (Holm's first step)."""
    rng = np.random.default_rng(13)
    alpha = 0.05 / 4
    n = runs_needed_binary(0.3, 0.9, alpha=alpha)
    assert isinstance(n, int)
    predicted = power_binary(n, 0.3, 0.9, alpha)
    cell = rng.random((SIMS, n)) < 0.9
    control = rng.random((SIMS, n)) < 0.3
    p = exact_paired_p(np.sum(cell & ~control, axis=1), np.sum(~cell & control, axis=1))
    found = float(np.mean(np.nan_to_num(p, nan=1.0) <= alpha))
    se = math.sqrt(predicted * (1 - predicted) / SIMS)
    assert abs(found - predicted) <= 3 * se
    assert found >= 0.8 - 3 * se


def test_planted_mean_effect_is_found_at_the_predicted_power() -> None:
    """Turns fall by 1 with per-block sd 2: the sign-flip test finds it at the t-test's predicted power."""
    rng = np.random.default_rng(14)
    alpha, effect, sd, sims = 0.05, -1.0, 2.0, 1000
    n = runs_needed_mean(effect, sd, alpha=alpha)
    assert isinstance(n, int)
    predicted = power_mean(n, effect, sd, alpha)
    diffs = rng.normal(effect, sd, size=(sims, n))
    found = 0
    for d in diffs:
        p = sign_flip_p(list(d), [0.0] * n, seed=1)
        found += isinstance(p, float) and p <= alpha
    se = math.sqrt(predicted * (1 - predicted) / sims)
    assert abs(found / sims - predicted) <= 3 * se

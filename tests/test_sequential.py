"""ablate.stats.sequential: exact identities, and simulations of the adaptive design with a look after every round.

The simulations play ``benchmarks.adaptive_sim`` (the design ``ablate run --adaptive`` drives) on vectorised
Bernoulli draws: under the null the family-wise rate of any "real" mark stays at most α however the run
stops; planted effects are found; the confidence sequences cover the truth at every time at once at their
nominal rate; a cell with an effect of interest is called a draw at most at the draw error β (and one with a
large effect almost never).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats as sps

from ablate.stats.multiplicity import holm, holm_adjust
from ablate.stats.sequential import (
    NO_EFFECT,
    REAL,
    UNDECIDED,
    anytime_p,
    betting_cs,
    decide,
    discordant_log_e,
    discordant_path,
    futility_log_e,
    prior_for,
)
from benchmarks.adaptive_sim import Scenario, draw, run_adaptive

ALPHA = 0.05
GRID = 61  # coarse candidates keep the simulations fast; the grid only ever widens a sequence


def _max_rate(rate: float, sims: int) -> float:
    """Upper 3-sigma bound of an observed rate whose true value is ``rate``."""
    return rate + 3 * math.sqrt(rate * (1 - rate) / sims)


# ------------------------------------------------------------------------------------------------ identities


def _mixture_integral(g: int, lost: int, a: float) -> float:
    """∫ θ^g (1−θ)^l / (1/2)^(g+l) dBeta(a, a), by quadrature (scipy.integrate.quad, scipy.stats.beta)."""

    def integrand(th: float) -> float:
        return float(th**g * (1 - th) ** lost * sps.beta.pdf(th, a, a) / 0.5 ** (g + lost))

    return float(integrate.quad(integrand, 0, 1)[0])


def test_mixture_e_value_is_the_integral_of_the_likelihood_ratio() -> None:
    for g, lost, a in [(0, 0, 1.0), (7, 2, 1.0), (3, 9, 1.5), (20, 20, 2.0)]:
        assert math.exp(float(discordant_log_e(g, lost, a))) == pytest.approx(
            _mixture_integral(g, lost, a), rel=1e-7
        )


def test_mixture_e_value_is_a_martingale_under_the_null() -> None:
    """E(g, l) = ½ E(g+1, l) + ½ E(g, l+1): a fair discordant coin keeps its expectation."""
    g, lo = np.meshgrid(np.arange(30), np.arange(30))
    e = np.exp(discordant_log_e(g, lo))
    nxt = 0.5 * np.exp(discordant_log_e(g + 1, lo)) + 0.5 * np.exp(discordant_log_e(g, lo + 1))
    np.testing.assert_allclose(nxt, e, rtol=1e-10)
    assert float(discordant_log_e(0, 0)) == 0.0


def test_anytime_p_never_rises_and_concordant_blocks_change_nothing() -> None:
    cell = np.array([1, 1, 0, 1, 1, 1, 0, 1], dtype=bool)
    control = np.array([0, 0, 0, 1, 0, 0, 1, 0], dtype=bool)
    path = discordant_path(cell, control)
    assert path[2] == path[1] and path[3] == path[2]  # blocks 2 and 3 are concordant
    p = anytime_p(path)
    assert np.all(np.diff(p) <= 0) and p[-1] < 1.0 and p[0] == 1.0


def test_holm_adjust_equals_the_reports_holm() -> None:
    rng = np.random.default_rng(0)
    rows = rng.random((50, 6)) ** 3
    expected = np.array([holm(list(r)) for r in rows])
    np.testing.assert_allclose(holm_adjust(rows), expected)


def test_decide_marks_real_draws_and_undecided() -> None:
    p = np.array([0.001, 0.2, 0.2, 0.2])
    bar = math.log(1 / 0.05)
    up = np.array([0.0, bar + 0.1, bar + 0.1, np.nan])
    down = np.array([0.0, bar, bar - 0.1, np.nan])
    codes = decide(p, up, down, alpha=ALPHA, beta=0.05)
    assert list(codes) == [REAL, NO_EFFECT, UNDECIDED, UNDECIDED]  # a draw needs both directions rejected
    # Holm: 0.03 alone is real; with three more comparisons 4 x 0.03 = 0.12 is not
    assert decide(np.array([0.03]), [0.0], [0.0], alpha=ALPHA)[0] == REAL
    assert decide(np.array([0.03, 1, 1, 1]), [0.0] * 4, [0.0] * 4, alpha=ALPHA)[0] == UNDECIDED


def test_futility_e_processes_grow_on_no_effect_and_never_fall() -> None:
    """Concordant blocks (Δ = 0) are evidence against both |Δ| ≥ d; a run of gains only against "≤ −d"."""
    up, down = futility_log_e(np.zeros(40), 0.2)
    assert np.all(np.diff(up) > 0) and np.allclose(up, down) and up[-1] > math.log(1 / 0.05)
    gains = np.ones(40)
    up, down = futility_log_e(gains, 0.2)
    assert up[-1] == 0.0 and down[-1] > math.log(1 / 0.05)  # running maxima start at log 1 = 0
    x = np.random.default_rng(1).choice([-1.0, 0.0, 1.0], size=(5, 60))
    for path in futility_log_e(x, 0.3):
        assert np.all(np.diff(path, axis=-1) >= 0) and np.all(path >= 0)
    with pytest.raises(ValueError, match="lie in"):
        futility_log_e(np.array([2.0]), 0.2)


def test_prior_is_tuned_to_the_min_effect() -> None:
    assert prior_for(0.2) == pytest.approx(2.625)
    assert prior_for(0.5) == 1.0 and prior_for(0.1) == pytest.approx(12.0)
    th = sps.beta(prior_for(0.2), prior_for(0.2))
    assert th.std() == pytest.approx(0.2)  # the spread of the discordant rate an effect of 0.2 makes at ½


def test_betting_cs_shrinks_around_the_mean_and_refuses_values_out_of_range() -> None:
    x = np.tile([0.0, 1.0, 1.0, 0.0, 1.0], 40)
    low, high = betting_cs(x, 0.0, 1.0, ALPHA)
    assert np.all(np.diff(low) >= 0) and np.all(np.diff(high) <= 0)  # running intersection
    assert low[-1] < 0.6 < high[-1] and high[-1] - low[-1] < 0.4
    with pytest.raises(ValueError, match="outside the declared range"):
        betting_cs(np.array([2.0]), 0.0, 1.0)


# ------------------------------------------------------------------------------------------------ simulation

NULLS = [
    # (base rates per task, cells, repeats, experiments): several base rates, numbers of cells and tasks
    ((0.5, 0.5, 0.5), 4, 16, 2000),
    ((0.2, 0.4, 0.6, 0.8, 0.5), 8, 10, 2000),
    ((0.9, 0.85, 0.95, 0.9, 0.8, 0.9), 2, 12, 2000),
]


@pytest.mark.parametrize(("base", "cells", "repeats", "sims"), NULLS)
def test_null_any_real_mark_stays_at_most_alpha_with_a_look_every_round(
    base: tuple[float, ...], cells: int, repeats: int, sims: int
) -> None:
    rng = np.random.default_rng(100 * cells + len(base))
    scenario = Scenario("null", base, (0.0,) * cells)
    out = run_adaptive(
        draw(scenario, sims, repeats, rng),
        len(base),
        alpha=ALPHA,
        min_effect=0.2,
        max_repeats=repeats,
    )
    family = float(np.mean(out.ever_real.any(axis=1)))
    assert family <= _max_rate(ALPHA, sims), f"family-wise rate {family:.4f} with {cells} cells"
    assert np.all(out.rounds <= repeats)


def test_planted_effects_are_found_and_nulls_stop() -> None:
    """Two strong layers (0.4 -> 0.9) among four null ones: both found, nulls never real beyond alpha."""
    rng = np.random.default_rng(7)
    scenario = Scenario("mixed", (0.4,) * 5, (0.5, 0.5, 0.0, 0.0, 0.0, 0.0))
    out = run_adaptive(draw(scenario, 1000, 30, rng), 5, alpha=ALPHA, min_effect=0.2, max_repeats=30)
    found = out.decision[:, :2] == REAL
    assert float(found.mean()) >= 0.99
    assert float(out.rounds[:, :2].mean()) < 0.4 * float(out.rounds[:, 2:].mean())  # strong cells stop early
    assert float(np.mean((out.decision[:, 2:] == REAL).any(axis=1))) <= _max_rate(ALPHA, 1000)


def test_betting_cs_covers_the_paired_difference_at_every_time_at_once() -> None:
    """Δ rate = 0.7 − 0.5: the sequence misses the truth at some time in at most α of the experiments."""
    rng = np.random.default_rng(21)
    sims, n = 2000, 150
    x = (rng.random((sims, n)) < 0.7).astype(float) - (rng.random((sims, n)) < 0.5)
    low, high = betting_cs(x, -1.0, 1.0, ALPHA, grid=GRID)
    ever_missed = np.any((low > 0.2) | (high < 0.2), axis=1)
    assert float(ever_missed.mean()) <= _max_rate(ALPHA, sims)
    assert float(np.nanmean(high[:, -1] - low[:, -1])) < 0.6  # and it does narrow


@pytest.mark.parametrize("beta", [0.05, 0.2])
def test_an_effect_of_interest_is_called_a_draw_at_most_at_the_draw_error(beta: float) -> None:
    """A cell whose true effect is exactly min-effect, at several base rates: a draw at most β of the time."""
    rng = np.random.default_rng(23)
    scenario = Scenario("at-min-effect", (0.2, 0.4, 0.5, 0.7), (0.2,))
    out = run_adaptive(
        draw(scenario, 2000, 40, rng), 4, alpha=ALPHA, min_effect=0.2, max_repeats=40, draw_beta=beta
    )
    assert float(np.mean(out.decision == NO_EFFECT)) <= _max_rate(beta, 2000)


def test_futility_e_process_at_the_boundary_reaches_one_over_beta_at_most_beta_of_the_time() -> None:
    """Over 400 blocks with Δ = −0.25 exactly (either side's boundary, mixed discordance): Ville's bound."""
    rng = np.random.default_rng(24)
    sims, n = 4000, 400
    gain = np.where(np.arange(n) % 2 == 0, 0.05, 0.30)  # per block: P(+1), P(−1) = P(+1) + 0.25
    u = rng.random((sims, n))
    x = np.where(u < gain, 1.0, np.where(u < 2 * gain + 0.25, -1.0, 0.0))
    up, down = futility_log_e(x, 0.25)
    assert float(np.mean(down[:, -1] >= math.log(1 / 0.1))) <= _max_rate(0.1, sims)
    assert float(np.mean(up[:, -1] >= math.log(1 / 0.1))) > 0.9  # Δ = −0.25 is far from +0.25


def test_a_large_effect_is_almost_never_called_a_draw() -> None:
    """Effects of ±0.35 with min-effect 0.2: the futility bets lose steadily, so draws are far rarer than β."""
    rng = np.random.default_rng(25)
    scenario = Scenario("strong", (0.4, 0.5, 0.6, 0.5, 0.5), (0.35, -0.35))
    out = run_adaptive(draw(scenario, 2000, 33, rng), 5, alpha=ALPHA, min_effect=0.2, max_repeats=33)
    assert float(np.mean(out.decision == NO_EFFECT)) <= 0.005


def test_futility_error_holds_when_the_effect_of_interest_varies_across_tasks() -> None:
    """Effects 0.05 and 0.45 on alternate tasks (mean 0.25 = d): 'at least d' is rejected at most β of the time."""
    rng = np.random.default_rng(26)
    sims, n = 4000, 400
    eff = np.tile([0.05, 0.45, 0.05, 0.45], n // 4)
    base = np.tile([0.3, 0.3, 0.5, 0.4], n // 4)
    x = (rng.random((sims, n)) < base + eff).astype(float) - (rng.random((sims, n)) < base)
    up, _ = futility_log_e(x, 0.25)
    for beta in (0.05, 0.2):
        assert float(np.mean(up[:, -1] >= math.log(1 / beta))) <= _max_rate(beta, sims)

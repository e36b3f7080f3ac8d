"""Per-piece inference: recovers planted effects, keeps the family-wise error at α (simulated), verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.stats.screening import DesignError, make_design, screening_design
from ablate.stats.screening_inference import NO_SPREAD, Outcome, analyse, block_ols, t_test, verdict
from benchmarks.screening_sim import Planted, detected, family_wise_error, planted_pair, simulate

IDS = [f"p{i}" for i in range(8)]


def outcomes_of(design_name: str, values: np.ndarray, tasks: int, repeats: int) -> list[Outcome]:
    """Outcomes in block order (task, repeat), every row once per block; ``values`` is blocks × rows."""
    rows = values.shape[1]
    return [
        Outcome(r, f"t{t}", rep, float(values[t * repeats + rep, r]))
        for t in range(tasks)
        for rep in range(repeats)
        for r in range(rows)
    ]


def test_a_planted_numeric_effect_is_recovered_and_equals_mean_on_minus_mean_off() -> None:
    d = screening_design(IDS)
    rng = np.random.default_rng(5)
    beta = np.array([3.0, -2.0, 0, 0, 0, 0, 0, 0])
    task_shift = np.repeat([10.0, 20.0, 40.0], 2)[:, None]  # 3 tasks × 2 repeats = 6 blocks
    values = task_shift + d.matrix() @ beta + rng.normal(0, 0.5, (6, 24))
    got = analyse(d, outcomes_of("screening", values, 3, 2), binary=False, higher_is_better=False)
    on = d.matrix()[:, 0] == 1
    assert got.pieces[0].effect == pytest.approx(values[:, on].mean() - values[:, ~on].mean())
    assert [round(p.effect or 0) for p in got.pieces] == [3, -2, 0, 0, 0, 0, 0, 0]
    # Lower is better (turns, cost): a piece that adds 3 turns hurts, one that saves 2 helps.
    assert [p.verdict for p in got.pieces[:2]] == ["hurts", "helps"]
    assert (got.sessions, got.blocks, got.df) == (144, 6, 144 - 6 - 8)
    first = got.pieces[0]
    assert first.ci_low is not None and first.ci_high is not None and first.effect is not None
    assert first.ci_low < first.effect < first.ci_high  # coverage at 95% is checked by simulation below
    assert first.ci_high - first.ci_low == pytest.approx(2 * 1.978 * 0.5 * (2 / 72) ** 0.5, rel=0.2)


def test_one_out_effects_are_the_control_minus_each_cell_and_missing_sessions_are_tolerated() -> None:
    d = make_design("one-out", IDS)
    rng = np.random.default_rng(6)
    beta = np.array([0, 0, 1.5, 0, 0, 0, 0, 0])
    values = d.matrix() @ beta + rng.normal(0, 0.3, (10, 9))
    outs = outcomes_of("one-out", values, 2, 5)
    del outs[3], outs[20]  # two failed sessions
    got = analyse(d, outs, binary=False)
    assert got.sessions == 88
    assert got.pieces[2].verdict == "helps" and got.pieces[2].effect == pytest.approx(1.5, abs=0.4)
    assert all(p.verdict in ("draw", "undecided") for i, p in enumerate(got.pieces) if i != 2)


def test_a_binary_run_of_about_200_sessions_finds_the_planted_pair_and_flags_no_null_piece() -> None:
    """The issue's end-to-end target (8 pieces, 200 sessions) under the session model."""
    d = screening_design(IDS)
    planted = planted_pair(8, 0.35, (0.6, 0.5))
    result = simulate(d, planted, repeats=4, runs=300, rng=np.random.default_rng(7))
    assert result.sessions == 192
    assert detected(result, planted, 0.05).min() >= 0.8
    assert family_wise_error(result, planted, 0.05) <= 0.05 + 0.03


@pytest.mark.parametrize(
    ("design_name", "k", "rates", "repeats"),
    [
        ("screening", 8, (0.5, 0.7, 0.3), 1),  # df 72 − 3 − 8
        ("screening", 16, (0.85,), 1),  # one block: 40 sessions, df 23, a rate near the edge
        ("one-out", 8, (0.5, 0.6), 3),
    ],
)
def test_under_the_null_holm_keeps_the_family_wise_error_at_alpha(
    design_name: str, k: int, rates: tuple[float, ...], repeats: int
) -> None:
    d = make_design(design_name, [f"p{i}" for i in range(k)])
    null = Planted(rates, (0.0,) * k)
    runs = 600
    fwer = family_wise_error(simulate(d, null, repeats, runs, np.random.default_rng(k)), null, 0.05)
    # 3 Monte Carlo standard errors above α: a test that rejects at 0.08 or more fails it.
    assert fwer <= 0.05 + 3 * (0.05 * 0.95 / runs) ** 0.5


def test_a_null_piece_beside_strong_real_ones_is_not_flagged_more_than_alpha() -> None:
    """A partial null: every other piece has a large effect; the null piece's own rejection rate stays ≤ α."""
    d = screening_design(IDS)
    effects = (0.0, 0.12, -0.12, 0.1, -0.1, 0.08, -0.08, 0.1)
    planted = Planted((0.55, 0.5), effects)
    result = simulate(d, planted, repeats=2, runs=800, rng=np.random.default_rng(11))
    raw_rate = float(np.mean(result.p_adjusted[:, 0] <= 0.05))
    assert raw_rate <= 0.05 + 3 * (0.05 * 0.95 / 800) ** 0.5


def test_the_t_test_rejects_at_alpha_on_gaussian_data() -> None:
    """A direct check of the test's size without Holm: one piece, 4000 runs."""
    d = screening_design(["a", "b"])
    x = np.tile(d.matrix(), (5, 1))
    blocks = np.repeat(np.arange(5), 8)
    y = np.random.default_rng(3).normal(size=(4000, 40)) + blocks
    p, low, high = t_test(block_ols(x, blocks, y), 0.95)
    assert abs(float(np.mean(p[:, 0] <= 0.05)) - 0.05) < 0.012
    assert abs(float(np.mean((low[:, 0] <= 0) & (high[:, 0] >= 0))) - 0.95) < 0.012


def test_binary_outcomes_use_the_null_variance_because_the_wald_test_is_liberal_in_holms_tail() -> None:
    """0/1 outcomes at a rate of ½, screening 8 pieces, one repeat of 4 tasks: 128,000 null tests at 0.005."""
    d = screening_design(IDS)
    x = np.tile(d.matrix(), (4, 1))
    blocks = np.repeat(np.arange(4), 24)
    y = (np.random.default_rng(13).random((16000, 96)) < 0.5).astype(np.float64)
    fit = block_ols(x, blocks, y)
    wald = float(np.mean(t_test(fit, 0.95)[0] <= 0.005))
    null = float(np.mean(t_test(fit, 0.95, null_variance=True)[0] <= 0.005))
    slack = 3 * (0.005 / 128000) ** 0.5
    assert null <= 0.005 + slack < wald + slack
    assert null < wald


def test_verdicts_helps_hurts_draw_undecided() -> None:
    kw = {"alpha": 0.05, "min_effect": 0.2}
    assert verdict(0.3, 0.1, 0.5, 0.01, higher=True, **kw) == "helps"
    assert verdict(0.3, 0.1, 0.5, 0.01, higher=False, **kw) == "hurts"
    assert verdict(-0.3, -0.5, -0.1, 0.01, higher=True, **kw) == "hurts"
    assert verdict(0.02, -0.1, 0.15, 0.6, higher=True, **kw) == "draw"
    assert verdict(0.02, -0.1, 0.25, 0.6, higher=True, **kw) == "undecided"
    assert verdict(0.15, 0.01, 0.19, 0.07, higher=True, **kw) == "draw"  # small, real-ish, inside the margin


def test_no_spread_no_data_and_bad_values_are_reported_not_guessed() -> None:
    d = screening_design(["a", "b", "c"])
    same = [Outcome(r, "t", rep, 1.0) for rep in range(3) for r in range(8)]
    got = analyse(d, same, binary=True)
    assert all(
        p.verdict == "undecided" and p.reason == NO_SPREAD and p.p_adjusted is None for p in got.pieces
    )
    with pytest.raises(DesignError, match="cannot estimate 3 pieces"):
        analyse(d, same[:4], binary=True)  # one block of 4 sessions: 4 − 1 block − 3 pieces leaves no df
    with pytest.raises(DesignError, match="rows 0–7"):
        analyse(d, [Outcome(8, "t", 0, 1.0)], binary=True)
    with pytest.raises(DesignError, match="value nan"):
        analyse(d, [Outcome(0, "t", 0, float("nan"))], binary=False)
    with pytest.raises(DesignError, match=r"value 0\.5 \(a binary outcome is 0 or 1\)"):
        analyse(d, [Outcome(0, "t", 0, 0.5)], binary=True)
    onlyon = [Outcome(0, "t", rep, float(rep % 2)) for rep in range(8)] + [
        Outcome(1, "t", rep, 0.0) for rep in range(8)
    ]
    with pytest.raises(DesignError, match="confounded"):
        analyse(d, onlyon, binary=True)

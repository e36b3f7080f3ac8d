"""Adaptive per-piece decisions: block contrasts, the normal-mixture e-process, error rates under looks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ablate.stats.screening import make_design, screening_design
from ablate.stats.screening_inference import Outcome
from ablate.stats.screening_sequential import (
    contrast_matrix,
    look,
    mixture_log_e,
    variance_proxy,
)
from benchmarks.screening_sim import Planted, ever_real, planted_pair, rounds_to_decide, simulate_adaptive

RATES = (0.55, 0.65, 0.45, 0.6)


def test_a_blocks_contrast_is_mean_on_minus_mean_off_or_control_minus_cell() -> None:
    d = screening_design([f"p{i}" for i in range(8)])
    y = np.random.default_rng(1).random(24)
    on = d.matrix()[:, 3] == 1
    assert (y @ contrast_matrix(d))[3] == pytest.approx(y[on].mean() - y[~on].mean())
    assert variance_proxy(d) == pytest.approx(np.full(8, 1 / 24))  # 1/(2N), N = 12
    one = make_design("one-out", ["a", "b", "c"])
    z = np.array([0.9, 0.2, 0.5, 0.4])
    assert z @ contrast_matrix(one) == pytest.approx([0.7, 0.4, 0.5])
    assert variance_proxy(one) == pytest.approx([0.5, 0.5, 0.5])


def test_the_mixture_e_process_matches_its_closed_form() -> None:
    x = np.array([0.1, -0.05, 0.3])
    s2, d = 0.04, 0.2
    rho2 = (d / s2) ** 2
    s, v = x.sum(), 3 * s2
    want = -0.5 * math.log(1 + rho2 * v) + rho2 * s * s / (2 * (1 + rho2 * v))
    assert mixture_log_e(x, s2, d)[-1] == pytest.approx(want)


@pytest.mark.parametrize(
    ("name", "k", "rounds"), [("screening", 8, 15), ("screening", 16, 8), ("one-out", 8, 20)]
)
def test_looking_after_every_round_keeps_the_family_wise_error_at_alpha(
    name: str, k: int, rounds: int
) -> None:
    d = make_design(name, [f"p{i}" for i in range(k)])
    null = Planted(RATES, (0.0,) * k)
    sim = simulate_adaptive(d, null, rounds, 800, np.random.default_rng(k), alpha=0.05, min_effect=0.2)
    assert ever_real(sim, range(k)) <= 0.05 + 3 * (0.05 * 0.95 / 800) ** 0.5


def test_an_adaptive_screening_run_finds_the_planted_pair_early_and_leaves_null_pieces_alone() -> None:
    d = screening_design([f"p{i}" for i in range(16)])
    planted = planted_pair(16, 0.25, RATES)
    sim = simulate_adaptive(d, planted, 10, 400, np.random.default_rng(2), alpha=0.05, min_effect=0.2)
    real_at_5 = sim.decisions[:, [0, 8], 4] == 1
    assert real_at_5.all(axis=1).mean() >= 0.8  # both found within 5 rounds (800 sessions) in ≥ 80% of runs
    assert ever_real(sim, [j for j in range(16) if j not in (0, 8)]) <= 0.05 + 3 * (0.05 * 0.95 / 400) ** 0.5
    assert float(np.median(rounds_to_decide(sim))) <= 10


def test_a_look_uses_complete_blocks_names_the_incomplete_ones_and_decides() -> None:
    d = screening_design(["keep", "noise", "drop"])  # N = 4: 8 rows
    m = d.matrix()
    outs: list[Outcome] = []
    order: list[tuple[str, int]] = []
    for rep in range(30):
        for t in ("a", "b"):
            order.append((t, rep))
            outs += [Outcome(r, t, rep, float(m[r, 0] == 1)) for r in range(8)]  # passes iff "keep" is kept
    del outs[5]  # one failed session: block ("a", 0) is incomplete
    got = look(d, outs, order, alpha=0.05, min_effect=0.2)
    assert got.blocks_used == 59 and got.blocks_incomplete == [("a", 0)]
    assert got.decisions[0] == "real"
    assert got.decisions[1:] == ["no-effect", "no-effect"]
    assert got.p_anytime[0] < 1e-6
    assert got.effects[0] == pytest.approx(1.0) and got.effects[1] == pytest.approx(0.0)
    assert got.verdicts() == ["helps", "draw", "draw"]
    assert got.verdicts(higher_is_better=False) == ["hurts", "draw", "draw"]
    empty = look(d, [], [("a", 0)], alpha=0.05, min_effect=0.2)
    assert (
        empty.decisions == ["undecided"] * 3
        and empty.blocks_incomplete == [("a", 0)]
        and empty.blocks == [0] * 3
    )
    assert empty.effects == [None] * 3 and empty.verdicts() == ["undecided"] * 3
    with pytest.raises(ValueError, match=r"1\.5 not in \[0, 1\]"):
        look(d, [Outcome(0, "a", 0, 1.5)], [("a", 0)], alpha=0.05, min_effect=0.2)

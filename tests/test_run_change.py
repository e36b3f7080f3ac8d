"""`ablate diff`'s test of a changed effect (issue 37, item 5): at or below α at small n and extreme rates,
stratified by task, where the permutation of blocks between the runs it replaced rejected far beyond α."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from ablate.stats.run_change import run_change

ALPHA = 0.05


def _run(
    rng: np.random.Generator, rates: tuple[float, ...], delta: float, blocks: int
) -> dict[str, list[float]]:
    """Per task, the per-block differences cell − control: the control passes at the task's rate, the cell at
    that rate + ``delta``."""
    return {
        f"t{i}": list((rng.random(blocks) < r + delta).astype(float) - (rng.random(blocks) < r).astype(float))
        for i, r in enumerate(rates)
    }


def _pooled_permutation_p(a: dict[str, list[float]], b: dict[str, list[float]]) -> float:
    """The test ablate diff used before: a permutation of the pooled blocks between the runs."""
    da, db = np.concatenate(list(a.values())), np.concatenate(list(b.values()))
    if np.ptp(np.concatenate([da, db])) == 0:
        return 1.0
    res = sps.permutation_test(
        (db, da), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        permutation_type="independent", n_resamples=499, vectorized=True, random_state=1,
    )  # fmt: skip
    return float(res.pvalue)


@pytest.mark.parametrize(
    ("rates_a", "blocks_a", "rates_b", "blocks_b", "delta"),
    [
        ((0.5, 0.5), 5, (0.98, 0.98), 40, 0.0),  # the issue's: only the control's rate moved
        ((0.5, 0.5), 5, (0.98, 0.98), 40, -0.2),
        ((0.5, 0.5), 5, (0.5, 0.5), 5, -0.2),  # small n on both sides
        ((0.9, 0.3), 5, (0.9, 0.3), 40, -0.2),  # tasks unlike each other
        ((0.98, 0.98), 34, (0.5, 0.5), 34, -0.4),
    ],
)
def test_an_unchanged_effect_is_called_changed_at_most_alpha_of_the_time(
    rates_a: tuple[float, ...], blocks_a: int, rates_b: tuple[float, ...], blocks_b: int, delta: float
) -> None:
    rng = np.random.default_rng(20261204)
    runs = 2000
    hits = 0
    for _ in range(runs):
        p = run_change(_run(rng, rates_a, delta, blocks_a), _run(rng, rates_b, delta, blocks_b)).p
        hits += p is not None and p <= ALPHA
    assert hits / runs <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / runs), hits / runs


def test_the_permutation_it_replaced_is_far_beyond_alpha_where_it_holds() -> None:
    rng = np.random.default_rng(7)
    runs, old, new = 300, 0, 0
    for _ in range(runs):
        a, b = _run(rng, (0.5, 0.5), 0.0, 5), _run(rng, (0.98, 0.98), 0.0, 40)
        old += _pooled_permutation_p(a, b) <= ALPHA
        new += (run_change(a, b).p or 1.0) <= ALPHA
    assert old / runs > 0.15 and new / runs <= 0.09, (old, new)


def test_a_twenty_point_loss_of_help_is_found_within_tasks() -> None:
    """2 tasks × 34 blocks each run: the layer helped by 40 points, now by 20."""
    rng = np.random.default_rng(3)
    runs = 600
    found = sum(
        (run_change(_run(rng, (0.6, 0.9), -0.4, 34), _run(rng, (0.6, 0.9), -0.2, 34)).p or 1.0) <= ALPHA
        for _ in range(runs)
    )
    assert found / runs >= 0.4, found / runs


def test_what_cannot_be_tested_says_so() -> None:
    same = {"t": [0.0, 0.0, 0.0]}
    got = run_change(same, same)
    assert got.change == 0.0 and got.p is None and got.ci_low is not None
    assert run_change({"t": [1.0]}, {"u": [1.0]}).change is None  # no task in both runs
    with pytest.raises(ValueError, match="−1, 0 or 1"):
        run_change({"t": [0.5, 1.0]}, {"t": [1.0, 0.0]})
    got = run_change({"a": [-1.0] * 12, "b": [-1.0] * 12}, {"a": [0.0] * 12, "b": [0.0] * 12})
    assert (
        got.change == 1.0
        and got.p is not None
        and got.p < 0.001
        and got.ci_low is not None
        and got.ci_low > 0
    )

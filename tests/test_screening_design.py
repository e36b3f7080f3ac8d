"""Designs for per-piece attribution: PB constructions, the fold-over's properties, one-out, budgets."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pytest

from ablate.stats.screening import (
    DesignError,
    budget_refusal,
    default_design,
    make_design,
    min_sessions,
    one_out_design,
    repeats_within,
    rows_for,
    screening_design,
)
from ablate.stats.screening_hadamard import cyclic_generator, hadamard, pb_columns, pb_size

#: Plackett & Burman (1946), Biometrika 33:305–325, the published first rows of the cyclic designs.
PB_PUBLISHED = {
    12: "++-+++---+-",
    20: "++--++++-+-+----++-",
    24: "+++++-+-++--++--+-+----",
}


def ids(k: int) -> list[str]:
    return [f"piece-{i}" for i in range(k)]


def pm(design_rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """0/1 on/off as ±1."""
    return 2.0 * design_rows - 1.0


@pytest.mark.parametrize("n", sorted(PB_PUBLISHED))
def test_the_cyclic_generators_are_plackett_and_burmans_published_rows(n: int) -> None:
    assert "".join("+" if v > 0 else "-" for v in cyclic_generator(n - 1)) == PB_PUBLISHED[n]


def test_every_constructed_matrix_is_hadamard_and_the_gaps_fall_back_to_the_next_size() -> None:
    built = {}
    for n in range(4, 101, 4):
        h = hadamard(n)
        if h is not None:
            assert (h.T @ h == n * np.eye(n)).all(), n
            built[n] = h
    assert sorted(set(range(4, 101, 4)) - set(built)) == [52, 92, 100]
    assert [pb_size(k) for k in (2, 3, 4, 7, 8, 11, 12, 16, 24, 27, 32, 47, 48)] == [
        4, 4, 8, 8, 12, 12, 16, 20, 28, 28, 36, 48, 56,
    ]  # fmt: skip


@pytest.mark.parametrize("k", [2, 5, 8, 11, 16, 24, 32])
def test_screening_columns_are_balanced_and_orthogonal_and_main_effects_clear_of_two_piece_interactions(
    k: int,
) -> None:
    d = screening_design(ids(k))
    x = pm(d.matrix())
    n = x.shape[0]
    assert n == 2 * pb_size(k) == rows_for("screening", k)
    assert (x.sum(axis=0) == 0).all()
    assert (x.T @ x == n * np.eye(k)).all()
    # Alias matrix of the main-effects model on every two-piece interaction: (X'X)^-1 X'Z = 0.
    model = np.hstack([np.ones((n, 1)), x])
    z = np.column_stack([x[:, i] * x[:, j] for i, j in itertools.combinations(range(k), 2)])
    alias = np.linalg.solve(model.T @ model, model.T @ z)
    assert np.abs(alias[1:]).max() == 0.0


def test_without_the_fold_over_main_effects_are_aliased_with_interactions() -> None:
    """The check above can fail: the PB design alone (12 runs, 8 factors) has partial aliases."""
    x = pb_columns(8).astype(np.float64)
    model = np.hstack([np.ones((12, 1)), x])
    z = np.column_stack([x[:, i] * x[:, j] for i, j in itertools.combinations(range(8), 2)])
    assert np.abs(np.linalg.solve(model.T @ model, model.T @ z)[1:]).max() > 0.3


def test_the_screening_design_holds_the_control_and_its_mirror() -> None:
    d = screening_design(ids(16))
    assert d.control_row == 0
    assert d.removed(0) == ()
    assert d.removed(20) == tuple(ids(16))
    assert all(d.rows[i + 20] == tuple(not v for v in d.rows[i]) for i in range(20))
    assert d.construction == "folded-over Plackett–Burman N=20: 40 rows for 16 pieces"


def test_one_out_is_the_control_and_one_cell_per_piece() -> None:
    d = one_out_design(["a", "b", "c"])
    assert d.control_row == 0
    assert [d.removed(i) for i in range(4)] == [(), ("a",), ("b",), ("c",)]
    assert make_design("one-out", ["a", "b", "c"]) == d


def test_sessions_are_rows_times_tasks_and_a_design_beyond_the_budget_is_refused_naming_the_minimum() -> None:
    assert min_sessions("screening", 16, 3) == 120
    assert min_sessions("one-out", 16, 3) == 51
    assert repeats_within("screening", 16, 3, 500) == 4
    assert budget_refusal("screening", 16, 3, 120) is None
    assert budget_refusal("screening", 16, 3, None) is None
    refusal = budget_refusal("screening", 16, 3, 100)
    assert refusal is not None and refusal.minimum == 120 and refusal.rows == 40
    assert "--max-sessions 100" in refusal.message and "at least 120" in refusal.message
    assert repeats_within("one-out", 8, 5, 44) == 0


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: screening_design(["only"]), "at least two pieces"),
        (lambda: one_out_design(["a", "b", "a"]), "'a' given twice"),
        (lambda: make_design("factorial", ["a", "b"]), "unknown design 'factorial'"),
        (lambda: min_sessions("screening", 4, 0), "at least one task"),
        (lambda: min_sessions("one-out", 1, 2), "at least two pieces"),
    ],
)
def test_bad_designs_are_refused_with_the_reason(call: object, needle: str) -> None:
    with pytest.raises(DesignError, match=needle):
        call()  # type: ignore[operator]


def test_default_design() -> None:
    assert [default_design(k) for k in (2, 3, 4, 40)] == ["one-out", "one-out", "screening", "screening"]

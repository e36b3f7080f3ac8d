"""The test of a piece in a drawn screening design: a conditional randomization test, exact whatever the
other pieces' interactions (docs/ARCHITECTURE.md#piece-designs; why a run draws its design: #drawn-designs).

T = Σ_rows x_j R, R the block-demeaned outcomes residualized on the *other* pieces' columns; under piece j's
sharp null re-drawing its column by the law it was drawn with gives T's null distribution exactly (Candès E,
Fan Y, Janson L, Lv J, "Panning for gold: model-X knockoffs", JRSS B 80:551–577, 2018). p is the Monte Carlo
p of |T − E T|, stopping after :data:`HITS` exceedances (Besag J, Clifford P, "Sequential Monte Carlo
p-values", Biometrika 78:301–304, 1991). A draw that cannot separate every piece is drawn again (probability
far below 10⁻⁶ for 2N rows, N > k: ignored); the effect and interval stay the least-squares ones."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ablate.stats.screening import Design, DesignError

FloatArray = npt.NDArray[np.float64]
#: A piece's draws stop once this many reach the observed statistic (Besag–Clifford): p ≥ HITS / draws.
HITS = 50
#: Draws per batch (all pieces at once).
BATCH = 2000
#: Fewest draws a test may make (its smallest p is 1 / (draws + 1)).
MIN_DRAWS = 1999


def draws_needed(k: int, alpha: float, tests: int = 1) -> int:
    """Draws that let the smallest p reach a twentieth of Holm's first threshold α / (k · tests)."""
    return max(MIN_DRAWS, math.ceil(20 * k * tests / alpha))


def block_demean(values: FloatArray, blocks: npt.NDArray[np.int64], n_blocks: int) -> FloatArray:
    """``values`` (…, n) minus the mean of its block along the last axis (sums by ``np.bincount``: linear in
    the sessions, where a one-hot product grew with sessions × blocks)."""
    rows = values.reshape(-1, values.shape[-1])
    sums = np.stack([np.bincount(blocks, weights=row, minlength=n_blocks) for row in rows])
    means = (sums / np.bincount(blocks, minlength=n_blocks)).reshape(*values.shape[:-1], n_blocks)
    return np.asarray(values - means[..., blocks], dtype=np.float64)


def row_residuals(
    design: Design, rows: npt.NDArray[np.int64], blocks: npt.NDArray[np.int64], values: FloatArray
) -> FloatArray:
    """Pieces × rows: per piece, the outcomes' residuals (block-demeaned, least squares on the other pieces'
    demeaned columns) summed per design row. ``rows``, ``blocks`` (codes 0…) and ``values``: per session."""
    nb = int(blocks.max()) + 1
    y = block_demean(values, blocks, nb)
    x = block_demean(design.matrix()[rows].T, blocks, nb).T
    # each fit from the normal equations (k − 1 unknowns), not the sessions: its least-squares solution is the
    # same (pinv(X) y = pinv(XᵀX) Xᵀy), at a fraction of the cost of a decomposition per piece
    gram, xty = x.T @ x, x.T @ y
    out = np.empty((design.k, len(design.rows)))
    for j in range(design.k):
        keep = np.delete(np.arange(design.k), j)
        coef, *_ = np.linalg.lstsq(gram[np.ix_(keep, keep)], xty[keep], rcond=None)
        out[j] = np.bincount(rows, weights=y - x[:, keep] @ coef, minlength=len(design.rows))
    return out


def crt_p(
    design: Design,
    rows: npt.NDArray[np.int64],
    blocks: npt.NDArray[np.int64],
    values: FloatArray,
    *,
    draws: int,
    seed: int | Sequence[int],
) -> FloatArray:
    """Per piece, the two-sided conditional randomization p of "the piece changes no session" (NaN: residuals
    all 0) from the sessions' ``rows``, ``blocks`` (codes 0…) and ``values``, at most ``draws`` re-draws."""
    if design.drawn is None:
        raise DesignError("the conditional randomization test needs a drawn design (draw_columns)")
    if rows.size == 0:
        raise DesignError("no scored session: nothing to test")
    resid = row_residuals(design, rows, blocks, values)
    x = design.matrix().T  # pieces × rows
    groups = np.array(
        design.groups or [0 if i != design.control_row else -1 for i in range(len(design.rows))]
    )
    strata = [np.flatnonzero(groups == g) for g in sorted(set(groups.tolist()) - {-1})]
    centre = sum((x[:, f].mean(axis=1) * resid[:, f].sum(axis=1) for f in strata), np.zeros(design.k))
    free = np.concatenate(strata)
    observed = np.abs(np.einsum("kr,kr->k", x[:, free], resid[:, free]) - centre) * (1 - 1e-12)
    testable = np.abs(resid[:, free]).max(axis=1) > 1e-12
    hits = np.zeros(design.k, dtype=np.int64)
    made = np.zeros(design.k, dtype=np.int64)
    open_ = testable.copy()
    rng = np.random.default_rng(seed)
    while open_.any():
        n = min(BATCH, draws - int(made[open_].min()))
        if n <= 0:
            break
        # each draw's rows re-drawn on their own, as the design drew them: draws × rows, per stratum
        perms = [f[rng.permuted(np.tile(np.arange(f.size), (n, 1)), axis=1)] for f in strata]
        for j in np.flatnonzero(open_):
            t = sum((x[j][p_] @ resid[j][f] for p_, f in zip(perms, strata, strict=True)), np.zeros(n))
            reached = np.cumsum(np.abs(t - centre[j]) >= observed[j]) + hits[j]
            if reached[-1] >= HITS:  # stop at the HITS-th exceedance, as Besag and Clifford do
                hits[j], made[j] = HITS, made[j] + int(np.argmax(reached >= HITS)) + 1
            else:
                hits[j], made[j] = int(reached[-1]), made[j] + n
            if hits[j] >= HITS or made[j] >= draws:
                open_[j] = False
    p = np.where(hits >= HITS, hits / np.maximum(made, 1), (hits + 1) / (made + 1))
    return np.asarray(np.where(testable, np.minimum(p, 1.0), np.nan), dtype=np.float64)

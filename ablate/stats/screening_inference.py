"""Per-piece effects of a screening or one-out run: OLS with block fixed effects, Holm, an interval, a verdict.

The model, for session i in block b = (task, repeat) with design row r(i):
``y_i = α_b + Σ_j β_j x_{r(i) j} + ε_i``, x = 1 when the row keeps piece j. In the folded-over PB design β̂_j
is exactly mean(on) − mean(off) (Frisch–Waugh: the regression of within-block-demeaned outcomes on
within-block-demeaned rows); in one-out, the control's mean minus piece j's cell mean. Why a model-based test
and not a randomization test over rows, and why a drawn design takes its p from
:mod:`ablate.stats.screening_crt`: docs/ARCHITECTURE.md#piece-designs. Error rates:
``tests/test_screening_inference.py`` (null and partial nulls), ``benchmarks/bench_screening.py`` (family-wise
error and power at 8, 16 and 32 pieces); ``draw`` is an equivalence test, each side at α/2."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from ablate.core.constants import DEFAULT_MIN_EFFECT
from ablate.stats.multiplicity import holm
from ablate.stats.screening import Design, DesignError
from ablate.stats.screening_crt import block_demean, crt_p, draws_needed

FloatArray = npt.NDArray[np.float64]
PieceVerdict = Literal["helps", "hurts", "draw", "undecided"]
METHOD = "ols-block-fixed-effects-t"
METHOD_BINARY = "ols-block-fixed-effects-t-null-variance"
METHOD_DRAWN = "drawn-columns-conditional-randomization-test"
#: Why a piece has no p or interval when the model fits every session exactly (all outcomes equal, say).
NO_SPREAD = "the model fits every session exactly (no residual spread): nothing to test the effect against"


@dataclass(frozen=True)
class Outcome:
    """One scored session: the design row its cell is, its block and its value (1.0/0.0 for pass/fail)."""

    row: int
    task: str
    repeat: int
    value: float


@dataclass(frozen=True)
class PieceEffect:
    """One piece's row of the report: ``effect`` is on − off; None where not computable (``reason`` says why)."""

    id: str
    effect: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None
    p_adjusted: float | None
    verdict: PieceVerdict
    reason: str | None = None


@dataclass(frozen=True)
class PieceAnalysis:
    """Every piece's effect, and what the analysis rested on."""

    pieces: list[PieceEffect]
    sessions: int
    blocks: int
    df: int
    alpha: float
    min_effect: float
    method: str = METHOD


@dataclass(frozen=True)
class BlockFit:
    """OLS with block fixed effects, vectorised over leading axes of y: β̂, its standard error, residual df,
    and what the null-variance test needs (the residual sum of squares, diag((X̃'X̃)⁻¹))."""

    beta: FloatArray
    se: FloatArray
    df: int
    rss: FloatArray
    inv_diag: FloatArray


def block_ols(x: npt.ArrayLike, blocks: npt.ArrayLike, y: npt.ArrayLike) -> BlockFit:
    """Fit ``y = α_block + x β + ε``; x is sessions × pieces, blocks a block index per session, y (…, sessions).

    Raises :class:`DesignError` when the pieces are confounded in these sessions (demeaned x not of full rank)
    or the residual has no degrees of freedom."""
    xa = np.asarray(x, dtype=np.float64)
    _, codes = np.unique(np.asarray(blocks), return_inverse=True)
    codes = codes.astype(np.int64)
    n, k = xa.shape
    nb = int(codes.max()) + 1 if n else 0
    df = n - nb - k
    if df < 1:
        raise DesignError(f"{n} sessions in {nb} blocks cannot estimate {k} pieces and an error (df {df})")
    xt = block_demean(xa.T, codes, nb).T
    if np.linalg.matrix_rank(xt) < k:
        raise DesignError("the sessions given cannot separate every piece (a piece's column is confounded)")
    inv = np.linalg.inv(xt.T @ xt)
    yt = block_demean(np.asarray(y, dtype=np.float64), codes, nb)
    beta = yt @ xt @ inv
    resid = yt - beta @ xt.T
    rss = np.sum(resid * resid, axis=-1)
    se = np.sqrt((rss / df)[..., None] * np.diag(inv))
    return BlockFit(np.asarray(beta), np.asarray(se), df, np.asarray(rss), np.asarray(np.diag(inv)))


def t_test(
    fit: BlockFit, level: float, *, null_variance: bool = False
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Two-sided p of β = 0 and the Wald t interval at ``level``; p is NaN where there is no spread.

    ``null_variance`` (binary outcomes): p from the error variance under the piece's null, (RSS + β̂²/d) /
    (df + 1) with d the piece's diag((X̃'X̃)⁻¹), against t with df + 1 (the score-test form). The Wald test's
    residual variance of 0/1 outcomes shrinks as the contrast grows, so it is liberal in the far tail where Holm
    tests (measured ≈ 1.1 α at α = 0.001, rate ½; ``tests/test_screening_inference.py``); the interval stays Wald."""
    if null_variance:
        var = (fit.rss[..., None] + fit.beta * fit.beta / fit.inv_diag) / (fit.df + 1) * fit.inv_diag
        se_test, df_test = np.sqrt(var), fit.df + 1
    else:
        se_test, df_test = fit.se, fit.df
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se_test > 0, np.abs(fit.beta) / se_test, np.nan)
    p = 2.0 * sps.t.sf(t, df_test)
    half = float(sps.t.ppf(0.5 + level / 2.0, fit.df)) * fit.se
    return np.asarray(p), fit.beta - half, fit.beta + half


def verdict(
    effect: float,
    low: float,
    high: float,
    p_adjusted: float,
    *,
    alpha: float,
    min_effect: float,
    higher: bool,
) -> PieceVerdict:
    """helps / hurts (Holm-adjusted p ≤ α, by the sign), draw (interval inside ±min_effect), else undecided."""
    if p_adjusted <= alpha and effect != 0:
        return "helps" if (effect > 0) == higher else "hurts"
    return "draw" if -min_effect < low and high < min_effect else "undecided"


def analyse(
    design: Design,
    outcomes: Sequence[Outcome],
    *,
    binary: bool,
    alpha: float = 0.05,
    min_effect: float = DEFAULT_MIN_EFFECT,
    higher_is_better: bool = True,
) -> PieceAnalysis:
    """Every piece's effect (on − off), interval, Holm-adjusted p and verdict from the scored sessions (missing
    ones left out). ``binary``: 0/1 outcomes, tested with the null variance (:func:`t_test`), else Wald;
    ``min_effect`` in the metric's units; ``higher_is_better`` False for turns and costs. A :class:`DesignError`
    when the sessions cannot estimate every piece (too few, or a piece never both on and off in a block)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} outside (0, 1)")
    if min_effect <= 0:
        raise ValueError(f"min_effect={min_effect!r} must be positive")
    for o in outcomes:
        if not 0 <= o.row < len(design.rows):
            raise DesignError(
                f"outcome of row {o.row}: the {design.name} design has rows 0–{len(design.rows) - 1}"
            )
        if not math.isfinite(o.value) or (binary and o.value not in (0.0, 1.0)):
            raise DesignError(
                f"outcome of row {o.row}, task {o.task!r}, repeat {o.repeat}: value {o.value!r}"
                + (" (a binary outcome is 0 or 1)" if binary else " (not a finite number)")
            )
    block_ids = {b: i for i, b in enumerate(dict.fromkeys((o.task, o.repeat) for o in outcomes))}
    at = np.array([o.row for o in outcomes], dtype=np.int64)
    blocks = np.array([block_ids[(o.task, o.repeat)] for o in outcomes], dtype=np.int64)
    values = np.array([o.value for o in outcomes], dtype=np.float64)
    fit = block_ols(design.matrix()[at], blocks, values)
    p, low, high = t_test(fit, 1.0 - alpha, null_variance=binary)
    beta, n_blocks, df = fit.beta, len(block_ids), fit.df
    method = METHOD_BINARY if binary else METHOD
    if design.drawn is not None:
        draws = draws_needed(design.k, alpha)
        p = crt_p(design, at, blocks, values, draws=draws, seed=[design.drawn, len(outcomes)])
        method = METHOD_DRAWN
    testable = [j for j in range(design.k) if math.isfinite(p[j])]
    adjusted = dict(zip(testable, holm([float(p[j]) for j in testable]), strict=True))
    rows: list[PieceEffect] = []
    for j, pid in enumerate(design.pieces):
        effect = float(beta[j])
        if j not in adjusted:
            rows.append(PieceEffect(pid, effect, None, None, None, None, "undecided", NO_SPREAD))
            continue
        lo, hi, padj = float(low[j]), float(high[j]), adjusted[j]
        word = verdict(effect, lo, hi, padj, alpha=alpha, min_effect=min_effect, higher=higher_is_better)
        rows.append(PieceEffect(pid, effect, lo, hi, float(p[j]), padj, word))
    return PieceAnalysis(rows, len(outcomes), n_blocks, df, alpha, min_effect, method)

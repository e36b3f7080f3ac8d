"""Anytime-valid per-piece decisions for adaptive screening and one-out runs of a pass/fail outcome
(docs/ARCHITECTURE.md#piece-designs, "Adaptive stopping", and #replan).

Each complete block gives each piece one contrast (:func:`contrast_matrix`); "real" comes from the
normal-mixture e-process against 0 (:func:`mixture_log_e`, scale :func:`variance_proxy`: 1/(2N) in screening,
½ in one-out; a bounded-range betting process would waste the design's precision, the sd at a rate of ½ being
1/√(2N)), or in a drawn design from the randomization test at scheduled points (:func:`scheduled_p`); "no
effect of interest" from :func:`ablate.stats.sequential.futility_log_e`. Error rates under optional stopping:
``tests/test_screening_sequential.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ablate.core.constants import DEFAULT_DRAW_BETA
from ablate.stats.screening import Design
from ablate.stats.screening_crt import crt_p, draws_needed
from ablate.stats.screening_inference import Outcome, PieceVerdict
from ablate.stats.sequential import DECISIONS, Decision, anytime_p, decide, futility_log_e

FloatArray = npt.NDArray[np.float64]


def contrast_matrix(design: Design) -> FloatArray:
    """Rows × pieces: one block's outcomes (a row vector) times this is each piece's contrast d_bj — the
    block-demeaned least-squares weights X̃(X̃'X̃)⁻¹ of a single block."""
    x = design.matrix()
    xt = x - x.mean(axis=0)
    return np.asarray(xt @ np.linalg.inv(xt.T @ xt), dtype=np.float64)


def variance_proxy(design: Design) -> FloatArray:
    """Per piece, σ² = Σ_i c_ij² / 4: a block's contrast of outcomes in [0, 1] is σ²-sub-Gaussian about its
    mean (Hoeffding's lemma for each independent session, c_ij y_i ranging over |c_ij|)."""
    c = contrast_matrix(design)
    return np.asarray((c * c).sum(axis=0) / 4.0, dtype=np.float64)


def mixture_log_e(x: npt.ArrayLike, sigma2: npt.ArrayLike, min_effect: float) -> FloatArray:
    """log of the normal-mixture e-process against mean 0 along the last axis (blocks): for σ²-sub-Gaussian
    increments, exp(λS_t − λ²σ²t/2) mixed over λ ~ N(0, ρ²) is 1/√(1 + ρ²V_t) · exp(ρ²S_t² / (2(1 + ρ²V_t))),
    V_t = σ²t (Robbins 1970; Howard SR, Ramdas A, McAuliffe J, Sekhon J, "Time-uniform, nonparametric,
    nonasymptotic confidence sequences", Ann Stat 49:1055–1080, 2021, §3). ρ = min_effect / σ² aims it at
    min-effect; any fixed ρ keeps it valid. ``sigma2`` broadcasts against x without its last axis."""
    xs = np.asarray(x, dtype=np.float64)
    s2 = np.asarray(sigma2, dtype=np.float64)[..., None]
    rho2 = (min_effect / s2) ** 2
    total = np.cumsum(xs, axis=-1)
    v = s2 * np.arange(1, xs.shape[-1] + 1, dtype=np.float64)
    return np.asarray(
        -0.5 * np.log1p(rho2 * v) + rho2 * total * total / (2.0 * (1.0 + rho2 * v)), dtype=np.float64
    )


#: A drawn screening run re-plans onto one-out rounds once these hold at most this share of a whole round's
#: cells: every session of a screening round informs every piece, a one-out contrast rests on two sessions, so
#: turning sooner saves more sessions but leaves more null pieces undecided at --max-repeats
#: (``benchmarks/bench_replan.py``).
REPLAN_SHARE = 1 / 6


def should_replan(design: Design, tested: int, undecided: int, share: float | None = None) -> bool:
    """Whether the next rounds drop decided pieces: ``tested`` pieces ran in the last round (the design's k before
    any re-plan), ``undecided`` are left. One-out rounds (a one-out design's, or a re-planned run's) only shrink; a
    drawn screening run turns to them once the control and one cell per undecided piece are at most ``share`` of
    its round (default :data:`REPLAN_SHARE`). A fixed (undrawn) screening design never re-plans."""
    if not 0 < undecided < tested:
        return False
    if design.name == "one-out" or tested < design.k:
        return True
    return design.drawn is not None and undecided + 1 <= (share or REPLAN_SHARE) * len(design.rows_of(0))


@dataclass(frozen=True)
class PieceDecisions:
    """One look: per piece its effect so far (the mean of its contrasts, on − off; None before any), anytime p
    (unadjusted), decision and the blocks it rested on."""

    effects: list[float | None]
    p_anytime: list[float]
    decisions: list[Decision]
    blocks_used: int
    blocks_incomplete: list[tuple[str, int]]
    blocks: list[int] = field(default_factory=list)
    """Per piece, the blocks that gave it a contrast (fewer than ``blocks_used`` once the run re-planned)."""

    def verdicts(self, *, higher_is_better: bool = True) -> list[PieceVerdict]:
        """The report's words: ``real`` → helps / hurts by the effect's sign, ``no-effect`` → draw, else
        undecided."""
        out: list[PieceVerdict] = []
        for effect, decision in zip(self.effects, self.decisions, strict=True):
            if decision == "real" and effect:
                out.append("helps" if (effect > 0) == higher_is_better else "hurts")
            else:
                out.append("draw" if decision == "no-effect" else "undecided")
        return out


def block_contrasts(
    design: Design, outcomes: Sequence[Outcome], block_order: Sequence[tuple[str, int]]
) -> tuple[FloatArray, list[tuple[str, int]]]:
    """Blocks × pieces contrasts of the complete blocks, in ``block_order`` (the order blocks completed),
    and the blocks left out because a row has no outcome."""
    values = _values(outcomes)
    contrasts = {g: contrast_matrix(design.sub(g)) for g in range(design.draws)}
    out: list[FloatArray] = []
    incomplete: list[tuple[str, int]] = []
    for b in block_order:
        got = values.get(b, {})
        rows = design.rows_of(b[1])
        if any(r not in got for r in rows):
            incomplete.append(b)
            continue
        c = contrasts[b[1] % design.draws]
        out.append(np.array([got[r] for r in rows]) @ c)
    return np.array(out, dtype=np.float64).reshape(len(out), design.k), incomplete


def _values(outcomes: Sequence[Outcome]) -> dict[tuple[str, int], dict[int, float]]:
    values: dict[tuple[str, int], dict[int, float]] = {}
    for o in outcomes:
        if not 0.0 <= o.value <= 1.0:
            raise ValueError(
                f"outcome of row {o.row}, task {o.task!r}, repeat {o.repeat}: {o.value!r} not in [0, 1]"
            )
        values.setdefault((o.task, o.repeat), {})[o.row] = o.value
    return values


def look(
    design: Design,
    outcomes: Sequence[Outcome],
    block_order: Sequence[tuple[str, int]],
    *,
    alpha: float,
    min_effect: float,
    beta: float = DEFAULT_DRAW_BETA,
    max_blocks: int | None = None,
    removals: Sequence[Outcome] = (),
    one_out_test: bool = False,
) -> PieceDecisions:
    """The decisions of one look at a pass/fail run: ``real`` (Holm over the pieces' anytime p ≤ α),
    ``no-effect`` (both futility e-processes past 1/β) or ``undecided``. A drawn design needs ``max_blocks``,
    the most complete blocks the run can have (its schedule of tests: :func:`scheduled_p`).

    ``removals``: the sessions of one-out rounds (a one-out design's; a drawn run's after it re-planned) as rows
    of the one-out design over the same pieces (0 the control, j + 1 without piece j): each block gives each
    piece whose cell ran the contrast control − cell, tested by the normal-mixture e-process over the blocks
    that had it. ``one_out_test``: a drawn run that can re-plan, whose p is the smallest of the randomization
    tests' and that e-process's, times L + 1 (docs/ARCHITECTURE.md#replan). The futility e-processes run over
    all of a piece's contrasts, each block's scaled by :func:`futility_scale`."""
    if design.name == "one-out":
        outcomes, removals = (), [*outcomes, *removals]
    one_out = {(o.task, o.repeat) for o in removals}
    d, incomplete = block_contrasts(design, outcomes, [b for b in block_order if b not in one_out])
    complete = [b for b in block_order if b not in one_out and b not in set(incomplete)]
    rows = {b: (v, futility_scale(design)) for b, v in zip(complete, d, strict=True)}
    values = _values(removals)
    for b in (b for b in block_order if b in one_out):
        got = values[b]
        if 0 not in got:
            incomplete.append(b)
            continue
        rows[b] = (np.array([got[0] - got.get(j + 1, np.nan) for j in range(design.k)]), np.ones(design.k))
    seq = [rows[b] for b in block_order if b in rows]
    removal = np.array([b in one_out for b in block_order if b in rows], dtype=bool)
    if not seq:
        k = design.k
        return PieceDecisions([None] * k, [1.0] * k, ["undecided"] * k, 0, incomplete, [0] * k)
    x, scale = (np.array([v[i] for v in seq], dtype=np.float64) for i in (0, 1))  # blocks × pieces
    cols = [~np.isnan(x[:, j]) for j in range(design.k)]
    if design.drawn is None:
        p = _mixture_p(x, variance_proxy(design), min_effect)
    else:
        if max_blocks is None:
            raise ValueError("a drawn design's look needs max_blocks")
        p = scheduled_p(design, outcomes, complete, max_blocks=max_blocks, alpha=alpha)
        if one_out_test:
            m = len(look_points(max_blocks)) + 1
            one_out_p = _mixture_p(x[removal], np.full(design.k, 0.5), min_effect)
            p = np.minimum(1.0, np.minimum(p * m / (m - 1), one_out_p * m))
    ends = [
        futility_log_e(x[c, j] / scale[c, j], min_effect / scale[c, j])
        if c.any()
        else (np.zeros(1), np.zeros(1))
        for j, c in enumerate(cols)
    ]
    codes = decide(p, [u[-1] for u, _ in ends], [w[-1] for _, w in ends], alpha=alpha, beta=beta)
    return PieceDecisions(
        [float(np.mean(x[c, j])) if c.any() else None for j, c in enumerate(cols)],
        [float(v) for v in p],
        [DECISIONS[int(c)] for c in codes],
        len(seq),
        incomplete,
        [int(c.sum()) for c in cols],
    )


def _mixture_p(x: FloatArray, sigma2: FloatArray, min_effect: float) -> FloatArray:
    """Per piece, the anytime p of its contrasts (the columns of ``x``, blocks in completion order; NaN: none in
    that block) by the normal-mixture e-process with that piece's σ²."""
    out = np.ones(x.shape[1])
    for j in range(x.shape[1]):
        col = x[:, j][~np.isnan(x[:, j])]
        if col.size:
            out[j] = anytime_p(mixture_log_e(col, sigma2[j], min_effect))[-1]
    return out


def futility_scale(design: Design) -> FloatArray:
    """Per piece, what its block contrasts and ``min_effect`` are divided by before the futility e-processes: 1,
    or in a drawn design (columns not orthogonal, contrasts beyond [−1, 1]) the widest Σ_i |c_ij| / 2 (≥ 1)."""
    if design.drawn is None:
        return np.ones(design.k)
    widths = [np.abs(contrast_matrix(design.sub(g))).sum(axis=0) / 2 for g in range(design.draws)]
    return np.asarray(np.maximum(1.0, np.max(widths, axis=0)), dtype=np.float64)


def look_points(max_blocks: int) -> list[int]:
    """The complete-block counts at which a drawn design's pieces are tested: 2, 4, 8, … below ``max_blocks``,
    and ``max_blocks``."""
    points = [b for b in (2**m for m in range(1, max(2, max_blocks).bit_length() + 1)) if b < max_blocks]
    return [*points, max(2, max_blocks)]


def scheduled_p(
    design: Design,
    outcomes: Sequence[Outcome],
    complete: Sequence[tuple[str, int]],
    *,
    max_blocks: int,
    alpha: float,
) -> FloatArray:
    """Per piece of a drawn design, a p valid whenever the run stops: the conditional randomization test
    (:mod:`ablate.stats.screening_crt`) of the first n complete blocks (in completion order) at each of the L
    :func:`look_points` passed, the smallest p times L (Bonferroni over the schedule). Why not the mixture
    e-process: docs/ARCHITECTURE.md#piece-designs ("Adaptive stopping")."""
    points = look_points(max_blocks)
    draws = draws_needed(design.k, alpha, len(points))
    index = {b: i for i, b in enumerate(complete)}
    best = np.ones(design.k)
    for n in (b for b in points if b <= len(complete)):
        got = [o for o in outcomes if index.get((o.task, o.repeat), n) < n]
        rows = np.array([o.row for o in got], dtype=np.int64)
        blocks = np.array([index[(o.task, o.repeat)] for o in got], dtype=np.int64)
        values = np.array([o.value for o in got], dtype=np.float64)
        p = crt_p(design, rows, blocks, values, draws=draws, seed=[design.drawn or 0, n])
        best = np.minimum(best, np.where(np.isnan(p), 1.0, p))
    return np.asarray(np.minimum(1.0, best * len(points)), dtype=np.float64)

"""Simulated per-piece runs of a binary outcome under a model of sessions, vectorised over many runs.

**This is a model, not the CLI.** A session of task t in a cell that keeps the pieces x (1 on, 0 off) passes
with probability ``control_t − Σ_j e_j (1 − x_j)``: the control's (the full setup's) rate on that task, less
the effect e_j of every piece the cell removes (e_j > 0: the piece helps). The effects add on the probability
scale and the task effect is the spread of the control's rates. That is the effect an ``ablate.sim`` script
plants with a rule keyed on a piece's marker text in the system prompt (``where = "system"``,
``contains = [marker]``, ``probability = q``): the rule fires only in cells that keep the piece. Two such rules
in one script fire first-match, so their effects are not quite additive (a two-piece interaction); the
fold-over keeps such interactions out of the screening design's main effects, and under the null (no rule
keyed on any piece) the two models are the same. Sessions are independent given their probability.

Pieces that work together are planted as :class:`Term` s: a gain the full setup has and a cell loses when it
removes every piece of the term (``need="any"``: either piece suffices) or any of them (``need="all"``: the
pieces help only together). A randomized design (``Design.seed`` set) draws every block's column flips from the
simulation's generator — the same distribution as :func:`ablate.stats.screening.block_flips`.

Each simulated run is analysed by the library a real run uses (:func:`block_ols`, :func:`t_test`,
:func:`block_test` of ``ablate.stats.screening_inference``, Holm over the pieces), vectorised over runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ablate.stats.screening import Design
from ablate.stats.screening_inference import block_ols, block_test, t_test
from ablate.stats.screening_sequential import contrast_matrix, mixture_log_e, variance_proxy
from ablate.stats.sequential import REAL, UNDECIDED, anytime_p, decide, futility_log_e, holm_adjust

FloatArray = npt.NDArray[np.float64]
#: Runs analysed at once (bounds memory: runs × sessions floats; a randomized design's runs × sessions × pieces).
CHUNK = 100


@dataclass(frozen=True)
class Term:
    """Pieces that work together: the full setup gains ``value``; a cell loses it when it removes all of
    ``pieces`` (``need="any"``: any one kept suffices) or any of them (``need="all"``: only together)."""

    pieces: tuple[int, ...]
    value: float
    need: Literal["any", "all"] = "all"


@dataclass(frozen=True)
class Planted:
    """A planted setup: the control's pass rate on each task, each piece's own effect (e > 0 helps) and the
    terms of pieces that work together."""

    control_rates: tuple[float, ...]
    effects: tuple[float, ...]
    terms: tuple[Term, ...] = ()

    def null_pieces(self) -> list[int]:
        """The pieces nothing depends on: no effect of their own and in no term."""
        involved = {j for t in self.terms for j in t.pieces}
        return [j for j, e in enumerate(self.effects) if e == 0 and j not in involved]


def cell_loss(keeps: npt.NDArray[np.bool_], planted: Planted) -> FloatArray:
    """…: what the cells ``keeps`` (…, pieces) lose against the full setup."""
    loss = (~keeps).astype(np.float32) @ np.asarray(planted.effects, dtype=np.float32)
    for t in planted.terms:
        on = keeps[..., list(t.pieces)]
        active = on.all(axis=-1) if t.need == "all" else on.any(axis=-1)
        loss = loss + np.float32(t.value) * (~active)
    return np.asarray(loss, dtype=np.float64)


def _checked(probs: FloatArray) -> FloatArray:
    if probs.min() < 0 or probs.max() > 1:
        raise ValueError("planted effects push a cell's pass probability outside [0, 1]")
    return probs


def pass_probabilities(design: Design, planted: Planted) -> FloatArray:
    """Tasks × rows: the model's pass probability of each of the design's cells on each task."""
    if len(planted.effects) != design.k:
        raise ValueError(f"{len(planted.effects)} effects for {design.k} pieces")
    loss = cell_loss(design.matrix() > 0, planted)
    return _checked(np.asarray(planted.control_rates, dtype=np.float64)[:, None] - loss[None, :])


def randomized_contrasts(
    design: Design, planted: Planted, rounds: int, runs: int, rng: np.random.Generator
) -> FloatArray:
    """Runs × blocks × pieces: each block's contrasts in a randomized design (fresh column flips per block;
    blocks round-major, tasks within), the block's outcomes drawn from its flipped rows."""
    tasks = len(planted.control_rates)
    base = design.matrix() > 0
    c = contrast_matrix(design)
    task_of = np.arange(rounds * tasks) % tasks
    flips = rng.random((runs, rounds * tasks, design.k)) < 0.5
    keeps = base[None, None] != flips[:, :, None, :]  # runs × blocks × rows × pieces
    control = np.asarray(planted.control_rates, dtype=np.float64)[task_of]
    probs = _checked(control[None, :, None] - cell_loss(keeps, planted))
    y = (rng.random(probs.shape) < probs).astype(np.float64)
    return np.asarray((y @ c) * np.where(flips, -1.0, 1.0), dtype=np.float64)


@dataclass(frozen=True)
class SimResult:
    """Per run and piece: the effect estimate and the Holm-adjusted p (NaN: not computable)."""

    effect: FloatArray
    p_adjusted: FloatArray
    sessions: int


def simulate(
    design: Design, planted: Planted, repeats: int, runs: int, rng: np.random.Generator
) -> SimResult:
    """``runs`` runs of ``design`` with ``repeats`` repeats of every row on every task, analysed as a run is."""
    if design.seed is not None:
        return _simulate_randomized(design, planted, repeats, runs, rng)
    probs = pass_probabilities(design, planted)
    tasks, rows = probs.shape
    m = design.matrix()
    x = np.tile(m, (tasks * repeats, 1))
    blocks = np.repeat(np.arange(tasks * repeats), rows)
    p_session = np.tile(probs, (repeats, 1)).reshape(-1)
    effects: list[FloatArray] = []
    adjusted: list[FloatArray] = []
    for start in range(0, runs, CHUNK):
        n = min(CHUNK, runs - start)
        y = (rng.random((n, p_session.size)) < p_session).astype(np.float64)
        fit = block_ols(x, blocks, y)
        p, _, _ = t_test(fit, 0.95, null_variance=True)
        effects.append(fit.beta)
        adjusted.append(holm_adjust(p))
    return SimResult(np.vstack(effects), np.vstack(adjusted), int(p_session.size))


def _simulate_randomized(
    design: Design, planted: Planted, repeats: int, runs: int, rng: np.random.Generator
) -> SimResult:
    effects: list[FloatArray] = []
    adjusted: list[FloatArray] = []
    for start in range(0, runs, CHUNK):
        d = randomized_contrasts(design, planted, repeats, min(CHUNK, runs - start), rng)
        mean, p, _, _ = block_test(d, 0.95)
        effects.append(mean)
        adjusted.append(holm_adjust(np.nan_to_num(p, nan=1.0)))
    sessions = repeats * len(planted.control_rates) * len(design.rows)
    return SimResult(np.vstack(effects), np.vstack(adjusted), sessions)


def detected(result: SimResult, planted: Planted, alpha: float) -> FloatArray:
    """Per planted piece (e ≠ 0): the share of runs that found it real with the right sign."""
    idx = [j for j, e in enumerate(planted.effects) if e != 0]
    sign = np.sign(np.asarray(planted.effects)[idx])
    hit = (result.p_adjusted[:, idx] <= alpha) & (np.sign(result.effect[:, idx]) == sign)
    return np.asarray(hit.mean(axis=0), dtype=np.float64)


def family_wise_error(result: SimResult, planted: Planted, alpha: float) -> float:
    """The share of runs that call at least one null piece (:meth:`Planted.null_pieces`) real."""
    null = planted.null_pieces()
    return float(np.mean(np.any(result.p_adjusted[:, null] <= alpha, axis=1)))


def repeats_for_power(
    design: Design,
    planted: Planted,
    *,
    power: float,
    alpha: float,
    runs: int,
    rng: np.random.Generator,
    max_repeats: int = 512,
) -> tuple[int, FloatArray] | None:
    """The fewest repeats at which every planted piece is found with at least ``power`` (doubling, then
    bisection), with the detection rates there; None beyond ``max_repeats``."""

    def rates(r: int) -> FloatArray:
        return detected(simulate(design, planted, r, runs, rng), planted, alpha)

    hi = 1
    got = rates(hi)
    while got.min() < power:
        if hi >= max_repeats:
            return None
        hi = min(2 * hi, max_repeats)
        got = rates(hi)
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        mid_rates = rates(mid)
        if mid_rates.min() >= power:
            hi, got = mid, mid_rates
        else:
            lo = mid
    return hi, got


def planted_pair(k: int, effect: float, control_rates: Sequence[float]) -> Planted:
    """One piece that helps by ``effect`` and one that hurts by it among ``k`` (the rest null)."""
    effects = [0.0] * k
    effects[0], effects[k // 2] = effect, -effect
    return Planted(tuple(control_rates), tuple(effects))


@dataclass(frozen=True)
class AdaptiveSim:
    """Per run, piece and look (after each round of one repeat of every task): the decision code."""

    decisions: npt.NDArray[np.int8]
    sessions_per_round: int


def simulate_adaptive(
    design: Design,
    planted: Planted,
    rounds: int,
    runs: int,
    rng: np.random.Generator,
    *,
    alpha: float,
    min_effect: float,
) -> AdaptiveSim:
    """Adaptive runs: a look after every round with the functions a look uses (block contrasts, the
    normal-mixture anytime p, the futility e-processes, Holm in ``decide``); blocks enter in round order."""
    tasks, rows = len(planted.control_rates), len(design.rows)
    out: list[npt.NDArray[np.int8]] = []
    for start in range(0, runs, CHUNK):
        blocks = block_paths(design, planted, rounds, min(CHUNK, runs - start), rng)
        out.append(adaptive_decisions(design, blocks, tasks, alpha=alpha, min_effect=min_effect))
    return AdaptiveSim(np.concatenate(out), rows * tasks)


def block_paths(
    design: Design, planted: Planted, rounds: int, runs: int, rng: np.random.Generator
) -> FloatArray:
    """Runs × blocks × pieces: every block's contrasts, blocks round-major (tasks within)."""
    if design.seed is not None:
        return randomized_contrasts(design, planted, rounds, runs, rng)
    probs = pass_probabilities(design, planted)
    tasks, rows = probs.shape
    y = (rng.random((runs, rounds, tasks, rows)) < probs).astype(np.float64)
    return np.asarray((y @ contrast_matrix(design)).reshape(runs, rounds * tasks, design.k), dtype=np.float64)


def adaptive_decisions(
    design: Design, blocks: FloatArray, tasks: int, *, alpha: float, min_effect: float
) -> npt.NDArray[np.int8]:
    """Runs × pieces × looks: the decision codes of a look after every round (``tasks`` blocks each)."""
    paths = blocks.transpose(0, 2, 1)  # runs × pieces × blocks
    log_e = mixture_log_e(paths, variance_proxy(design), min_effect, self_normalized=design.seed is not None)
    p = anytime_p(log_e)
    up, down = futility_log_e(paths, min_effect)
    at = np.arange(1, blocks.shape[1] // tasks + 1) * tasks - 1
    return np.stack([decide(p[..., i], up[..., i], down[..., i], alpha=alpha) for i in at], axis=-1)


def fixed_holm(design: Design, blocks: FloatArray, probs_y: FloatArray | None) -> FloatArray:
    """Runs × pieces: Holm-adjusted p of a fixed-n analysis — of the block contrasts ``blocks`` (a randomized
    design), or of the sessions ``probs_y`` (runs × blocks × rows, the pooled block-fixed-effects test)."""
    if design.seed is not None:
        _, p, _, _ = block_test(blocks, 0.95)
        return holm_adjust(np.nan_to_num(p, nan=1.0))
    assert probs_y is not None
    runs, nb, rows = probs_y.shape
    fit = block_ols(
        np.tile(design.matrix(), (nb, 1)), np.repeat(np.arange(nb), rows), probs_y.reshape(runs, -1)
    )
    p, _, _ = t_test(fit, 0.95, null_variance=True)
    return holm_adjust(p)


def null_errors(
    design: Design,
    planted: Planted,
    rounds: Sequence[int],
    runs: int,
    rng: np.random.Generator,
    *,
    alpha: float,
    min_effect: float,
) -> dict[tuple[str, int], float]:
    """The family-wise error of the null pieces, ``("fixed", r)``: a fixed-n run of r rounds;
    ``("adaptive", r)``: a look after every round, some null piece real at a look by round r."""
    tasks, rows = len(planted.control_rates), len(design.rows)
    null = planted.null_pieces()
    last = max(rounds)
    hits: dict[tuple[str, int], float] = {}
    for start in range(0, runs, CHUNK):
        n = min(CHUNK, runs - start)
        if design.seed is not None:
            blocks, y = randomized_contrasts(design, planted, last, n, rng), None
        else:
            probs = pass_probabilities(design, planted)
            y = (rng.random((n, last, tasks, rows)) < probs).astype(np.float64).reshape(n, last * tasks, rows)
            blocks = y @ contrast_matrix(design)
        codes = adaptive_decisions(design, blocks, tasks, alpha=alpha, min_effect=min_effect)
        for r in rounds:
            cut = r * tasks
            fixed = fixed_holm(design, blocks[:, :cut], None if y is None else y[:, :cut])
            add = {
                ("fixed", r): np.any(fixed[:, null] <= alpha, axis=1).sum(),
                ("adaptive", r): np.any(codes[:, null, :r] == REAL, axis=(1, 2)).sum(),
            }
            for key, v in add.items():
                hits[key] = hits.get(key, 0.0) + float(v)
    return {key: v / runs for key, v in hits.items()}


def ever_real(sim: AdaptiveSim, pieces: Sequence[int]) -> float:
    """The share of runs in which one of ``pieces`` is called real at some look (looks continue past it)."""
    return float(np.mean(np.any(sim.decisions[:, list(pieces), :] == REAL, axis=(1, 2))))


def rounds_to_decide(sim: AdaptiveSim) -> FloatArray:
    """Per run, the round after which every piece was decided (real or no effect); rounds + 1 if never."""
    decided = np.all(sim.decisions != UNDECIDED, axis=1)  # runs × looks
    rounds = sim.decisions.shape[-1]
    first = np.where(decided.any(axis=-1), np.argmax(decided, axis=-1) + 1, rounds + 1)
    return np.asarray(first, dtype=np.float64)

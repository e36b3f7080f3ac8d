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
pieces help only together). :func:`drawn_run` simulates one run of a drawn design (as a run plans it) for
``benchmarks/bench_interactions.py``.

Each simulated run is analysed by the library a real run uses (:func:`block_ols`, :func:`t_test`,
:func:`analyse` of ``ablate.stats.screening_inference``, Holm over the pieces), vectorised over runs where
the design is fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ablate.stats.multiplicity import holm_adjust
from ablate.stats.screening import (
    MAX_DRAWS,
    Design,
    draw_columns,
    make_design,
    one_out_design,
    screening_design,
)
from ablate.stats.screening_inference import Outcome, analyse, block_ols, t_test
from ablate.stats.screening_sequential import (
    contrast_matrix,
    look,
    mixture_log_e,
    scheduled_p,
    should_replan,
    variance_proxy,
)
from ablate.stats.sequential import REAL, UNDECIDED, anytime_p, decide, futility_log_e

FloatArray = npt.NDArray[np.float64]
#: Runs analysed at once (bounds memory: runs × sessions floats).
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
    probs = pass_probabilities(design, planted)
    tasks, rows = probs.shape
    y = (rng.random((runs, rounds, tasks, rows)) < probs).astype(np.float64)
    return np.asarray((y @ contrast_matrix(design)).reshape(runs, rounds * tasks, design.k), dtype=np.float64)


def adaptive_decisions(
    design: Design, blocks: FloatArray, tasks: int, *, alpha: float, min_effect: float
) -> npt.NDArray[np.int8]:
    """Runs × pieces × looks: the decision codes of a look after every round (``tasks`` blocks each)."""
    paths = blocks.transpose(0, 2, 1)  # runs × pieces × blocks
    log_e = mixture_log_e(paths, variance_proxy(design), min_effect)
    p = anytime_p(log_e)
    up, down = futility_log_e(paths, min_effect)
    at = np.arange(1, blocks.shape[1] // tasks + 1) * tasks - 1
    return np.stack([decide(p[..., i], up[..., i], down[..., i], alpha=alpha) for i in at], axis=-1)


def ever_real(sim: AdaptiveSim, pieces: Sequence[int]) -> float:
    """The share of runs in which one of ``pieces`` is called real at some look (looks continue past it)."""
    return float(np.mean(np.any(sim.decisions[:, list(pieces), :] == REAL, axis=(1, 2))))


def rounds_to_decide(sim: AdaptiveSim) -> FloatArray:
    """Per run, the round after which every piece was decided (real or no effect); rounds + 1 if never."""
    decided = np.all(sim.decisions != UNDECIDED, axis=1)  # runs × looks
    rounds = sim.decisions.shape[-1]
    first = np.where(decided.any(axis=-1), np.argmax(decided, axis=-1) + 1, rounds + 1)
    return np.asarray(first, dtype=np.float64)


def drawn_run(
    k: int, planted: Planted, rounds: int, rng: np.random.Generator, *, draws: int = MAX_DRAWS
) -> tuple[Design, list[Outcome], list[tuple[str, int]]]:
    """One simulated run of a drawn screening design (as ``ablate run --pieces`` plans it: the columns drawn
    ``min(rounds, draws)`` times from a fresh seed): its design, every session's outcome and the blocks in the
    order they completed (round-major, tasks within)."""
    design = draw_columns(
        screening_design([f"piece-{i}" for i in range(k)]), int(rng.integers(2**31)), draws=min(rounds, draws)
    )
    keeps = design.matrix() > 0
    loss = cell_loss(keeps, planted)
    outcomes: list[Outcome] = []
    order: list[tuple[str, int]] = []
    for r in range(rounds):
        rows = design.rows_of(r)
        for t, rate in enumerate(planted.control_rates):
            probs = _checked(rate - loss[rows])
            passed = rng.random(len(rows)) < probs
            outcomes.extend(Outcome(i, str(t), r, float(v)) for i, v in zip(rows, passed, strict=True))
            order.append((str(t), r))
    return design, outcomes, order


def drawn_marks_null(
    design: Design,
    outcomes: Sequence[Outcome],
    planted: Planted,
    *,
    alpha: float,
    adaptive_blocks: int | None,
) -> tuple[bool, list[bool]]:
    """Whether the run marks some null piece real, and per piece whether it is marked: the fixed analysis
    (:func:`ablate.stats.screening_inference.analyse`), or with ``adaptive_blocks`` the adaptive run's
    decision after its last look (its scheduled p is the smallest over the looks, so "real at the end" is
    "real at some look")."""
    if adaptive_blocks is None:
        got = analyse(design, outcomes, binary=True, alpha=alpha)
        marked = [e.verdict in ("helps", "hurts") for e in got.pieces]
    else:
        blocks = list(dict.fromkeys((o.task, o.repeat) for o in outcomes))
        p = scheduled_p(design, outcomes, blocks, max_blocks=adaptive_blocks, alpha=alpha)
        marked = [bool(v) for v in holm_adjust(p) <= alpha]
    return any(marked[j] for j in planted.null_pieces()), marked


@dataclass(frozen=True)
class PieceRun:
    """One simulated adaptive piece run: sessions it ran, each piece's decision and verdict at its end, and the
    round after which it re-planned (None: it ran whole designs)."""

    sessions: int
    decisions: list[str]
    verdicts: list[str]
    replanned: int | None


def adaptive_piece_run(
    design_name: str,
    planted: Planted,
    max_rounds: int,
    rng: np.random.Generator,
    *,
    replan: float | None,
    alpha: float,
    min_effect: float,
) -> PieceRun:
    """One adaptive piece run as ``ablate run --pieces --adaptive`` drives it: a look after every round with
    :func:`ablate.stats.screening_sequential.look`; with ``replan``, the rounds after
    :func:`~ablate.stats.screening_sequential.should_replan` (``replan``: its share) run the control and the
    one-out cell of each piece still undecided (a screening run's confirmation cells), as
    :mod:`ablate.run.piece_adaptive` does; ``replan`` None: whole designs to the end (the runs before
    re-planning). Blocks complete in round order."""
    k, tasks = len(planted.effects), len(planted.control_rates)
    design = make_design(design_name, [f"piece-{i}" for i in range(k)])
    if design.name == "screening":
        design = draw_columns(design, int(rng.integers(2**31)), draws=min(max_rounds, MAX_DRAWS))
    loss = cell_loss(design.matrix() > 0, planted)
    one_out = cell_loss(one_out_design([f"piece-{i}" for i in range(k)]).matrix() > 0, planted)
    outcomes: list[Outcome] = []
    removals: list[Outcome] = []
    order: list[tuple[str, int]] = []
    tested, replanned, sessions = list(range(k)), None, 0
    got = None
    for r in range(max_rounds):
        rows, losses, into = design.rows_of(r), loss, outcomes
        if replanned is not None:
            rows, losses, into = [0, *(j + 1 for j in tested)], one_out, removals
        for t, rate in enumerate(planted.control_rates):
            passed = rng.random(len(rows)) < _checked(rate - losses[rows])
            into.extend(Outcome(i, str(t), r, float(v)) for i, v in zip(rows, passed, strict=True))
            order.append((str(t), r))
        sessions += len(rows) * tasks
        got = look(
            design, outcomes, order, alpha=alpha, min_effect=min_effect, max_blocks=max_rounds * tasks,
            removals=removals, one_out_test=replan is not None and design.drawn is not None,
        )  # fmt: skip
        left = [j for j, d in enumerate(got.decisions) if d == "undecided"]
        if not left:
            break
        if replan is not None and should_replan(design, len(tested), len(left), replan):
            tested, replanned = left, replanned if replanned is not None else r + 1
    assert got is not None
    return PieceRun(sessions, list(got.decisions), list(got.verdicts()), replanned)

"""Simulated adaptive and fixed runs of a binary primary outcome, vectorised over many experiments.

The adaptive design is the one ``ablate run --adaptive`` drives (``ablate.run.adaptive``): rounds of one repeat
over every task, a look after each round, each cell stopped when :func:`ablate.stats.sequential.decide` decides
it, the control kept while any cell runs. The same ``ablate.stats.sequential`` functions compute every figure.
The fixed design runs every cell for a fixed number of repeats and applies the exact discordant-block test with
Holm (``ablate.stats``), as a fixed-run report does.

Outcomes are independent Bernoulli draws given each task's base rate and each cell's planted effect (positive
within-block correlation would only help both designs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ablate.core.constants import DEFAULT_DRAW_BETA
from ablate.stats.multiplicity import holm_adjust
from ablate.stats.proportions import exact_paired_p
from ablate.stats.sequential import (
    NO_EFFECT,
    REAL,
    UNDECIDED,
    anytime_p,
    decide,
    discordant_path,
    futility_log_e,
    prior_for,
)


@dataclass(frozen=True)
class Scenario:
    """A planted experiment: task base rates (of the control) and each cell's effect on the rate."""

    name: str
    base_rates: tuple[float, ...]
    """Control's success rate per task."""
    effects: tuple[float, ...]
    """Per cell: added to the base rate (clipped to [0, 1]); 0 is a null cell."""

    def rates(self) -> npt.NDArray[np.float64]:
        """(cells, tasks) success rates of the cells."""
        base = np.asarray(self.base_rates)
        return np.asarray(
            np.clip(base[None, :] + np.asarray(self.effects)[:, None], 0.0, 1.0), dtype=np.float64
        )


@dataclass(frozen=True)
class Draws:
    """Outcomes of every block up to the maximum, round-major (block k = repeat k // tasks, task k % tasks)."""

    cells: npt.NDArray[np.bool_]
    """(experiments, cells, blocks)."""
    control: npt.NDArray[np.bool_]
    """(experiments, blocks)."""


def draw(scenario: Scenario, sims: int, repeats: int, rng: np.random.Generator) -> Draws:
    tasks = len(scenario.base_rates)
    rates = np.tile(scenario.rates(), (1, repeats))  # (cells, blocks), round-major
    base = np.tile(np.asarray(scenario.base_rates), repeats)
    cells = rng.random((sims, len(scenario.effects), tasks * repeats)) < rates[None]
    control = rng.random((sims, tasks * repeats)) < base[None]
    return Draws(cells, control)


@dataclass(frozen=True)
class AdaptiveOutcome:
    decision: npt.NDArray[np.int8]
    """(experiments, cells): final decision codes (ablate.stats.sequential.DECISIONS)."""
    rounds: npt.NDArray[np.int64]
    """(experiments, cells): rounds each cell ran."""
    sessions: npt.NDArray[np.int64]
    """(experiments,): sessions used, control included."""
    ever_real: npt.NDArray[np.bool_]
    """(experiments, cells): marked real at some look."""


def run_adaptive(
    draws: Draws,
    tasks: int,
    *,
    alpha: float,
    min_effect: float,
    max_repeats: int,
    draw_beta: float = DEFAULT_DRAW_BETA,
) -> AdaptiveOutcome:
    """Play the adaptive design on pre-drawn outcomes: a cell's figures at its stop are those of the blocks it ran.

    "real" uses the anytime p-values of the mixture tuned to ``min_effect`` with Holm at ``alpha``; "no effect"
    the futility e-processes at ``draw_beta`` (as ``ablate.stats.adaptive.analyse`` does).
    """
    x, y = draws.cells, draws.control[:, None, :]
    p = anytime_p(discordant_path(x, y, prior_for(min_effect)))
    up, down = futility_log_e(x.astype(np.float64) - y, min_effect)
    sims, ncells = x.shape[:2]
    stop = np.full((sims, ncells), max_repeats - 1)  # look index each cell's figures freeze at
    active = np.ones((sims, ncells), dtype=bool)
    ever_real = np.zeros((sims, ncells), dtype=bool)
    sessions = np.zeros(sims, dtype=np.int64)
    decision = np.zeros((sims, ncells), dtype=np.int8)
    for r in range(max_repeats):
        sessions += tasks * (active.sum(axis=1) + active.any(axis=1))
        stop = np.where(active, r, stop)
        k = (stop * tasks + tasks - 1)[..., None]  # the last block each cell has seen
        cur = [np.take_along_axis(a, k, axis=2)[..., 0] for a in (p, up, down)]
        decision = decide(*cur, alpha=alpha, beta=draw_beta)
        ever_real |= decision == REAL
        active &= decision == UNDECIDED
        if not active.any():
            break
    return AdaptiveOutcome(decision, stop + 1, sessions, ever_real)


@dataclass(frozen=True)
class FixedOutcome:
    real: npt.NDArray[np.bool_]
    """(experiments, cells): Holm-adjusted exact p ≤ α after all repeats."""
    sessions: int


def run_fixed(draws: Draws, tasks: int, repeats: int, *, alpha: float) -> FixedOutcome:
    """The fixed design on the first ``repeats`` rounds of the same draws."""
    n = tasks * repeats
    x, y = draws.cells[..., :n], draws.control[:, None, :n]
    p = exact_paired_p(np.sum(x & ~y, axis=2), np.sum(~x & y, axis=2))
    real = holm_adjust(p) <= alpha
    return FixedOutcome(real, (x.shape[1] + 1) * n)


def rates_of(outcome: AdaptiveOutcome, effects: tuple[float, ...]) -> dict[str, float]:
    """Family-wise false-positive rate, power (planted cells found real) and where the planted cells that were
    not found went (called a draw, or undecided at max-repeats), null cells called a draw, undecided share."""
    eff = np.asarray(effects)
    null, planted = eff == 0, eff != 0
    real = outcome.decision == REAL
    nan = float("nan")
    return {
        "fwer": float(np.mean((real & null).any(axis=1))) if null.any() else nan,
        "power": float(np.mean(real[:, planted])) if planted.any() else nan,
        "planted_no_effect": float(np.mean(outcome.decision[:, planted] == NO_EFFECT))
        if planted.any()
        else nan,
        "planted_undecided": float(np.mean(outcome.decision[:, planted] == UNDECIDED))
        if planted.any()
        else nan,
        "no_effect_null": float(np.mean(outcome.decision[:, null] == NO_EFFECT)) if null.any() else 0.0,
        "undecided": float(np.mean(outcome.decision == UNDECIDED)),
        "sessions": float(np.mean(outcome.sessions)),
    }

"""Per-piece answers when pieces work together: how often a piece nothing depends on is marked real.

Under the session model of ``benchmarks/screening_sim.py`` (a model, not the CLI), with pieces that work
together planted as terms, each simulated run is planned as ``ablate run --pieces`` plans it — the screening
design's columns drawn at random from the run's seed, repeat r running the control and draw r mod 4 — and
analysed by the library a run uses: the fixed analysis (``ablate.stats.screening_inference.analyse``, the
conditional randomization test, Holm) after R rounds, and the adaptive run's decisions after looking at every
round up to R (``ablate.stats.screening_sequential.scheduled_p``: tests at 2, 4, 8, … blocks, Bonferroni over
that schedule, Holm). The figure is the family-wise error of the null pieces — the share of runs marking some
piece real that has no effect of its own and is in no term — with its Monte Carlo standard error; beside it,
the fixed folded-over Plackett–Burman design with the least-squares test, which the runs used before
(issue 37: its error grows with the rounds once a term of three pieces lines up with a null piece's column).

Scenarios (4 tasks): ``synergy``: +0.3 only when pieces 0, 1 and 2 are all kept (base 0.4); ``complements``:
+0.2 only when both 0 and 1 are kept; ``substitutes``: +0.2 when either is kept; ``additive``: 0 and 1 each
+0.2 on their own. The last table: whole repeats, and sessions, at which both planted pieces of
``benchmarks/bench_screening.py``'s pair (one helps by 0.2, one hurts by 0.2) are found in ≥ 80% of runs.

``python -m benchmarks.run interactions`` (runs per figure: ``ABLATE_BENCH_SIMS``, default 100; each row is
printed as it is measured, the adaptive figures cost most: up to 8 randomization tests a run). Measured
(100 runs, seed 20261204):

null-piece FWER, drawn fixed / drawn adaptive / fixed PB least squares (MC se ≈ 0.022): synergy at 8 pieces
0.030/0.030/0.143 (12 rounds), 0.040/0.000/0.325 (24), 0.070/0.030/0.589 (40); 16 pieces 0.030/0.020/0.282,
0.040/0.030/0.609, 0.060/0.040/0.898; 24 pieces 0.030/0.030/0.122, 0.050/0.050/0.216, 0.050/0.040/0.364;
16 pieces, 24 rounds: complements 0.040/0.050/0.045, substitutes 0.050/0.030/0.044, additive
0.060/0.050/0.042. Sessions for 80% power (drawn, fixed): 480 at 8 pieces, 640 at 16, 672 at 24 (one-out at
16 pieces: 2,924, benchmarks/bench_screening.py). About 30 minutes on the 2-core machine.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
from tabulate import tabulate

from ablate.stats.screening import screening_design, screening_rows
from benchmarks.screening_sim import (
    Planted,
    Term,
    drawn_marks_null,
    drawn_run,
    family_wise_error,
    planted_pair,
    simulate,
)

ALPHA = 0.05
TASKS = 4
PIECES = (8, 16, 24)
ROUNDS = (12, 24, 40)
POWER = 0.8
EFFECT = 0.2
RATES = (0.55, 0.65, 0.45, 0.6)


def scenario(name: str, k: int) -> Planted:
    """The planted setup of scenario ``name`` over ``k`` pieces (every other piece null)."""
    zero = (0.0,) * k
    if name == "synergy":
        return Planted((0.7,) * TASKS, zero, (Term((0, 1, 2), 0.3, "all"),))
    if name == "complements":
        return Planted(RATES, zero, (Term((0, 1), EFFECT, "all"),))
    if name == "substitutes":
        return Planted(RATES, zero, (Term((0, 1), EFFECT, "any"),))
    if name == "additive":
        return Planted(RATES, (EFFECT, EFFECT, *zero[2:]), ())
    raise ValueError(name)


def fwer(k: int, planted: Planted, rounds: int, runs: int, rng: np.random.Generator) -> tuple[float, float]:
    """Family-wise error of the null pieces: the fixed analysis after ``rounds``, the adaptive run's by then."""
    fixed = adaptive = 0
    for _ in range(runs):
        design, outcomes, _order = drawn_run(k, planted, rounds, rng)
        fixed += drawn_marks_null(design, outcomes, planted, alpha=ALPHA, adaptive_blocks=None)[0]
        adaptive += drawn_marks_null(design, outcomes, planted, alpha=ALPHA, adaptive_blocks=rounds * TASKS)[
            0
        ]
    return fixed / runs, adaptive / runs


def fixed_pb_fwer(k: int, planted: Planted, rounds: int, runs: int, rng: np.random.Generator) -> float:
    """The same with the fixed folded-over design and the least-squares test (what runs did before)."""
    design = screening_design([f"piece-{i}" for i in range(k)])
    return family_wise_error(simulate(design, planted, rounds, runs, rng), planted, ALPHA)


def power_repeats(k: int, runs: int, rng: np.random.Generator) -> tuple[int, float]:
    """The fewest whole repeats at which both planted pieces are found (right sign) in ≥ 80% of runs."""
    planted = planted_pair(k, EFFECT, RATES)
    for repeats in range(1, 13):
        found = 0
        for _ in range(runs):
            design, outcomes, _order = drawn_run(k, planted, repeats, rng)
            marked = drawn_marks_null(design, outcomes, planted, alpha=ALPHA, adaptive_blocks=None)[1]
            found += marked[0] and marked[k // 2]  # planted_pair: piece 0 helps, piece k // 2 hurts
        if found / runs >= POWER:
            return repeats, found / runs
    raise RuntimeError(f"{k} pieces: 80% power not reached in 12 repeats")


def se(p: float, runs: int) -> float:
    return math.sqrt(max(p * (1 - p), ALPHA * (1 - ALPHA)) / runs)


def main() -> None:
    runs = int(os.environ.get("ABLATE_BENCH_SIMS", "100"))
    rng = np.random.default_rng(20261204)
    started = time.monotonic()
    print(
        f"null-piece family-wise error (Holm, α {ALPHA}; {runs} runs per figure, ± Monte Carlo se); {TASKS} tasks"
    )
    rows: list[list[object]] = []
    rates: list[float] = []
    for name in ("synergy", "complements", "substitutes", "additive"):
        sizes = PIECES if name == "synergy" else (16,)
        rounds_list = ROUNDS if name == "synergy" else (24,)
        for k in sizes:
            planted = scenario(name, k)
            for rounds in rounds_list:
                fixed, adaptive = fwer(k, planted, rounds, runs, rng)
                before = fixed_pb_fwer(k, planted, rounds, max(runs, 1000), rng)
                rates += [fixed, adaptive]
                print(
                    f"  {name} {k} pieces {rounds} rounds: drawn fixed {fixed:.3f}, adaptive {adaptive:.3f}, "
                    f"fixed PB {before:.3f} ({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
                rows.append(
                    [
                        name,
                        k,
                        rounds,
                        f"{fixed:.3f} ± {se(fixed, runs):.3f}",
                        f"{adaptive:.3f} ± {se(adaptive, runs):.3f}",
                        f"{before:.3f}",
                    ]
                )
    print(
        tabulate(
            rows,
            headers=[
                "scenario",
                "pieces",
                "rounds",
                "drawn, fixed",
                "drawn, adaptive",
                "fixed PB, least squares",
            ],
        )
    )
    worst = max(rates)
    print(f"largest null-piece FWER of the drawn design: {worst:.3f} (α {ALPHA}, se ≈ {se(ALPHA, runs):.3f})")
    power_table(runs, rng, started)


def power_table(runs: int, rng: np.random.Generator, started: float) -> None:
    """Sessions to 80% power for the planted pair, per size."""
    power = []
    for k in PIECES:
        repeats, got = power_repeats(k, runs, rng)
        power.append([k, repeats, repeats * screening_rows(k) * TASKS, f"{got:.3f}"])
    print("both planted pieces found in ≥ 80% of runs (drawn design, fixed analysis)")
    print(tabulate(power, headers=["pieces", "repeats", "sessions", "power"]))
    print(f"({time.monotonic() - started:.0f} s)")

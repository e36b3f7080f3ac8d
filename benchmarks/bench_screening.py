"""Per-piece attribution: sessions for 80% power and the family-wise error, screening against one-out.

Under the session model of ``benchmarks/screening_sim.py`` (a model, not the CLI: pass probability = the
control's rate on the task − the effects of the pieces a cell removes), among 8, 16 and 32 pieces one piece
helps by :data:`EFFECT` and one hurts by as much, the rest do nothing; 4 tasks with control rates
:data:`RATES`. For each design (``ablate.stats.screening``): the fewest whole repeats (every cell on every
task) at which both planted pieces are found real with the right sign in ≥ 80% of simulated runs (Holm at α
over the pieces, ``ablate.stats.screening_inference``), the sessions that is, and the family-wise error —
the share of runs calling a null piece real — with no piece planted, at that many sessions and at one
repeat. The target (issue 32): at 16 pieces screening needs at most a third of one-out's sessions, with
family-wise error ≤ α.

``python -m benchmarks.run screening`` (runs per power step: ``ABLATE_BENCH_SIMS``, default 1000; null runs:
10× that). Measured (1000 / 10,000 runs, seed 20261201; about 2 minutes on a loaded 2-core machine):

======  =========  =====  ===============  ========  =====  ==========  ================
pieces  design     cells  repeats for 80%  sessions  power  FWER there  FWER at 1 repeat
======  =========  =====  ===============  ========  =====  ==========  ================
8       screening  24     4                384       0.920  0.047       0.038
8       one-out    9      37               1332      0.821  0.038       0.004
16      screening  40     3                480       0.944  0.047       0.039
16      one-out    17     43               2924      0.811  0.035       0.002
32      screening  72     2                576       0.974  0.046       0.041
32      one-out    33     49               6468      0.813  0.037       0.000
======  =========  =====  ===============  ========  =====  ==========  ================

At 16 pieces screening needs 0.16 of one-out's sessions (target ≤ ⅓), the largest family-wise error under the
null is 0.047 (Monte Carlo se 0.002, α 0.05). Screening's power overshoots 80% because a run grows by whole
repeats of 2N cells. One-out at one repeat is far below α: each piece's test then rests on one control
session per block.

Adaptive runs (``ablate.stats.screening_sequential``, a look after every round; at most 12 rounds screening,
60 one-out; 1000 runs): sessions by which both planted pieces are real in 80% of runs / median sessions until
every piece is decided / family-wise error under the null with every look — screening 672 / 960 / 0.019 at 8
pieces, 640 / 1440 / 0.015 at 16, 864 / 2304 / 0.010 at 32; one-out reaches neither within 60 rounds at 16 and
32 pieces (its block contrast, one control session minus one cell session, is a coarse sub-Gaussian bound),
FWER ≤ 0.013. Anytime validity costs sessions: the fixed screening design finds the pair with fewer.
"""

from __future__ import annotations

import math
import os

import numpy as np
from tabulate import tabulate

from ablate.stats.screening import DESIGNS, make_design
from benchmarks.screening_sim import (
    Planted,
    ever_real,
    family_wise_error,
    planted_pair,
    repeats_for_power,
    rounds_to_decide,
    simulate,
    simulate_adaptive,
)

PIECES = (8, 16, 32)
EFFECT = 0.2
RATES = (0.55, 0.65, 0.45, 0.6)
ALPHA = 0.05
POWER = 0.8
TARGET_PIECES = 16
TARGET_RATIO = 1 / 3
#: Adaptive runs: at most this many rounds (one repeat of every task each), --min-effect 0.2.
MAX_ROUNDS = {"screening": 12, "one-out": 60}
MIN_EFFECT = 0.2


def measure(
    k: int, design_name: str, runs: int, null_runs: int, rng: np.random.Generator
) -> dict[str, float]:
    """Repeats and sessions for 80% power, the detection rates there, and the null family-wise error."""
    design = make_design(design_name, [f"piece-{i}" for i in range(k)])
    planted = planted_pair(k, EFFECT, RATES)
    found = repeats_for_power(design, planted, power=POWER, alpha=ALPHA, runs=runs, rng=rng)
    if found is None:
        raise RuntimeError(f"{design_name} at {k} pieces: 80% power not reached")
    repeats, rates = found
    null = Planted(RATES, (0.0,) * k)
    return {
        "rows": len(design.rows),
        "repeats": repeats,
        "sessions": repeats * len(design.rows) * len(RATES),
        "power": float(rates.min()),
        "fwer": family_wise_error(simulate(design, null, repeats, null_runs, rng), null, ALPHA),
        "fwer_min": family_wise_error(simulate(design, null, 1, null_runs, rng), null, ALPHA),
    }


def measure_adaptive(k: int, design_name: str, runs: int, rng: np.random.Generator) -> list[object]:
    """An adaptive run's row: sessions by which both planted pieces are real in 80% of runs, the median
    sessions until every piece is decided, and the family-wise error with a look after every round."""
    design = make_design(design_name, [f"piece-{i}" for i in range(k)])
    rounds = MAX_ROUNDS[design_name]
    planted = planted_pair(k, EFFECT, RATES)
    sim = simulate_adaptive(design, planted, rounds, runs, rng, alpha=ALPHA, min_effect=MIN_EFFECT)
    both = (sim.decisions[:, [0, k // 2], :] == 1).all(axis=1).mean(axis=0)  # per look
    at80 = int(np.argmax(both >= POWER)) + 1 if (both >= POWER).any() else None
    decided = float(np.median(rounds_to_decide(sim)))
    null = Planted(RATES, (0.0,) * k)
    nsim = simulate_adaptive(design, null, rounds, runs, rng, alpha=ALPHA, min_effect=MIN_EFFECT)
    per_round = sim.sessions_per_round
    return [
        k,
        design_name,
        rounds * per_round,
        "not reached" if at80 is None else at80 * per_round,
        "not reached" if decided > rounds else int(decided * per_round),
        f"{ever_real(nsim, range(k)):.3f}",
    ]


def main() -> None:
    runs = int(os.environ.get("ABLATE_BENCH_SIMS", "1000"))
    null_runs = 10 * runs
    rng = np.random.default_rng(20261201)
    se = math.sqrt(ALPHA * (1 - ALPHA) / null_runs)
    got = {(k, d): measure(k, d, runs, null_runs, rng) for k in PIECES for d in DESIGNS}
    rows = [
        [
            k,
            d,
            int(m["rows"]),
            int(m["repeats"]),
            int(m["sessions"]),
            f"{m['power']:.3f}",
            f"{m['fwer']:.3f}",
            f"{m['fwer_min']:.3f}",
        ]
        for (k, d), m in got.items()
    ]
    print(
        f"one piece helps by {EFFECT}, one hurts by {EFFECT}, the rest null; {len(RATES)} tasks, control rates "
        f"{RATES}; Holm at α {ALPHA}; {runs} runs per power step, {null_runs} null runs (FWER ± {se:.3f})"
    )
    print(
        tabulate(
            rows,
            headers=[
                "pieces",
                "design",
                "cells",
                "repeats for 80%",
                "sessions",
                "power (weaker piece)",
                "FWER there",
                "FWER at 1 repeat",
            ],
        )
    )
    print(
        f"adaptive (a look after every round, at most {MAX_ROUNDS} rounds, --min-effect {MIN_EFFECT}; {runs} runs)"
    )
    print(
        tabulate(
            [measure_adaptive(k, d, runs, rng) for k in PIECES for d in DESIGNS],
            headers=["pieces", "design", "max sessions", "both found (80%)", "all decided (median)", "FWER"],
        )
    )
    screen, one_out = got[(TARGET_PIECES, "screening")], got[(TARGET_PIECES, "one-out")]
    ratio = screen["sessions"] / one_out["sessions"]
    worst = max(m[f] for m in got.values() for f in ("fwer", "fwer_min"))
    print(
        f"at {TARGET_PIECES} pieces screening needs {ratio:.2f} of one-out's sessions "
        f"({int(screen['sessions'])} against {int(one_out['sessions'])}; target ≤ {TARGET_RATIO:.2f}): "
        + ("met" if ratio <= TARGET_RATIO else "NOT met")
    )
    print(
        f"largest family-wise error under the null: {worst:.3f} (α {ALPHA}, Monte Carlo se {se:.3f}): "
        + ("≤ α" if worst <= ALPHA else "ABOVE α" if worst > ALPHA + 2 * se else "within 2 se of α")
    )


if __name__ == "__main__":
    main()

"""What ``--min-effect`` means at the default design: how a cell with a true effect Δ ends (simulated).

An adaptive run at the defaults (``--max-repeats 20``, ``--min-effect 0.2``, α 0.05, β 0.05) on 5 tasks at a
base rate of ½ with 4 cells against the control, all with the same planted effect Δ: the share of cells that
end real, "no effect of interest" (a draw) and undecided at max-repeats (``benchmarks.adaptive_sim``, the very
functions a run uses). The figures back ``--min-effect``'s help: an effect below min-effect is not simply "a
draw" — most often the run ends undecided about it.

``python -m benchmarks.run min_effect`` (sims: ``ABLATE_BENCH_SIMS``, default 4000).
Measured (4,000 runs): Δ 0 — real 0.004, draw 0.497, undecided 0.499; Δ 0.1 — real 0.049, draw 0.247,
undecided 0.704; Δ 0.2 — real 0.423, draw 0.029, undecided 0.548; Δ 0.3 — real 0.930, draw 0.001.
"""

from __future__ import annotations

import math
import os

import numpy as np
from tabulate import tabulate

from ablate.stats.sequential import NO_EFFECT, REAL, UNDECIDED
from benchmarks.adaptive_sim import Scenario, draw, run_adaptive

TASKS = 5
CELLS = 4
ROUNDS = 20
MIN_EFFECT = 0.2
EFFECTS = (0.0, 0.1, 0.2, 0.3)


def ends(effect: float, sims: int, rng: np.random.Generator) -> dict[str, float]:
    """Share of cells with a true effect ``effect`` that end real, a draw, undecided."""
    scenario = Scenario(f"Δ {effect}", (0.5,) * TASKS, (effect,) * CELLS)
    out = run_adaptive(
        draw(scenario, sims, ROUNDS, rng), TASKS, alpha=0.05, min_effect=MIN_EFFECT, max_repeats=ROUNDS
    )
    return {
        k: float(np.mean(out.decision == code))
        for k, code in (("real", REAL), ("draw", NO_EFFECT), ("undecided", UNDECIDED))
    }


def main() -> None:
    sims = int(os.environ.get("ABLATE_BENCH_SIMS", "4000"))
    rng = np.random.default_rng(20261201)
    n = sims * CELLS
    rows = []
    for effect in EFFECTS:
        got = ends(effect, sims, rng)
        se = {k: math.sqrt(v * (1 - v) / n) for k, v in got.items()}
        rows.append(
            [f"{effect:+.1f}", *(f"{got[k]:.3f} ± {se[k]:.3f}" for k in ("real", "draw", "undecided"))]
        )
    print(
        f"{CELLS} cells × {TASKS} tasks at base ½, at most {ROUNDS} rounds, --min-effect {MIN_EFFECT}, "
        f"α 0.05, β 0.05; {sims} runs"
    )
    print(tabulate(rows, headers=["true Δ", "real", "no effect (draw)", "undecided"]))


if __name__ == "__main__":
    main()

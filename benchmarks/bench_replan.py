"""Adaptive piece runs that re-plan against whole-design rounds: sessions saved, at what error (simulated).

Under the session model of ``benchmarks/screening_sim.py`` (a model, not the CLI), each simulated run is driven
as ``ablate run --pieces --adaptive`` drives it (:func:`benchmarks.screening_sim.adaptive_piece_run`: the library's
look after every round, :func:`ablate.stats.screening_sequential.should_replan`'s rule) twice from the same seed:
with whole-design rounds to the end (the runs before re-planning), and re-planning — rounds of the control and
the one-out cell of each piece still undecided once the rule says so. The two runs share every round before the
first re-plan, so the sessions saved are paired. Per policy: sessions (mean ± se), the family-wise error of the
null pieces (some null piece ever called real) and the power on the planted ones (found real with the right
sign), each ± its Monte Carlo se; the null pieces called a draw (the rest end undecided) and the runs that
re-planned. 4 tasks (control rates 0.55, 0.65, 0.45, 0.6), α 0.05, min effect 0.2, draw error 0.05; a drawn
screening design of 8 pieces (24 cells a round) at most 12 rounds, one-out of 3 pieces at most 20.

``python -m benchmarks.run replan`` (runs per row: ``ABLATE_BENCH_SIMS``, default 100; two processes). Measured
(100 runs per row, 41 min on a loaded 2-core machine); sessions saved against whole designs, FWER and power each
± one Monte Carlo se, null pieces called a draw:

- 8 pieces, one helps 30 pts and one hurts 30 (whole designs: 1120 ± 6 sessions, FWER 0.050 ± 0.022, power
  1.000, draw 0.86): re-plan at the default share 1/6 saves 13.0% ± 0.6 (974 sessions) at FWER 0.050 and power
  1.000, draw 0.82; at share 1/4, 20.9% ± 0.7 at the same FWER and power, draw 0.73.
- 8 pieces, all null (1141 ± 3, FWER 0.010 ± 0.022, draw 0.79): share 1/6 saves 7.7% ± 0.6 (FWER 0.010, draw
  0.81); share 1/4, 12.7% ± 0.6 (draw 0.78).
- one-out, 3 pieces, one helps 40 pts (318 ± 1, FWER 0.010, power 0.970 ± 0.022): re-planning saves 13.7% ± 0.7
  at FWER 0.010 and power 0.970; all null (320): 3.1% ± 0.4 at FWER 0.010.

The same runs flag a null piece either way (false positives come early, before any re-plan), so the error rates
are equal; what re-planning costs is fewer null pieces called a draw once the rounds are one-out (a one-out
contrast rests on two sessions), which is why the screening share is 1/6, not 1/4.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from tabulate import tabulate

from ablate.stats.screening_sequential import REPLAN_SHARE
from benchmarks.screening_sim import PieceRun, Planted, adaptive_piece_run

ALPHA = 0.05
MIN_EFFECT = 0.2
RATES = (0.55, 0.65, 0.45, 0.6)


@dataclass(frozen=True)
class Case:
    name: str
    design: str
    planted: Planted
    rounds: int


CASES = [
    Case(
        "8 pieces: one helps 30 pts, one hurts 30",
        "screening",
        Planted(RATES, (0.3, 0, 0, 0, -0.3, 0, 0, 0)),
        12,
    ),
    Case("8 pieces, all null", "screening", Planted(RATES, (0.0,) * 8), 12),
    Case("3 pieces (one-out): one helps 40 pts", "one-out", Planted(RATES, (0.4, 0.0, 0.0)), 20),
    Case("3 pieces (one-out), all null", "one-out", Planted(RATES, (0.0,) * 3), 20),
]
#: Per case, the re-plan shares measured beside whole designs (one-out rounds of a one-out design only shrink).
SHARES = {"screening": (REPLAN_SHARE, 0.25), "one-out": (1.0,)}


def one(case: Case, replan: float | None, seed: int) -> PieceRun:
    return adaptive_piece_run(
        case.design, case.planted, case.rounds, np.random.default_rng([2027, seed]), replan=replan,
        alpha=ALPHA, min_effect=MIN_EFFECT,
    )  # fmt: skip


def rate(hits: list[bool]) -> str:
    """A share with its Monte Carlo se (binomial)."""
    if not hits:
        return "–"
    p = float(np.mean(hits))
    return f"{p:.3f} ± {math.sqrt(max(p * (1 - p), ALPHA * (1 - ALPHA)) / len(hits)):.3f}"


def row(case: Case, policy: str, runs: list[PieceRun], whole: list[PieceRun]) -> list[object]:
    effects = case.planted.effects
    null = [j for j, e in enumerate(effects) if e == 0]
    planted = [j for j, e in enumerate(effects) if e != 0]
    sessions = np.array([r.sessions for r in runs], dtype=float)
    saved = 1 - sessions / np.array([r.sessions for r in whole], dtype=float)
    n = len(runs)
    return [
        case.name,
        policy,
        f"{sessions.mean():.0f} ± {sessions.std() / math.sqrt(n):.0f}",
        "–" if runs is whole else f"{100 * saved.mean():.1f}% ± {100 * saved.std() / math.sqrt(n):.1f}",
        rate([any(r.decisions[j] == "real" for j in null) for r in runs]),
        rate([r.verdicts[j] == ("helps" if effects[j] > 0 else "hurts") for r in runs for j in planted]),
        f"{np.mean([r.decisions[j] == 'no-effect' for r in runs for j in null]):.2f}",
        f"{np.mean([r.replanned is not None for r in runs]):.2f}",
    ]


def main() -> None:
    sims = int(os.environ.get("ABLATE_BENCH_SIMS", "100"))
    started = time.monotonic()
    rows = []
    with ProcessPoolExecutor(max_workers=2) as pool:
        for case in CASES:
            policies: list[tuple[str, float | None]] = [("whole designs", None)]
            policies += [
                (f"re-plan (share {s:.2g})" if case.design == "screening" else "re-plan", s)
                for s in SHARES[case.design]
            ]
            got = {
                name: list(pool.map(one, [case] * sims, [share] * sims, range(sims)))
                for name, share in policies
            }
            whole = got["whole designs"]
            for name, runs in got.items():
                rows.append(row(case, name, runs, whole))
                print(f"  {case.name}, {name}: {time.monotonic() - started:.0f} s", flush=True)
    print(
        f"{sims} simulated runs per row (paired: the same seeds); α {ALPHA}, min effect {MIN_EFFECT}; ± one Monte "
        "Carlo se"
    )
    headers = [
        "case", "policy", "sessions", "saved", "FWER (null pieces)", "power (planted)", "null pieces: draw",
        "runs re-planned",
    ]  # fmt: skip
    print(tabulate(rows, headers=headers, tablefmt="github"))

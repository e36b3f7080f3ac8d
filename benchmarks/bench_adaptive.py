"""Adaptive against fixed runs: sessions used, power and false positives over planted scenarios (simulated).

Per scenario both designs see the same simulated outcomes (``benchmarks.adaptive_sim``):

* fixed (min-effect): the repeats ``ablate.stats.runs_needed_binary`` says find an effect of ``--min-effect``
  with 80% power at α/m (Holm's first step) — the run a user plans when effect sizes are unknown;
  The goal (at least 40% fewer sessions on the mixed scenario at no loss of power and no excess false
  positives) is judged against this design: power on the planted cells, FWER over the null ones;
* fixed (same power): the fewest repeats whose simulated power on the planted cells reaches the adaptive
  design's (an oracle that knew the effect sizes in advance; all-null scenarios have no power to match), and
  in brackets what the adaptive design saves against it (negative: the oracle needs fewer sessions);
* adaptive: ``max_repeats`` = the fixed (min-effect) repeats, a look after every round; the draw error β
  (the chance a cell with an effect of at least min-effect is called "no effect") is 0.05 by default; the last
  rows show β = 0.1 and 0.2 on the mixed scenario (more sessions saved, more planted effects called a draw).
  "planted missed" splits the planted cells not found real into those called "no effect" and those still
  undecided at max-repeats.

Also the wall time of one look's analysis (``ablate.stats.adaptive.analyse``) on a run of 11 cells, 5 tasks and
20 rounds: it must not slow a run whose sessions take tens of seconds.

``python -m benchmarks.run adaptive`` (sims: ``ABLATE_BENCH_SIMS``, default 2000).
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

from ablate.core.constants import DEFAULT_DRAW_BETA
from ablate.stats.power import runs_needed_binary
from benchmarks.adaptive_sim import Scenario, draw, rates_of, run_adaptive, run_fixed

ALPHA = 0.05
MIN_EFFECT = 0.2
SCENARIOS = [
    Scenario("mixed: 3 strong + 5 null", (0.4, 0.5, 0.6, 0.5, 0.5), (0.35, 0.35, -0.35, 0, 0, 0, 0, 0)),
    Scenario("all null", (0.3, 0.5, 0.7, 0.5, 0.6), (0.0,) * 8),
    Scenario("one small effect (= min effect)", (0.5,) * 5, (0.2, 0.0, 0.0, 0.0)),
]


def _fixed_repeats(scenario: Scenario) -> int:
    base = float(np.mean(scenario.base_rates))
    n = runs_needed_binary(base, base + MIN_EFFECT, alpha=ALPHA / len(scenario.effects))
    assert isinstance(n, int)
    return -(-n // len(scenario.base_rates))


def _se(rate: float, n: int) -> str:
    """A rate with its Monte-Carlo standard error (binomial, n trials)."""
    return "–" if np.isnan(rate) else f"{rate:.4f} ± {math.sqrt(max(rate * (1 - rate), 0.0) / n):.4f}"


def _power(rate: float, n: int) -> str:
    """Power with its s.e. and the planted cells missed (the s.e. of a rate of 1 is 0: the count says more)."""
    return "–" if np.isnan(rate) else f"{_se(rate, n)} ({round((1 - rate) * n)} of {n} missed)"


def _row(
    scenario: Scenario, sims: int, rng: np.random.Generator, beta: float = DEFAULT_DRAW_BETA
) -> list[object]:
    tasks = len(scenario.base_rates)
    repeats = _fixed_repeats(scenario)
    draws = draw(scenario, sims, repeats, rng)
    out = run_adaptive(draws, tasks, alpha=ALPHA, min_effect=MIN_EFFECT, max_repeats=repeats, draw_beta=beta)
    a = rates_of(out, scenario.effects)
    eff = np.asarray(scenario.effects)
    planted, null = eff != 0, eff == 0
    fixed = run_fixed(draws, tasks, repeats, alpha=ALPHA)
    f_power = float(fixed.real[:, planted].mean()) if planted.any() else float("nan")
    f_fwer = float((fixed.real[:, null]).any(axis=1).mean()) if null.any() else float("nan")
    matched: int | None = None  # the oracle fixed design: fewest repeats reaching the adaptive power
    for r in range(1, repeats + 1) if planted.any() else ():
        if (f := run_fixed(draws, tasks, r, alpha=ALPHA)).real[:, planted].mean() >= a["power"]:
            matched = f.sessions
            break
    n_planted = sims * int(planted.sum())
    saved_se = float(np.std(out.sessions)) / math.sqrt(sims) / fixed.sessions
    return [
        scenario.name + ("" if beta == DEFAULT_DRAW_BETA else f" (draw error {beta})"),
        f"{a['sessions']:.0f}",
        fixed.sessions,
        f"{100 * (1 - a['sessions'] / fixed.sessions):.1f}% ± {100 * saved_se:.1f}",
        "–" if matched is None else f"{matched} ({100 * (1 - a['sessions'] / matched):+.0f}%)",
        _power(a["power"], n_planted),
        _power(f_power, n_planted),
        "–" if np.isnan(a["power"]) else f"{a['planted_no_effect']:.4f} / {a['planted_undecided']:.4f}",
        _se(a["fwer"], sims),
        _se(f_fwer, sims),
        f"{a['no_effect_null']:.2f}",
        f"{a['undecided']:.2f}",
    ]


def _analysis_seconds() -> float:
    """Wall time of one look on 11 cells × 5 tasks × 20 rounds (results in memory: no disk reads)."""
    from ablate.core.claude import ClaudeBinary
    from ablate.folder.adaptive import AdaptiveOptions, control_of
    from ablate.folder.result import ItemResult
    from ablate.run.create import create_run
    from ablate.setup.cells import load_cell_set
    from ablate.setup.layers import load_catalog
    from ablate.setup.tasks import load_task
    from ablate.stats.adaptive import analyse

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tasks = []
        for i in range(5):
            path = root / f"t{i}.toml"
            path.write_text(f'id = "t{i}"\nprompt = "p"\n')
            tasks.append(load_task(path))
        exe = root / "claude"
        exe.write_text("")
        cs = load_cell_set("layered", load_catalog())
        folder, manifest = create_run(
            root / "runs", tasks=tasks, cell_set=cs.name, cells=list(cs.cells), repeats=20, seed=1,
            model="claude-sonnet-4-6", max_turns=5, claude=ClaudeBinary(path=exe, version="2.1.332", sha256="0" * 64),
        )  # fmt: skip
        rng = random.Random(0)
        results = [
            ItemResult(
                item=p.item, task=p.task, cell=p.cell, repeat=p.repeat, order=p.order, attempt=1,
                session_id="s", status="completed",
                pitfall_hits={} if rng.random() < 0.6 else {"x": 1},
            )
            for p in folder.read_plan()
        ]  # fmt: skip
        options = AdaptiveOptions(max_repeats=20, min_effect=MIN_EFFECT, alpha=ALPHA)
        t0 = time.perf_counter()
        analyse(manifest, results, options, control_of(manifest))
        return time.perf_counter() - t0


def main() -> None:
    sims = int(os.environ.get("ABLATE_BENCH_SIMS", "2000"))
    rng = np.random.default_rng(2026)
    rows = []
    cases = [(s, DEFAULT_DRAW_BETA) for s in SCENARIOS] + [(SCENARIOS[0], 0.1), (SCENARIOS[0], 0.2)]
    for scenario, beta in cases:
        t0 = time.perf_counter()
        rows.append(_row(scenario, sims, rng, beta))
        print(f"  {scenario.name}, draw error {beta}: {time.perf_counter() - t0:.1f} s", flush=True)
    headers = [
        "scenario", "adaptive sessions", "fixed (min-effect) sessions", "saved vs min-effect",
        "fixed (same power) sessions (adaptive saves)", "adaptive power", "fixed (min-effect) power",
        "planted missed: no effect / undecided", "adaptive FWER", "fixed FWER", "null cells: no effect",
        "cells undecided",
    ]  # fmt: skip
    print(
        f"{sims} simulated runs per scenario; alpha {ALPHA}, min effect {MIN_EFFECT}, draw error "
        f"{DEFAULT_DRAW_BETA}; power over the planted cells, FWER over runs (± one Monte-Carlo s.e.)"
    )
    print(tabulate(rows, headers=headers, tablefmt="github"))
    print(f"analysis of one look (11 cells x 5 tasks x 20 rounds): {_analysis_seconds():.3f} s")


if __name__ == "__main__":
    main()

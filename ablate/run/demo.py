"""The pieces of ``ablate demo`` that are not presentation: where the demo lives and the experiment it runs."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.core.errors import UsageError
from ablate.folder.metrics import DEFAULT_PRIMARY, fmt_delta, metric_named

MARKER = ".ablate-demo"


def prepare_demo_folder(out: Path) -> Path:
    """Create (or empty) the demo folder; refuse to empty a folder ablate did not make for a demo."""
    out = out.resolve()
    if (out / MARKER).exists():
        shutil.rmtree(out)
    elif out.exists() and any(out.iterdir()):
        raise UsageError(
            f"{out}: exists and is not an ablate demo folder", hint="pick another --out or remove it"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by `ablate demo`; removed by the next demo run\n")
    return out


# ----------------------------------------------------------------------------------------------------------
# The demo's experiment: a cell set and a number of repeats chosen from the planted truth.

#: Pitfall-free rate of a task when the layer it depends on reached the model, and when it did not
#: (shadow/sim/demo.toml plants these).
PLANTED_WITH = 0.9
PLANTED_WITHOUT = 0.1
#: The demo's tasks: each depends on one layer of the demo cell set.
DEMO_TASKS = ("greet-exclaim", "no-framework")

#: The demo's cells: id, label, the layers it strips (two planted layers, one that does nothing (null), one the
#: example setup lacks (no-op)).
_DEMO_CELL_ROWS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("C0", "everything (control)", ()),
    ("C1", "no user-claude-md (planted: greet-exclaim needs it)", ("user-claude-md",)),
    ("C2", "no axioms (null: the simulated model ignores it)", ("axioms",)),
    ("C8", "no decisions (planted: no-framework needs it)", ("decisions",)),
    ("C12", "no output-styles (no-op: the example setup has none)", ("output-styles",)),
)
#: The demo's cell set, as the cells.toml it writes.
DEMO_CELLS = """\
# The demo's cell set (written by `ablate demo`): the control, two layers the simulated model depends on,
# one it ignores, and one the example setup does not have.
schema_version = 1
name = "demo"
description = "Demo: two planted layers (C1, C8), one null layer (C2), one no-op cell (C12)"
control = "C0"
universe = ["repo-memory", "runbooks", "decisions", "findings", "handoffs-plans"]
""" + "".join(
    f'\n[[cell]]\nid = "{cid}"\nlabel = "{label}"\nstrip = {json.dumps(list(strip))}\n'
    for cid, label, strip in _DEMO_CELL_ROWS
)


#: Pitfall-free rates the simulated model plants, per tested cell and task (the control has PLANTED_WITH on
#: both): C1 strips what greet-exclaim needs, C8 what no-framework needs, C2 something the model ignores.
PLANTED_RATES: dict[str, dict[str, float]] = {
    "C1": {"greet-exclaim": PLANTED_WITHOUT, "no-framework": PLANTED_WITH},
    "C2": {"greet-exclaim": PLANTED_WITH, "no-framework": PLANTED_WITH},
    "C8": {"greet-exclaim": PLANTED_WITH, "no-framework": PLANTED_WITHOUT},
}
#: The plain A/B (`ablate demo --with-ab`): C11 (no setup) against C0 on three tasks; deploy-command answers
#: deterministically (without lessons or the runbook it guesses the region).
AB_RATES: dict[str, dict[str, float]] = {
    "C11": {"deploy-command": 0.0, "greet-exclaim": PLANTED_WITHOUT, "no-framework": PLANTED_WITHOUT}
}
AB_CONTROL = {"deploy-command": 1.0, "greet-exclaim": PLANTED_WITH, "no-framework": PLANTED_WITH}
#: The A/A control the demo adds (``run --aa``: the control's id + "b"): a second copy of C0 built and run on
#: its own, so a null cell by construction, and the run's measured noise floor.
AA_CELL = "C0b"
#: The demo's rates with the A/A cell: it is one more comparison of the primary family (Holm over four), so the
#: demo's repeats are chosen with it in the family (and as a null cell it must not be marked real).
AA_RATES: dict[str, dict[str, float]] = {**PLANTED_RATES, AA_CELL: dict.fromkeys(DEMO_TASKS, PLANTED_WITH)}
#: The facts the demo's report must show: the planted layers help, the null one is not real on the primary
#: metric (C12, a no-op, is labelled by construction and checked too).
PLANTED_HELPS = ("C1", "C8")
PLANTED_NULL = ("C2",)
NO_OP = "C12"
#: The probability the demo's design must recover every planted fact with.
RECOVERY_TARGET = 0.99
#: The family-wise error the demo's reports mark "real" at. At 0.05 Holm leaves a null cell (C2, or the A/A
#: control) marked real in 2-3% of runs whatever the repeats, so no design could recover the whole planted
#: truth with 99%; at 0.01 the fewest repeats that find the planted effects keep the null cells clean too.
DEMO_ALPHA = 0.01
#: Simulated runs behind a recovery figure (fixed seed: the figure is the same every time it is computed).
RECOVERY_SIMS = 20_000


@dataclass(frozen=True)
class Recovery:
    """How often a design recovers the planted truth."""

    effects: float
    """Every planted layer found real, helping."""
    everything: float
    """That, and no null cell marked real (Holm keeps a false mark below alpha): the whole planted truth on
    the primary metric, what the demo checks."""


@dataclass(frozen=True)
class DemoDesign:
    """How many repeats the demo runs, and why."""

    repeats: int
    recovery: Recovery
    """How often a run of this design recovers the planted truth (simulated, :data:`RECOVERY_SIMS` runs)."""
    comparisons: int
    """Comparisons in the primary family (Holm's family size): one per tested cell."""


def recovery_probability(
    repeats: int,
    rates: dict[str, dict[str, float]] = PLANTED_RATES,
    *,
    helps: tuple[str, ...] = PLANTED_HELPS,
    control: dict[str, float] | None = None,
    alpha: float = DEMO_ALPHA,
    sims: int = RECOVERY_SIMS,
    seed: int = 0,
) -> Recovery:
    """The share of ``sims`` simulated runs whose primary family (each cell's pooled pitfall-free rate against
    the control, paired on (task, repeat) blocks, exact test on discordant blocks, Holm over the testable ones:
    what the report computes) marks every cell of ``helps`` real with a loss when stripped (and of those, the
    share that marks no other cell real). Every session is an independent draw, as the simulated model's are
    (keyed by task, cell and repeat)."""
    import numpy as np

    from ablate.stats.proportions import exact_paired_p

    rng = np.random.default_rng(seed)
    cells = list(rates)
    tasks = list(next(iter(rates.values())))
    base = control or dict.fromkeys(tasks, PLANTED_WITH)
    ctl = np.concatenate([rng.random((sims, repeats)) < base[t] for t in tasks], axis=1)
    p = np.empty((sims, len(cells)))
    delta = np.empty((sims, len(cells)))
    for j, cell in enumerate(cells):
        outcome = np.concatenate([rng.random((sims, repeats)) < rates[cell][t] for t in tasks], axis=1)
        gained = (outcome & ~ctl).sum(axis=1)
        lost = (~outcome & ctl).sum(axis=1)
        p[:, j] = exact_paired_p(gained, lost)
        delta[:, j] = gained - lost
    testable = ~np.isnan(p)
    m = testable.sum(axis=1, keepdims=True)
    order = np.argsort(np.where(testable, p, 2.0), axis=1, kind="stable")
    ranked = np.take_along_axis(np.where(testable, p, 1.0), order, axis=1)
    adjusted_sorted = np.maximum.accumulate(np.minimum(1.0, ranked * (m - np.arange(len(cells)))), axis=1)
    adjusted = np.empty_like(adjusted_sorted)
    np.put_along_axis(adjusted, order, adjusted_sorted, axis=1)
    real = testable & (adjusted <= alpha) & (delta != 0)
    want = np.array([c in helps for c in cells])
    found = np.all(real[:, want] & (delta[:, want] < 0), axis=1)
    clean = found & ~np.any(real[:, ~want], axis=1)
    return Recovery(float(found.mean()), float(clean.mean()))


def demo_design(
    rates: dict[str, dict[str, float]] = PLANTED_RATES,
    *,
    helps: tuple[str, ...] = PLANTED_HELPS,
    control: dict[str, float] | None = None,
    target: float = RECOVERY_TARGET,
) -> DemoDesign:
    """The fewest repeats whose runs recover the whole planted truth with probability ``target``, by bisection
    (the figure grows with the repeats, up to the exact test's discreteness of a few tenths of a point)."""

    if not metric_named(DEFAULT_PRIMARY).binary:  # the simulation below is the exact test of a rate
        raise UsageError(f"demo design: the primary metric {DEFAULT_PRIMARY} is not a rate")

    def chance(n: int) -> Recovery:
        return recovery_probability(n, rates, helps=helps, control=control)

    low, high = 1, 64
    if chance(high).everything < target:
        raise UsageError(f"demo design: {high} repeats do not recover the planted truth with {target:.0%}")
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if chance(mid).everything >= target else (mid, high)
    return DemoDesign(high, chance(high), len(rates))


@dataclass(frozen=True)
class Fact:
    """One planted fact and what the report says about it."""

    claim: str
    recovered: bool
    found: str


def planted_facts(report: dict[str, Any], *, aa: bool = False) -> list[Fact]:
    """What a demo report (report.json) says about each planted fact (with ``aa``: the A/A control's too)."""
    ranking = {str(e.get("cell")): e for e in report.get("ranking", []) if isinstance(e, dict)}
    primary = report.get("primary_metric", DEFAULT_PRIMARY)
    pooled = {
        str(c.get("cell")): c
        for c in report.get("comparisons", [])
        if isinstance(c, dict) and c.get("task") is None and c.get("metric") == primary
    }
    facts = []
    for cell in PLANTED_HELPS:
        verdict = str(ranking.get(cell, {}).get("verdict", "not ranked"))
        facts.append(Fact(f"{cell} helps", verdict == "helps", f"verdict {verdict}"))
    for cell in PLANTED_NULL:
        facts.append(_null_fact(f"{cell} makes no real difference to {primary}", pooled.get(cell)))
    no_op = {str(c.get("cell")) for c in report.get("no_op_cells", []) if isinstance(c, dict)}
    facts.append(
        Fact(f"{NO_OP} is a no-op", NO_OP in no_op, "labelled no-op" if NO_OP in no_op else "tested")
    )
    if aa:
        facts.append(_aa_fact(report, ranking, primary))
    return facts


def _aa_fact(report: dict[str, Any], ranking: dict[str, Any], primary: str) -> Fact:
    """The A/A control is never ranked and differs from C0 for real on no primary outcome."""
    rows = [r for r in report.get("noise_floor", []) if isinstance(r, dict) and r.get("cell") == AA_CELL]
    claim = f"{AA_CELL} (the A/A control) makes no real difference to {primary}"
    row = next((r for r in rows if r.get("metric") == primary), None)
    if row is None:
        return Fact(claim, False, f"no noise floor for {primary} in the report")
    if AA_CELL in ranking:
        return Fact(claim, False, "ranked as a layer")
    return _null_fact(claim, row)


def _null_fact(claim: str, row: dict[str, Any] | None) -> Fact:
    """A null cell's fact from its primary comparison (a report row with ``real`` and ``p_adjusted``)."""
    if not row:
        return Fact(claim, False, "not in the report")
    p = row.get("p_adjusted")
    found = (
        "real" if row.get("real") else f"not real (Holm p {p:.3f})" if isinstance(p, float) else "not real"
    )
    return Fact(claim, not row.get("real"), found)


def noise_floor_lines(report: dict[str, Any]) -> list[str]:
    """The report's measured A/A noise floor (report.json ``noise_floor``), one line per metric."""
    out = []
    for r in report.get("noise_floor", []):
        if not isinstance(r, dict):
            continue
        metric, flips, spread, delta, p = (
            r.get(k) for k in ("metric", "flip_rate", "spread", "delta", "p_adjusted")
        )
        parts = (
            [f"flips in {100 * flips:.0f}% of {r.get('blocks')} blocks"] if isinstance(flips, float) else []
        )
        parts += [f"spread (sd of Δ) {spread:.3g}"] if isinstance(spread, float) else []
        parts += [f"Δ {fmt_delta(str(metric), delta)}"] if isinstance(delta, float) else []
        parts += [f"adjusted p {p:.3g}"] if isinstance(p, float) else []
        out.append(f"{metric}: {', '.join(parts) or 'no blocks'}{' — REAL' if r.get('real') else ''}")
    return out


def write_demo_cells(root: Path) -> Path:
    """Write the demo's cell set into the demo folder and return its path."""
    path = root / "cells-demo.toml"
    path.write_text(DEMO_CELLS)
    return path

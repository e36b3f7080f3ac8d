"""The pieces of ``ablate demo`` that are not presentation: where the demo lives and the experiment it runs."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ablate.core.errors import UsageError

MARKER = ".ablate-demo"


def prepare_demo_folder(out: Path) -> Path:
    """Create (or empty) the demo folder; refuse to empty a folder ablate did not make for a demo."""
    out = out.resolve()
    if out.exists():
        if not (out / MARKER).exists():
            if any(out.iterdir()):
                raise UsageError(
                    f"{out}: exists and is not an ablate demo folder", hint="pick another --out or remove it"
                )
        else:
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by `ablate demo`; removed by the next demo run\n")
    return out


# ----------------------------------------------------------------------------------------------------------
# The demo's experiment: a cell set and a number of repeats chosen from the planted truth.

#: Pitfall-free rate of a task when the layer it depends on reached the model, and when it did not
#: (shadow/sim/demo.toml plants these).
PLANTED_WITH = 0.9
PLANTED_WITHOUT = 0.1
#: Metrics a demo report compares: the four of every report and checks_passed (greet-exclaim has checks);
#: counting them all gives Holm's family an upper bound, so the power the demo claims is a lower bound.
REPORT_METRICS = 5
#: The demo's tasks: each depends on one layer of the demo cell set.
DEMO_TASKS = ("greet-exclaim", "no-framework")

#: The demo's cell set: two planted layers, one that does nothing (null), one the example setup lacks (no-op).
DEMO_CELLS = """\
# The demo's cell set (written by `ablate demo`): the control, two layers the simulated model depends on,
# one it ignores, and one the example setup does not have.
schema_version = 1
name = "demo"
description = "Demo: two planted layers (C1, C8), one null layer (C2), one no-op cell (C12)"
control = "C0"
universe = ["repo-memory", "runbooks", "decisions", "findings", "handoffs-plans"]

[[cell]]
id = "C0"
label = "everything (control)"
strip = []

[[cell]]
id = "C1"
label = "no user-claude-md (planted: greet-exclaim needs it)"
strip = ["user-claude-md"]

[[cell]]
id = "C2"
label = "no axioms (null: the simulated model ignores it)"
strip = ["axioms"]

[[cell]]
id = "C8"
label = "no decisions (planted: no-framework needs it)"
strip = ["decisions"]

[[cell]]
id = "C12"
label = "no output-styles (no-op: the example setup has none)"
strip = ["output-styles"]
"""


@dataclass(frozen=True)
class DemoDesign:
    """How many repeats the demo runs, and why."""

    repeats: int
    comparisons: int
    """Comparisons the report will make (Holm's family size)."""
    alpha_each: float
    """Holm's strictest step: alpha / comparisons."""
    power: float
    """Exact power of one planted per-task comparison at that alpha with ``repeats`` blocks."""


def demo_design(tasks: int, tested_cells: int, alpha: float = 0.05, power: float = 0.8) -> DemoDesign:
    """Repeats for which every planted per-task effect is found with ``power`` after Holm's correction."""
    from ablate.stats import power_binary, runs_needed_binary

    comparisons = tested_cells * REPORT_METRICS * (tasks + 1 if tasks > 1 else 1)
    alpha_each = alpha / comparisons
    need = runs_needed_binary(PLANTED_WITH, PLANTED_WITHOUT, alpha_each, power)
    if not isinstance(need, int):  # pragma: no cover - the planted rates always give a finite figure
        raise UsageError(f"demo design: {need.reason}")
    return DemoDesign(
        need, comparisons, alpha_each, power_binary(need, PLANTED_WITH, PLANTED_WITHOUT, alpha_each)
    )


def write_demo_cells(root: Path) -> Path:
    """Write the demo's cell set into the demo folder and return its path."""
    path = root / "cells-demo.toml"
    path.write_text(DEMO_CELLS)
    return path

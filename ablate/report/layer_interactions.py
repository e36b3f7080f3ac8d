"""Each layer's total interaction with the rest of the setup (``--cells layered+leave-one-in``,
docs/PIECES.md#interactions): per block (C0 − Cn) − (Kn − C11), what removing it from everything does against
what it does alone; their mean, t interval and sign-flip p (:func:`ablate.report.paired.zero_tests`), Holm over
the layers."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ablate.folder.layout import ManifestCell
from ablate.folder.metrics import fmt_delta
from ablate.report.context import Context, Section
from ablate.report.families import side_values
from ablate.report.interactions import interaction_section, tested
from ablate.report.model import Report
from ablate.report.paired import fmt_tested

KEY = "layer_interactions"


def quartets(ctx: Context) -> list[tuple[str, ManifestCell, ManifestCell, ManifestCell]]:
    """Per layer that has them: (layer, its leave-one-out cell, its leave-one-in cell, the nothing cell)."""
    if ctx.control.empty_config:
        return []
    cells = [c for c in ctx.tested if not c.aa_of]
    present = max((set(ctx.layers.get(c.id, [])) for c in cells if c.empty_config and not c.kept), key=len,
                  default=set())  # fmt: skip
    nothing = next(
        (c for c in cells if c.empty_config and not c.kept and set(ctx.layers.get(c.id, [])) == present), None
    )
    if nothing is None:
        return []
    out = []
    for k in (c for c in cells if c.kept and c.empty_config):
        alone = present - set(ctx.layers.get(k.id, []))
        if len(alone) != 1:
            continue
        (layer,) = alone
        out_cell = next((c for c in cells if not c.empty_config and ctx.layers.get(c.id) == [layer]), None)
        if out_cell is not None:
            out.append((layer, out_cell, k, nothing))
    return out


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Every layer's leave-one-out and leave-one-in effects and their difference, per block."""
    found = quartets(ctx)
    if not found:
        return {}
    blocks = [(t, r) for t in ctx.task_ids for r in ctx.repeats]
    values = functools.partial(side_values, ctx)

    full = values(ctx.control.id)
    got, diffs = [], []
    for layer, out_cell, in_cell, nothing in found:
        without, alone, none = values(out_cell.id), values(in_cell.id), values(nothing.id)
        both = [b for b in blocks if all(b in v for v in (full, without, alone, none))]
        loo = [full[b] - without[b] for b in both]
        loi = [alone[b] - none[b] for b in both]
        diffs.append([x - y for x, y in zip(loo, loi, strict=True)])
        got.append({
            "layer": layer,
            "cells": [out_cell.id, in_cell.id, nothing.id],
            "leave_one_out": float(np.mean(loo)) if loo else None,
            "leave_one_in": float(np.mean(loi)) if loi else None,
        })  # fmt: skip
    verdicts = ("needs the others", "does more alone")
    return {KEY: tested(ctx, got, diffs, verdicts, lambda r: sentence(r, ctx.primary), effect="interaction")}


def sentence(row: dict[str, Any], metric: str) -> str:
    """``skills: removing it from everything loses 40 pts, alone it adds 5 pts: it needs the others (…)``."""
    if row["interaction"] is None:
        return f"{row['layer']}: no block has all four of its cells scored."
    said = (
        f"{row['layer']}: beside the rest it does {fmt_delta(metric, row['leave_one_out'])} (whole setup − "
        f"without it), alone {fmt_delta(metric, row['leave_one_in'])} (only it − nothing); total interaction "
        f"{fmt_delta(metric, row['interaction'])} {fmt_tested(row)}"
    )
    return said + ("" if row["verdict"] == "not shown" else f": it {row['verdict']}") + "."


SECTION = interaction_section(
    Section(KEY, build, layer_runs_only=True),
    "Layer interactions: leave-one-out against leave-one-in",
    "Per layer: what removing it from the whole setup does (leave-one-out) against what it does on its "
    "own (leave-one-in), in the same blocks; their difference is its total interaction with the other "
    "layers (sign-flip test over the blocks, Holm over the layers).",
    lambda metric: {
        "layer": lambda r: r["layer"],
        "leave-one-out": lambda r: fmt_delta(metric, r["leave_one_out"]),
        "leave-one-in": lambda r: fmt_delta(metric, r["leave_one_in"]),
        "interaction": lambda r: fmt_delta(metric, r["interaction"]),
    },
    "layer-interactions",
)

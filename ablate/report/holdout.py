"""The dev/holdout section: whether a dev task's gain on the primary metric reverses on the holdout tasks
(:mod:`ablate.grade.splits`)."""

from __future__ import annotations

from typing import Any

from ablate.report.blocks import Block, Bullets, Heading, Para
from ablate.report.context import Context, Page, Section
from ablate.report.families import task_differences
from ablate.report.model import HIGHER_IS_BETTER, METRIC_LABELS, HoldoutFinding, Report


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """The dev/holdout check on the primary metric, task by task."""
    from ablate.grade.splits import holdout_finding, split_of_tasks

    split_of = split_of_tasks(ctx.folder)
    if set(split_of.values()) != {"dev", "holdout"}:
        return {"holdout_note": "not checked: the dev/holdout check needs tasks in both splits"}
    found: list[HoldoutFinding] = []
    higher = ctx.primary in HIGHER_IS_BETTER
    for c in ctx.tested:
        by: dict[str, dict[str, list[float]]] = {"dev": {}, "holdout": {}}
        for t, diffs in task_differences(ctx, c.id).items():
            by[split_of[t]][t] = diffs
        f = holdout_finding(
            c.id, ctx.primary, by["dev"], by["holdout"], higher_is_better=higher, alpha=ctx.alpha
        )
        if f is not None:
            found.append(f)
    note = f"checked {len(ctx.tested)} cells on {METRIC_LABELS[ctx.primary]}, task by task: " + (
        f"{len(found)} dev gain(s) reverse on holdout" if found else "no dev gain reverses on holdout"
    )
    return {"holdout": found, "holdout_note": note}


def render(report: Report, page: Page) -> list[Block]:
    """What the check found (or why it did not run)."""
    out: list[Block] = [Heading("Dev and holdout tasks"), Para(report.holdout_note or "not checked")]
    if report.holdout:
        out.append(Bullets([f.message for f in report.holdout]))
    return out


SECTION = Section("holdout", build, render, layer_runs_only=True)

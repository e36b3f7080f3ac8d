"""The cells section: each cell's summary and the per-task tables (Clean against Normal for a binary run, cells
as columns for a layered one)."""

from __future__ import annotations

from typing import Any

from ablate.report.blocks import (
    Block,
    Heading,
    RowStyle,
    Table,
    fmt_ci,
    fmt_delta,
    fmt_p,
    fmt_value,
    real_mark,
    row_style,
    strips_text,
)
from ablate.report.context import Context, Page, Section
from ablate.report.cost_per_pass import per_pass_text
from ablate.report.model import METRIC_LABELS, Report
from ablate.report.summaries import cell_summaries, task_table


def build(ctx: Context, report: Report) -> dict[str, Any]:
    return {"cells": cell_summaries(ctx), "task_table": task_table(ctx.manifest, ctx.items.scored)}


def render(report: Report, page: Page) -> list[Block]:
    return binary_tables(report) if report.run.binary else layered_tables(report)


#: The rows of a layered run's per-task table: (label, the TaskCellCell field, the metric it is formatted as).
_TASK_ROWS = (
    ("pitfall-free", "pitfall_free", "pitfall_free"), ("turns", "turns", "turns"),
    ("tool calls", "tool_calls", "tool_calls"), ("cost", "cost_usd", "cost_usd"),
    ("skills invoked", "skills_invoked", "turns"),
)  # fmt: skip


#: The columns of a binary run's per-task table, Clean / Normal (formatted as in :data:`_TASK_ROWS`).
_BOTH = ("turns", "tool_calls", "cost_usd", "pitfall_free", "skills_invoked")


def binary_tables(report: Report) -> list[Block]:
    control = report.run.control
    other = next((c.cell for c in report.cells if c.cell != control), None)
    out: list[Block] = [Heading("Setup off (Clean) against setup on (Normal)")]
    if other is None:
        return out
    rows = []
    by = {(t.task, t.cell): t for t in report.task_table}
    fmt = {attr: metric for _label, attr, metric in _TASK_ROWS}
    for t in report.run.tasks:
        tid = str(t["id"])
        clean, normal = by.get((tid, other)), by.get((tid, control))
        if clean is None or normal is None:
            continue
        both = [
            f"{fmt_value(fmt[a], getattr(clean, a))} / {fmt_value(fmt[a], getattr(normal, a))}" for a in _BOTH
        ]
        rows.append([tid, *both])
    out.append(
        Table(
            ["task", "turns (Clean / Normal)", "tool calls", "cost", "pitfall avoided", "skills invoked"],
            rows,
            id="binary-tasks",
            caption=f"Clean = {other}, Normal = {control}; means per session",
        )
    )
    mine = [c for c in report.comparisons if c.task is None and c.cell == other]
    styles: list[RowStyle] = [row_style(c) for c in mine]
    agg = [
        [METRIC_LABELS.get(c.metric, c.metric), *(fmt_value(c.metric, v) for v in (c.cell_value, c.control_value)),
         fmt_delta(c.metric, c.delta), fmt_ci(c), fmt_p(c.p_adjusted), real_mark(c)]
        for c in mine
    ]  # fmt: skip
    cells = {c.cell: c for c in report.cells}
    if other in cells and control in cells:
        agg.append(
            ["cost per pass [CI]", per_pass_text(cells[other]), per_pass_text(cells[control]), *["–"] * 4]
        )
        styles.append("")
    out.append(
        Table(
            ["metric (per session)", "Clean", "Normal", "Δ (Clean − Normal)", "interval", "Holm p", "real?"],
            agg,
            id="binary-aggregate",
            row_styles=styles,
        )
    )
    return out


def layered_tables(report: Report) -> list[Block]:
    out: list[Block] = [Heading("Per-task results (cells as columns)")]
    cells = [c.cell for c in report.cells]
    by = {(t.task, t.cell): t for t in report.task_table}
    for t in report.run.tasks:
        tid = str(t["id"])
        rows = [
            [label]
            + [fmt_value(metric, getattr(by[(tid, c)], attr)) if (tid, c) in by else "–" for c in cells]
            for label, attr, metric in _TASK_ROWS
        ]
        rows.append(["sessions"] + [str(by[(tid, c)].n) if (tid, c) in by else "0" for c in cells])
        out.append(Heading(f"{tid} ({t['split']})", 3))
        out.append(Table(["", *cells], rows, id=f"task-{tid}"))
    out.append(Heading("Aggregate per cell", 3))
    pooled = {(c.cell, c.metric): c for c in report.comparisons if c.task is None}
    rows = []
    for c in report.cells:
        row = [c.cell + (" (no-op)" if c.no_op else ""), strips_text(c.layers, c.pieces)]
        for m in ("pitfall_free", "turns", "cost_usd"):
            ms = c.metrics.get(m)
            val = fmt_value(m, ms.value if ms else None)
            cmp_ = pooled.get((c.cell, m))
            row.append(val + (f" ({fmt_delta(m, cmp_.delta)})" if cmp_ else ""))
        row.append(per_pass_text(c))
        row.append(f"{100 * c.cache_read_share:.0f}%" if c.cache_read_share is not None else "–")
        row.append(f"{c.scored}/{c.items}")
        rows.append(row)
    headers = ["cell", "strips", "pitfall-free (Δ)", "turns (Δ)", "cost (Δ)", "cost per pass [CI]", "cache-read share",
               "scored"]  # fmt: skip
    out.append(Table(headers, rows, id="aggregate"))
    return out


SECTION = Section("cells", build, render)

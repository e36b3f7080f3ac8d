"""The regressions section: real comparisons where stripping a layer made the result better; the others in
that direction counted, not listed."""

from __future__ import annotations

from typing import Any

from ablate.report.blocks import Block, Heading, Para, Table, fmt_ci, fmt_delta, fmt_p, layers_text, row_style
from ablate.report.context import Context, Page, Section
from ablate.report.model import HIGHER_IS_BETTER, METRIC_LABELS, Report


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """The real "hurts" comparisons, and the count of per-task changes that way that are not real."""
    comparisons = report.comparisons
    return {
        "regressions": [x for x in comparisons if x.verdict == "hurts"],
        "regressions_not_real": sum(
            1
            for x in comparisons
            if x.task is not None
            and not x.real
            and x.delta
            and ((x.delta > 0) == (x.metric in HIGHER_IS_BETTER))
        ),
    }


def render(report: Report, page: Page) -> list[Block]:
    """The real regressions' table (or that there is none), and how many unreal ones were left out."""
    out: list[Block] = [
        Heading("Regressions: stripping a layer made a result better (real differences only)")
    ]
    if report.regressions:
        out.append(
            Table(
                ["task", "cell", "strips", "metric", "Δ", "interval", "Holm p", "family"],
                [
                    [
                        c.task or "pooled",
                        c.cell,
                        layers_text(c.layers),
                        METRIC_LABELS.get(c.metric, c.metric),
                        fmt_delta(c.metric, c.delta),
                        fmt_ci(c),
                        fmt_p(c.p_adjusted),
                        c.family,
                    ]
                    for c in report.regressions
                ],
                id="regressions",
                row_styles=[row_style(c) for c in report.regressions],
            )
        )
    else:
        out.append(Para("None real: no stripped layer made a result really better."))
    if report.regressions_not_real:
        out.append(
            Para(
                f"{report.regressions_not_real} per-task change(s) in that direction are not real (Holm-adjusted "
                f"p > {report.alpha}) and are not listed: at this many comparisons such changes appear by chance."
            )
        )
    return out


SECTION = Section("regressions", build, render, layer_runs_only=True)

"""The noise floor section (``--aa``): each metric's pooled A/A difference — flip rate, spread, and whether it
is "real" (a real difference here makes the whole run untrustworthy)."""

from __future__ import annotations

import statistics
from typing import Any

from ablate.report.blocks import Block, Heading, Para, Table, fmt_delta, fmt_p
from ablate.report.context import Context, Page, Section
from ablate.report.families import paired_values
from ablate.report.model import BINARY_METRICS, NoiseFloorRow, Report


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Each A/A cell's pooled comparisons with the control, with the flip rate and spread of the differences."""
    rows = []
    for aa in (c for c in ctx.tested if c.aa_of):
        for x in report.comparisons:
            if x.cell != aa.id or x.task is not None:
                continue
            xs, ys, _ = paired_values(ctx, aa.id, x.metric)
            d = [a - b for a, b in zip(xs, ys, strict=True)]
            sd = statistics.stdev(d) if len(d) > 1 else None
            rows.append(
                NoiseFloorRow(
                    metric=x.metric,
                    cell=aa.id,
                    blocks=len(d),
                    flip_rate=sum(1 for v in d if v) / len(d) if d and x.metric in BINARY_METRICS else None,
                    spread=sd,
                    **x.model_dump(include={"delta", "ci_low", "ci_high", "p_adjusted", "real"}),
                )
            )
    return {"noise_floor": rows}


def render(report: Report, page: Page) -> list[Block]:
    """The two controls compared, metric by metric (nothing without ``--aa``)."""
    if not report.noise_floor:
        return []
    rows = [
        [
            r.metric,
            r.cell,
            str(r.blocks),
            "–" if r.flip_rate is None else f"{100 * r.flip_rate:.0f}%",
            "–" if r.spread is None else f"{r.spread:.3g}",
            fmt_delta(r.metric, r.delta),
            "–" if r.p_adjusted is None else fmt_p(r.p_adjusted),
            "**real — untrustworthy**" if r.real else "no",
        ]
        for r in report.noise_floor
    ]
    return [
        Heading("Noise floor (A/A)"),
        Para(
            "A second control, built and run on its own with the same setup, against the control: what an "
            "identical setup gives. A real difference here makes the whole run untrustworthy."
        ),
        Table(
            ["metric", "A/A cell", "blocks", "flip rate", "spread (sd of Δ)", "Δ", "adjusted p", "real"],
            rows,
            id="noise-floor",
        ),
    ]


SECTION = Section("noise_floor", build, render)

"""The contributions section: every layer's marginal contribution, metric by metric, pooled and per task."""

from __future__ import annotations

from ablate.report.blocks import (
    Block,
    Heading,
    Para,
    Table,
    fmt_ci,
    fmt_delta,
    fmt_p,
    fmt_value,
    layers_text,
    real_mark,
    row_style,
)
from ablate.report.context import Page, Section
from ablate.report.model import METRIC_LABELS, Comparison, Report
from ablate.stats.resampling import min_interval_blocks

HEADERS = ["cell", "strips", "task", "family", "cell", "control", "Δ", "interval", "p", "Holm p", "real?",
           "pairs"]  # fmt: skip


def render(report: Report, page: Page) -> list[Block]:
    """Every comparison, metric by metric: the cell and control values, Δ, interval, p, Holm p, real?"""
    b: list[Block] = [
        Heading("Marginal contribution of each layer"),
        Para(
            "Paired on (task, repeat) blocks. Rates: Newcombe interval and exact test on discordant blocks; counts "
            "and cost: t interval on the per-block differences (not computable below "
            f"{min_interval_blocks(1 - report.alpha)} blocks) and the sign-flip test (exact up to 16 blocks, "
            "Monte Carlo with resamples scaled to the family's α/m above). Holm within each family (primary, "
            "secondary); intervals are per comparison (not adjusted), so 'real?' comes from the Holm-adjusted p "
            "alone."
        ),
    ]
    seq = report.sequential
    if seq is not None:
        b.append(
            Para(
                f"Sequential design ({'adaptive run' if seq.mode == 'adaptive' else 'read before its end'}): "
                f"the pooled {METRIC_LABELS.get(seq.primary, seq.primary)} rows (marked 'anytime') carry the "
                "anytime-valid p, its Holm adjustment over the run's comparisons and the confidence sequence; "
                "'real?' comes from them alone. Every other row is fixed-n and descriptive ('descr.'): its "
                "p-values assume a number of blocks fixed in advance, so none of them is marked real.",
                strong=True,
            )
        )
    for metric in dict.fromkeys(c.metric for c in report.comparisons):
        rows = [
            [
                c.cell,
                layers_text(c.layers),
                c.task or "pooled",
                c.family,
                fmt_value(metric, c.cell_value),
                fmt_value(metric, c.control_value),
                fmt_delta(metric, c.delta),
                fmt_ci(c),
                fmt_p(c.p),
                fmt_p(c.p_adjusted),
                real_mark(c) if seq is None else _sequential_mark(c, seq.primary),
                str(c.n_pairs),
            ]
            for c in report.comparisons
            if c.metric == metric
        ]
        styles = [row_style(c) for c in report.comparisons if c.metric == metric]
        b += [
            Heading(METRIC_LABELS.get(metric, metric), 3),
            Table(HEADERS, rows, id=f"contrib-{metric}", row_styles=styles),
        ]
    notes = sorted({n for c in report.comparisons if c.not_computable for n in c.not_computable.split("; ")})
    if notes:
        b.append(Para("Not computable: " + "; ".join(notes) + "."))
    return b


def _sequential_mark(c: Comparison, primary: str) -> str:
    """'real?' in a sequential report: the anytime test's mark, or that the row is only description."""
    if c.task is None and c.metric == primary and c.method.startswith("anytime-valid"):
        return real_mark(c) + " (anytime)"
    return "descr." if c.p is not None else "n/a"


#: Its JSON part (``comparisons``, ``families``) is the ranking's and the sequential analysis'.
SECTION = Section("contributions", render=render, layer_runs_only=True)

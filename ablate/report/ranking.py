"""The ranking section, the report's answer: every comparison in its Holm family, each layer's verdict from
its real comparisons, its place by a documented rule (:data:`RANKING_KEY`), and one sentence per verdict."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

from ablate.folder.layout import ManifestCell
from ablate.report.blocks import Block, Bullets, Figure, Heading, Para, Table, fmt_ci, fmt_delta, layers_text
from ablate.report.context import Context, Page, Section, on_model
from ablate.report.cost_per_pass import STRIPPING, cheaper_tradeoffs
from ablate.report.families import plan_comparisons, run_comparisons
from ablate.report.model import (
    BINARY_METRICS,
    HIGHER_IS_BETTER,
    METRIC_LABELS,
    Comparison,
    LayerVerdict,
    RankEntry,
    Report,
)

RANKING_KEY = (
    "a layer's verdict comes from its real comparisons only (Holm within their family), each read in its own "
    "direction. When the pooled primary comparison is real it decides: 'helps' when stripping the layer made the "
    "primary outcome worse, 'hurts' when it made it better, and real secondary comparisons the other way are "
    "listed beside the verdict as its trade-offs ('costs 1.00 turns'), as is, whatever the verdict, a cheaper "
    "cost per pass than the control's (the paired bootstrap interval of their ratio below 1). Otherwise, from the secondary ones: "
    "'helps' or 'hurts' when they agree, 'mixed' when they disagree, 'draw' when none is real. Order: helps with "
    "a real primary effect (largest primary loss when stripped first); helps on secondary evidence only (most "
    "real comparisons first); mixed; the draw group (one tie); hurts on secondary evidence only (fewest real "
    "comparisons first); hurts with a real primary effect (smallest primary gain when stripped first). Equal "
    "keys share a rank"
)
#: Group order of the ranking (see :data:`RANKING_KEY`).
_GROUPS: list[tuple[LayerVerdict, str]] = [
    ("helps", "primary"), ("helps", "secondary"), ("mixed", "primary"), ("mixed", "secondary"), ("draw", "none"),
    ("hurts", "secondary"), ("hurts", "primary"),
]  # fmt: skip


def rank_entry(
    cell: ManifestCell, layers: list[str], comparisons: Sequence[Comparison], primary: str
) -> RankEntry:
    """One cell's verdict and evidence from its comparisons."""
    mine = [x for x in comparisons if x.cell == cell.id]
    real = [x for x in mine if x.real]
    pooled = {x.metric: x for x in mine if x.task is None}
    directions = {x.verdict for x in real}
    prim = pooled.get(primary)
    verdict: LayerVerdict
    if prim is not None and prim.real and prim.verdict in ("helps", "hurts"):
        verdict = "helps" if prim.verdict == "helps" else "hurts"
    elif not real:
        verdict = "draw"
    else:
        verdict = "mixed" if len(directions) > 1 else ("helps" if "helps" in directions else "hurts")
    evidence = "primary" if prim is not None and prim.real else ("secondary" if real else "none")
    real_metrics = list(
        dict.fromkeys([x.metric for x in real if x.metric == primary] + [x.metric for x in real])
    )
    real_on = [
        f"{m}: " + ", ".join(f"{x.task or 'pooled'} {x.verdict}" for x in real if x.metric == m)
        for m in real_metrics
    ]

    def delta(metric: str) -> float | None:
        x = pooled.get(metric)
        return x.delta if x is not None else None

    return RankEntry(
        rank=0,
        cell=cell.id,
        layers=layers,
        tie_group="draw" if verdict == "draw" else cell.id,
        delta_pitfall_free=delta("pitfall_free"),
        delta_turns=delta("turns"),
        delta_cost_usd=delta("cost_usd"),
        real_metrics=real_metrics,
        real_on=real_on,
        verdict=verdict,
        evidence=evidence,
        primary_delta=delta(primary),
        tradeoffs=tradeoffs(verdict, [x for x in real if x.task is None and x.metric != primary]),
    )


def tradeoffs(verdict: LayerVerdict, pooled_real: Sequence[Comparison]) -> list[str]:
    """The real pooled comparisons against a helps/hurts verdict, from the layer's side: a layer that helps
    'costs 1.00 turns'; one that hurts 'saves $0.0288' or 'adds 20 pts checks-passed rate'."""
    if verdict not in ("helps", "hurts"):
        return []
    out = []
    for x in pooled_real:
        if x.verdict not in ("helps", "hurts") or x.verdict == verdict or x.delta is None:
            continue
        word = "costs" if verdict == "helps" else ("adds" if x.metric in HIGHER_IS_BETTER else "saves")
        out.append(f"{word} {amount(x.metric, abs(x.delta))}")
    return out


def amount(metric: str, size: float) -> str:
    """A size of a metric's change in words: ``$0.0288``, ``41 pts pitfall-free rate``, ``1.00 turns``."""
    if metric == "cost_usd":
        return f"${size:.4f}"
    if metric in BINARY_METRICS:
        return f"{100 * size:.0f} pts {METRIC_LABELS.get(metric, metric)}"
    return f"{size:.2f} {METRIC_LABELS.get(metric, metric)}"


def rank(
    tested: Sequence[ManifestCell],
    layers: dict[str, list[str]],
    comparisons: Sequence[Comparison],
    primary: str,
) -> list[RankEntry]:
    """Every tested cell, ranked by :data:`RANKING_KEY`; equal keys in one group share a rank and tie group."""
    entries = [rank_entry(c, layers[c.id], comparisons, primary) for c in tested]
    n_real = {c.id: sum(1 for x in comparisons if x.cell == c.id and x.real) for c in tested}

    def key(e: RankEntry) -> tuple[float, ...]:
        if e.verdict == "draw":
            return (0.0,)
        if e.evidence == "primary":  # by what stripping the layer cost on the primary metric, largest first
            delta = e.primary_delta or 0.0
            return (delta if primary in HIGHER_IS_BETTER else -delta,)
        return (-float(n_real[e.cell]),) if e.verdict != "hurts" else (float(n_real[e.cell]),)

    out: list[RankEntry] = []
    for verdict, evidence in _GROUPS:
        group = sorted((e for e in entries if e.verdict == verdict and e.evidence == evidence), key=key)
        for _key, tied in groupby(group, key=key):
            members = list(tied)
            for e in members:
                e.rank = len(out) + 1
            out += members
            if len(members) > 1 and members[0].verdict != "draw":
                for e in members:
                    e.tie_group = "+".join(m.cell for m in members)
    return out


def ranking_of(ctx: Context, comparisons: Sequence[Comparison]) -> list[RankEntry]:
    """The ranking of the context's ranked cells, a cell cheaper per pass than the control saying so."""
    entries = rank(ctx.ranked(), ctx.layers, comparisons, ctx.primary)
    cheaper = cheaper_tradeoffs(ctx, comparisons)
    for e in entries:
        e.tradeoffs += [cheaper[e.cell]] if e.cell in cheaper else []
    return entries


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Every comparison in its Holm family, and the ranking read from the real ones."""
    ctx.say(f"comparing {len(ctx.tested)} cells with {ctx.control.id} on {len(ctx.metrics)} metrics")
    planned = plan_comparisons(ctx.tested, ctx.metrics, ctx.task_ids, ctx.primary)
    comparisons, families = run_comparisons(ctx, planned)
    return {
        "comparisons": comparisons,
        "families": families,
        "primary_metric": ctx.primary,
        "ranking": ranking_of(ctx, comparisons),
        "ranking_key": RANKING_KEY,
        "no_op_cells": ctx.no_ops,
    }


def families_text(report: Report) -> str:
    """The two Holm families and the rule, in one paragraph."""
    parts = [
        f"{f.name} family: {f.scope} ({', '.join(METRIC_LABELS.get(m, m) for m in f.metrics) or 'none'}; "
        f"{f.testable} of {f.m} testable)"
        for f in report.families
    ]
    rule = report.families[0].rule if report.families else ""
    return (
        f"Primary metric: {METRIC_LABELS.get(report.primary_metric, report.primary_metric)}. "
        + "; ".join(parts)
        + (f". Rule: {rule}." if rule else ".")
    )


#: What each verdict says about the layer, in words.
VERDICT_WORDS = {
    "helps": "it earns its keep",
    "hurts": "the setup did better without it",
    "mixed": "its real differences disagree",
    "draw": "no comparison of it is real",
    "undecided": "the sequential analysis established neither an effect nor its absence",
}


EVIDENCE_WORDS = {
    "primary": ", a real difference",
    "secondary": " (not real: the verdict comes from its real secondary comparisons)",
    "none": "",
}


def verdict_sentence(e: RankEntry, verdict: str, primary: str, pooled: Comparison | None) -> str:
    """One ranked cell's verdict in one sentence."""
    moved = fmt_delta(primary, e.primary_delta) + (f" {fmt_ci(pooled)}" if pooled else "")
    return (
        f"**{e.cell}** (strips {layers_text(e.layers)}): **{verdict}**, {VERDICT_WORDS[verdict]}; stripping it "
        f"moved {METRIC_LABELS.get(primary, primary)} by {moved}{EVIDENCE_WORDS[e.evidence]}"
        + (
            f"; it {', '.join(its)}"
            if (its := [t for t in e.tradeoffs if not t.startswith(STRIPPING)])
            else ""
        )
        + "".join(f"; {t}" for t in e.tradeoffs if t.startswith(STRIPPING))
        + "."
    )


def render(report: Report, page: Page) -> list[Block]:
    """The ranking table and one sentence per verdict, then how to read them, and the forest plot."""
    from ablate.report.flipped import links
    from ablate.report.plots import forest_plot

    seq = report.sequential  # cells it left undecided: shown as such, never in the draw group's style
    undecided = {c for c, d in seq.decisions.items() if d.get("decision") == "undecided"} if seq else set()
    pooled = {(c.cell, c.metric): c for c in report.comparisons if c.task is None}
    prim = report.primary_metric
    rows, sentences = [], []
    for e in report.ranking:
        pc = pooled.get((e.cell, prim))
        verdict = "undecided" if e.cell in undecided else e.verdict
        sentences.append(verdict_sentence(e, verdict, prim, pc))
        rows.append(
            [
                str(e.rank),
                e.cell,
                layers_text(e.layers),
                verdict + (f" ({', '.join(e.tradeoffs)})" if e.tradeoffs and e.cell not in undecided else ""),
                e.evidence,
                fmt_delta(prim, e.primary_delta) + (f" {fmt_ci(pc)}" if pc else ""),
                fmt_delta("turns", e.delta_turns),
                fmt_delta("cost_usd", e.delta_cost_usd),
                "; ".join(e.real_on) or "none",
            ]
        )
    headers = ["rank", "cell", "strips", "verdict", "evidence", f"Δ {METRIC_LABELS.get(prim, prim)} [CI]", "Δ turns",
               "Δ cost (simulated)" if report.run.simulated else "Δ cost", "real on"]  # fmt: skip
    b: list[Block] = [Heading("Ranking: which layer earns its keep" + on_model(report))]
    b.append(
        Table(
            headers,
            rows,
            id="ranking",
            links=links(report),
            row_styles=[
                "draw" if e.tie_group == "draw" and e.cell not in undecided else "" for e in report.ranking
            ],
        )
    )
    if sentences:
        b.append(Bullets(sentences))
    if report.run.repeats < 2:
        b.append(
            Para(
                "This run has one repeat per (task, cell): per-task comparisons show nothing and only the pooled "
                "comparisons (the tasks as blocks) can be real. See 'Power' for the repeats a conclusive run needs.",
                strong=True,
            )
        )
    b.append(Para(families_text(report)))
    real_rule = (
        f"real = Holm-adjusted p ≤ {report.alpha}"
        if report.sequential is None
        else f"real = Holm-adjusted anytime-valid p ≤ {report.sequential.alpha} (the sequential analysis; no "
        "fixed-n p-value marks anything real; 'undecided': neither an effect nor its absence was established, "
        "not a draw)"
    )
    b.append(Para(f"Order: {report.ranking_key}. Δ = cell − control; {real_rule}."))
    if report.no_op_cells:
        b.append(Bullets([f"not tested (no-op): {c.reason}" for c in report.no_op_cells]))
    if plot := page.figure("ranking", lambda d: forest_plot(report, d)):
        b.append(
            Figure(
                plot[0],
                plot[1],
                "Forest plot: Δ per layer (cell − control) with intervals, one panel per metric; filled = real, "
                "hollow grey = draw",
            )
        )
    return b


SECTION = Section("ranking", build, render, layer_runs_only=True)

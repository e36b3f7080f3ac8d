"""The report as a sequence of blocks (headings, paragraphs, tables), rendered to Markdown and HTML alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ablate.report.model import BINARY_METRICS, METRIC_LABELS, Comparison, Report

RowStyle = Literal["real", "draw", ""]


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str
    strong: bool = False


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    id: str = ""
    caption: str = ""
    row_styles: list[RowStyle] = field(default_factory=list)
    """One per row when set: ``real`` (a real effect), ``draw`` (no real effect) or ``""`` (the HTML row class)."""


@dataclass
class Figure:
    """The forest plot (the renderer embeds it; Markdown links it)."""

    svg: str
    png: str
    alt: str


Block = Heading | Para | Bullets | Table | Figure


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)


def fmt_value(metric: str, v: float | None) -> str:
    if v is None:
        return "–"
    if metric in BINARY_METRICS:
        return f"{100 * v:.0f}%"
    if metric == "cost_usd":
        return f"${v:.4f}"
    return f"{v:.2f}"


def fmt_delta(metric: str, v: float | None) -> str:
    if v is None:
        return "–"
    if metric in BINARY_METRICS:
        return f"{100 * v:+.0f} pts"
    if metric == "cost_usd":
        return f"{'+' if v >= 0 else '−'}${abs(v):.4f}"
    return f"{v:+.2f}"


def fmt_ci(c: Comparison) -> str:
    if c.ci_low is None or c.ci_high is None:
        return "not computable"
    return f"[{fmt_delta(c.metric, c.ci_low)}, {fmt_delta(c.metric, c.ci_high)}]"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _real(c: Comparison) -> str:
    if c.p is None:
        return "n/a"
    return "**real**" if c.real else "draw"


def _style(c: Comparison) -> RowStyle:
    if c.p is None:
        return ""
    return "real" if c.real else "draw"


def _layers(layers: list[str]) -> str:
    if len(layers) > 3:
        return f"{len(layers)} layers (everything)"
    return ", ".join(layers) or "–"


def build_document(report: Report, *, plot_svg: str | None, plot_png: str | None) -> Document:
    """The report's sections (issue 11), in reading order."""
    run, n = report.run, report.n
    doc = Document(f"ablate report — {run.id}")
    b = doc.blocks
    spend = f"${run.spend_usd:.4f} spent" + (
        f", ${run.spend_list_usd:.4f} at list price with cache reads priced as fresh input"
        if run.spend_list_usd is not None
        else ""
    )
    tasks = ", ".join(f"{t['id']} ({t['split']})" for t in run.tasks)
    b.append(
        Table(
            ["", ""],
            [
                ["run", run.id],
                ["claude", f"{run.claude_version} (sha256 {run.claude_sha256[:16]}…)"],
                [
                    "model",
                    f"{run.model} — "
                    + ("verified from every transcript" if run.model_verified else "**NOT verified**"),
                ],
                ["isolation", run.isolation],
                [
                    "cell set",
                    f"{run.cell_set} (control {run.control})" + (" — binary A/B" if run.binary else ""),
                ],
                ["tasks", tasks],
                ["repeats", str(run.repeats)],
                ["items", f"{n.items} planned, {n.complete} complete, {n.excluded} excluded"],
                ["spend", spend],
            ],
            id="header",
        )
    )
    # ---- the answer first
    b.append(Heading("Ranking: which layer earns its keep"))
    if run.repeats < 2:
        b.append(
            Para(
                "This run has one repeat per (task, cell): nothing in it is significant, and the ranking below is "
                "one draw. See 'Power' for the repeats a conclusive run needs.",
                strong=True,
            )
        )
    b.append(
        Para(f"Order: {report.ranking_key}. Δ = cell − control; real = Holm-adjusted p ≤ {report.alpha}.")
    )
    pooled = {(c.cell, c.metric): c for c in report.comparisons if c.task is None}
    rows = []
    for e in report.ranking:
        pf = pooled.get((e.cell, "pitfall_free"))
        rows.append(
            [
                str(e.rank),
                e.cell,
                _layers(e.layers),
                e.verdict if e.tie_group != "draw" else "draw",
                fmt_delta("pitfall_free", e.delta_pitfall_free) + (f" {fmt_ci(pf)}" if pf else ""),
                fmt_delta("turns", e.delta_turns),
                fmt_delta("cost_usd", e.delta_cost_usd),
                "; ".join(e.real_on) or "none",
            ]
        )
    b.append(
        Table(
            ["rank", "cell", "strips", "verdict", "Δ pitfall-free [CI]", "Δ turns", "Δ cost", "real on"],
            rows,
            id="ranking",
            row_styles=["draw" if e.tie_group == "draw" else "" for e in report.ranking],
        )
    )
    if report.no_op_cells:
        b.append(Bullets([f"not tested (no-op): {c.reason}" for c in report.no_op_cells]))
    if plot_svg:
        b.append(
            Figure(
                plot_svg,
                plot_png or "",
                "Forest plot: Δ per layer (cell − control) with intervals, one panel per metric; filled = real, "
                "hollow grey = draw",
            )
        )
    # ---- tables
    if run.binary:
        b.extend(_binary_tables(report))
    else:
        b.extend(_layered_tables(report))
    # ---- marginal contributions
    b.append(Heading("Marginal contribution of each layer"))
    b.append(
        Para(
            "Paired on (task, repeat) blocks. Rates: Newcombe interval and exact test on discordant blocks; counts "
            "and cost: task-stratified bootstrap interval and sign-flip permutation test. Holm over all "
            f"{sum(1 for c in report.comparisons if c.p is not None)} testable comparisons of this report; "
            "intervals are per comparison (not adjusted), so 'real?' comes from the Holm-adjusted p alone."
        )
    )
    for metric in dict.fromkeys(c.metric for c in report.comparisons):
        rows = [
            [
                c.cell,
                _layers(c.layers),
                c.task or "pooled",
                fmt_value(metric, c.cell_value),
                fmt_value(metric, c.control_value),
                fmt_delta(metric, c.delta),
                fmt_ci(c),
                fmt_p(c.p),
                fmt_p(c.p_adjusted),
                _real(c),
                str(c.n_pairs),
            ]
            for c in report.comparisons
            if c.metric == metric
        ]
        styles = [_style(c) for c in report.comparisons if c.metric == metric]
        b.append(Heading(METRIC_LABELS.get(metric, metric), 3))
        b.append(
            Table(
                [
                    "cell",
                    "strips",
                    "task",
                    "cell",
                    "control",
                    "Δ",
                    "interval",
                    "p",
                    "Holm p",
                    "real?",
                    "pairs",
                ],
                rows,
                id=f"contrib-{metric}",
                row_styles=styles,
            )
        )
    notes = sorted({c.not_computable for c in report.comparisons if c.not_computable})
    if notes:
        b.append(Para("Not computable: " + "; ".join(notes) + "."))
    # ---- spread and power
    b.append(Heading("Run-to-run spread and power"))
    metrics = list(dict.fromkeys(c.metric for c in report.comparisons)) or ["pitfall_free"]
    b.append(
        Table(
            ["cell", *[f"{METRIC_LABELS.get(m, m)} (sd of repeat means)" for m in metrics]],
            [
                [c.cell]
                + [
                    fmt_value(m, c.metrics[m].value)
                    + (
                        f" (sd {fmt_value(m, c.metrics[m].spread)})"
                        if c.metrics[m].spread is not None
                        else " (sd –)"
                    )
                    if m in c.metrics
                    else "–"
                    for m in metrics
                ]
                for c in report.cells
            ],
            id="spread",
        )
    )
    b.append(
        Table(
            [
                "metric",
                "blocks per cell",
                "smallest detectable Δ (80% power)",
                "target Δ",
                "repeats needed",
                "cost of that run",
            ],
            [
                [
                    METRIC_LABELS.get(p.metric, p.metric),
                    str(p.blocks_per_cell),
                    fmt_delta(p.metric, p.detectable).lstrip("+")
                    if p.detectable is not None
                    else (p.detectable_note or "–"),
                    fmt_delta(p.metric, p.effect),
                    str(p.repeats_needed) if p.repeats_needed is not None else (p.repeats_note or "–"),
                    f"${p.cost_usd:.2f}" if p.cost_usd is not None else "–",
                ]
                for p in report.power
            ],
            id="power",
        )
    )
    # ---- regressions and dead layers
    b.append(Heading("Regressions: stripping a layer made a task better"))
    if report.regressions:
        b.append(
            Table(
                ["task", "cell", "strips", "metric", "Δ", "interval", "Holm p", "real?"],
                [
                    [
                        c.task or "",
                        c.cell,
                        _layers(c.layers),
                        METRIC_LABELS.get(c.metric, c.metric),
                        fmt_delta(c.metric, c.delta),
                        fmt_ci(c),
                        fmt_p(c.p_adjusted),
                        _real(c),
                    ]
                    for c in report.regressions
                ],
                id="regressions",
                row_styles=[_style(c) for c in report.regressions],
            )
        )
    else:
        b.append(Para("None: no cell did better than the control on any task."))
    b.append(Heading("Dead layers"))
    dead = [u for u in report.layer_use if u.status in ("never loaded", "loaded, never used")]
    b.append(
        Table(
            ["layer", "status", "evidence"],
            [[u.layer, u.status, u.evidence] for u in report.layer_use],
            id="layer-use",
        )
        if report.layer_use
        else Para("Not assessed.")
    )
    if dead:
        b.append(Para("Dead here: " + ", ".join(f"{u.layer} ({u.status})" for u in dead) + "."))
    # ---- isolation and exclusions
    b.append(Heading("Isolation and provenance"))
    if report.probe:
        verdicts = report.probe.get("cells") if isinstance(report.probe, dict) else None
        b.append(Para(f"Probe: {verdicts if verdicts else report.probe}"))
    else:
        b.append(
            Para(
                "No probe result is stored in this run folder: run `ablate probe` on the same setup to prove what reaches the model."
            )
        )
    if report.excluded_items:
        b.append(
            Table(
                ["item", "reason"],
                [[e.item, e.reason] for e in report.excluded_items],
                id="excluded",
            )
        )
    else:
        b.append(
            Para(
                "No item was excluded: every planned item completed and no session was flagged by provenance."
            )
        )
    # ---- caveats
    b.append(Heading("Caveats"))
    b.append(Bullets([f"**{c.id}**: {c.text}" for c in report.caveats]))
    # ---- what was run
    b.append(Heading("What was run"))
    fp = report.fingerprints
    cells_fp = fp.get("cells", {})
    rows = []
    if isinstance(cells_fp, dict):
        for cid, layers in cells_fp.items():
            if isinstance(layers, dict):
                rows.append(
                    [cid, ", ".join(f"{k}={str(v)[:8] or 'absent'}" for k, v in sorted(layers.items()))]
                )
    tasks_fp = fp.get("tasks", {})
    b.append(
        Bullets(
            [
                f"claude {run.claude_version}: sha256 {run.claude_sha256}",
                f"plan sha256 {fp.get('plan_sha256')}",
            ]
            + ([f"task {k}: sha256 {v}" for k, v in tasks_fp.items()] if isinstance(tasks_fp, dict) else [])
        )
    )
    if rows:
        b.append(Table(["cell", "layer fingerprints (sha256 prefix)"], rows, id="fingerprints"))
    b.append(Para(f"Generated by {report.generated_by} from the run folder alone (no model calls)."))
    return doc


def _binary_tables(report: Report) -> list[Block]:
    control = report.run.control
    other = next((c.cell for c in report.cells if c.cell != control), None)
    out: list[Block] = [Heading("Setup off (Clean) against setup on (Normal)")]
    if other is None:
        return out
    rows = []
    by = {(t.task, t.cell): t for t in report.task_table}
    for t in report.run.tasks:
        tid = str(t["id"])
        clean, normal = by.get((tid, other)), by.get((tid, control))
        if clean is None or normal is None:
            continue
        rows.append(
            [
                tid,
                f"{fmt_value('turns', clean.turns)} / {fmt_value('turns', normal.turns)}",
                f"{fmt_value('tool_calls', clean.tool_calls)} / {fmt_value('tool_calls', normal.tool_calls)}",
                f"{fmt_value('cost_usd', clean.cost_usd)} / {fmt_value('cost_usd', normal.cost_usd)}",
                f"{fmt_value('pitfall_free', clean.pitfall_free)} / {fmt_value('pitfall_free', normal.pitfall_free)}",
                f"{_num(clean.skills_invoked)} / {_num(normal.skills_invoked)}",
            ]
        )
    out.append(
        Table(
            ["task", "turns (Clean / Normal)", "tool calls", "cost", "pitfall avoided", "skills invoked"],
            rows,
            id="binary-tasks",
            caption=f"Clean = {other}, Normal = {control}; means per session",
        )
    )
    agg, styles = [], []
    for c in report.comparisons:
        if c.task is None and c.cell == other:
            styles.append(_style(c))
            agg.append(
                [
                    METRIC_LABELS.get(c.metric, c.metric),
                    fmt_value(c.metric, c.cell_value),
                    fmt_value(c.metric, c.control_value),
                    fmt_delta(c.metric, c.delta),
                    fmt_ci(c),
                    fmt_p(c.p_adjusted),
                    _real(c),
                ]
            )
    out.append(
        Table(
            ["metric (per session)", "Clean", "Normal", "Δ (Clean − Normal)", "interval", "Holm p", "real?"],
            agg,
            id="binary-aggregate",
            row_styles=styles,
        )
    )
    return out


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def _layered_tables(report: Report) -> list[Block]:
    out: list[Block] = [Heading("Per-task results (cells as columns)")]
    cells = [c.cell for c in report.cells]
    by = {(t.task, t.cell): t for t in report.task_table}
    for t in report.run.tasks:
        tid = str(t["id"])
        rows = []
        for label, attr, metric in (
            ("pitfall-free", "pitfall_free", "pitfall_free"),
            ("turns", "turns", "turns"),
            ("tool calls", "tool_calls", "tool_calls"),
            ("cost", "cost_usd", "cost_usd"),
            ("skills invoked", "skills_invoked", "turns"),
        ):
            rows.append(
                [label]
                + [fmt_value(metric, getattr(by[(tid, c)], attr)) if (tid, c) in by else "–" for c in cells]
            )
        rows.append(["sessions"] + [str(by[(tid, c)].n) if (tid, c) in by else "0" for c in cells])
        out.append(Heading(f"{tid} ({t['split']})", 3))
        out.append(Table(["", *cells], rows, id=f"task-{tid}"))
    out.append(Heading("Aggregate per cell", 3))
    pooled = {(c.cell, c.metric): c for c in report.comparisons if c.task is None}
    rows = []
    for c in report.cells:
        row = [c.cell + (" (no-op)" if c.no_op else ""), _layers(c.layers)]
        for m in ("pitfall_free", "turns", "cost_usd"):
            ms = c.metrics.get(m)
            val = fmt_value(m, ms.value if ms else None)
            cmp_ = pooled.get((c.cell, m))
            row.append(val + (f" ({fmt_delta(m, cmp_.delta)})" if cmp_ else ""))
        row.append(f"{100 * c.cache_read_share:.0f}%" if c.cache_read_share is not None else "–")
        row.append(f"{c.scored}/{c.items}")
        rows.append(row)
    out.append(
        Table(
            ["cell", "strips", "pitfall-free (Δ)", "turns (Δ)", "cost (Δ)", "cache-read share", "scored"],
            rows,
            id="aggregate",
        )
    )
    return out

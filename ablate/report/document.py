"""The report as a document: one builder per section (:data:`DOC_SECTIONS`), in reading order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ablate.report.blocks import (
    Block,
    Bullets,
    Document,
    Figure,
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
from ablate.report.carried import carried_blocks
from ablate.report.model import METRIC_LABELS, Comparison, Report
from ablate.report.tables import binary_tables, layered_tables
from ablate.stats import min_interval_blocks

__all__ = ["DOC_SECTIONS", "Block", "Document", "build_document"]


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


def regressions_blocks(report: Report) -> list[Block]:
    """Real comparisons where stripping a layer made the result better (the others only counted)."""
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


def holdout_blocks(report: Report) -> list[Block]:
    """The dev/holdout check of the primary metric."""
    out: list[Block] = [Heading("Dev and holdout tasks")]
    out.append(Para(report.holdout_note or "not checked"))
    if report.holdout:
        out.append(Bullets([f.message for f in report.holdout]))
    return out


def graders_blocks(report: Report) -> list[Block]:
    """Each named check (a plugin-eval grader) under its name: passed / evaluated, per cell."""
    if not report.graders:
        return []
    cells = list(dict.fromkeys(g.cell for g in report.graders))
    rows: dict[tuple[str, str], dict[str, str]] = {}
    meta: dict[tuple[str, str], tuple[str, float]] = {}
    for g in report.graders:
        rows.setdefault((g.task, g.grader), {})[g.cell] = f"{g.passed}/{g.n}"
        meta[(g.task, g.grader)] = (g.kind, g.weight)
    return [
        Heading("Graders"),
        Table(
            ["task", "grader", "kind", "weight", *cells],
            [
                [t, name, meta[(t, name)][0], f"{meta[(t, name)][1]:g}", *[by.get(c, "–") for c in cells]]
                for (t, name), by in rows.items()
            ],
            caption="times each named check passed / items where it could be evaluated",
            id="graders",
        ),
    ]


def probe_words(probe: dict[str, object]) -> str:
    """The stored probe result in words: overall verdict, fidelity, each cell's verdict."""
    if "error" in probe:
        return f"Probe: {probe['error']}"
    if probe.get("skipped"):
        earlier = probe.get("earlier")
        return (
            f"Probe: not run ({probe['skipped']}): nothing in this folder proves which layers reached the model "
            "in each cell; `ablate probe` on the same setup does, for free."
            + (
                f" An earlier probe of this folder refused the run — {probe_words(earlier)}"
                if isinstance(earlier, dict)
                else ""
            )
        )
    cells = probe.get("cells")
    verdicts = (
        [f"{c.get('id', '?')} {c.get('verdict', '?')}" for c in cells if isinstance(c, dict)]
        if isinstance(cells, list)
        else []
    )
    fidelity = probe.get("fidelity")
    equal = fidelity.get("equal") if isinstance(fidelity, dict) else None
    return (
        "Probe: "
        + ("every cell as expected" if probe.get("ok") else "NOT every cell as expected")
        + ("; shadow fidelity equal" if equal else "; shadow fidelity DIFFERENT" if equal is not None else "")
        + (f"; cells: {', '.join(verdicts)}" if verdicts else "")
        + "."
    )


@dataclass(frozen=True)
class Plot:
    """The forest plot's files, relative to the report (None: no plot)."""

    svg: str | None
    png: str | None


#: A document section: the blocks of one part of the report.
DocSection = Callable[[Report, Plot], list[Block]]


def header_section(report: Report, plot: Plot) -> list[Block]:
    """Header."""
    run, n = report.run, report.n
    b: list[Block] = []
    spend = (
        f"${run.spend_usd:.4f} "
        + ("simulated (nothing was billed)" if run.simulated else "spent")
        + (
            f", ${run.spend_list_usd:.4f} at list price with cache reads priced as fresh input"
            if run.spend_list_usd is not None
            else ""
        )
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
    if run.simulated:
        b.append(
            Para(
                "Simulated: the sessions reached ablate's simulated endpoint (ablate.sim), so every dollar "
                "figure in this report is what the simulated usage would cost at list price; nothing was billed.",
                strong=True,
            )
        )
    return b


def ranking_section(report: Report, plot: Plot) -> list[Block]:
    """The answer first."""
    run = report.run
    b: list[Block] = []
    b.append(Heading("Ranking: which layer earns its keep"))
    if run.repeats < 2:
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
    undecided = _undecided(report)
    b.append(Para(f"Order: {report.ranking_key}. Δ = cell − control; {real_rule}."))
    pooled = {(c.cell, c.metric): c for c in report.comparisons if c.task is None}
    prim = report.primary_metric
    rows = []
    for e in report.ranking:
        pc = pooled.get((e.cell, prim))
        rows.append(
            [
                str(e.rank),
                e.cell,
                layers_text(e.layers),
                "undecided"
                if e.cell in undecided
                else e.verdict + (f" ({', '.join(e.tradeoffs)})" if e.tradeoffs else ""),
                e.evidence,
                fmt_delta(prim, e.primary_delta) + (f" {fmt_ci(pc)}" if pc else ""),
                fmt_delta("turns", e.delta_turns),
                fmt_delta("cost_usd", e.delta_cost_usd),
                "; ".join(e.real_on) or "none",
            ]
        )
    b.append(
        Table(
            [
                "rank",
                "cell",
                "strips",
                "verdict",
                "evidence",
                f"Δ {METRIC_LABELS.get(prim, prim)} [CI]",
                "Δ turns",
                "Δ cost (simulated)" if report.run.simulated else "Δ cost",
                "real on",
            ],
            rows,
            id="ranking",
            row_styles=[
                "draw" if e.tie_group == "draw" and e.cell not in undecided else "" for e in report.ranking
            ],
        )
    )
    if report.no_op_cells:
        b.append(Bullets([f"not tested (no-op): {c.reason}" for c in report.no_op_cells]))
    if plot.svg:
        b.append(
            Figure(
                plot.svg,
                plot.png or "",
                "Forest plot: Δ per layer (cell − control) with intervals, one panel per metric; filled = real, "
                "hollow grey = draw",
            )
        )
    return b


def per_task_section(report: Report, plot: Plot) -> list[Block]:
    """Tables."""
    run = report.run
    b: list[Block] = []
    if run.binary:
        b.extend(binary_tables(report))
    else:
        b.extend(layered_tables(report))
    return b


def contributions_section(report: Report, plot: Plot) -> list[Block]:
    """Marginal contributions."""
    b: list[Block] = []
    b.append(Heading("Marginal contribution of each layer"))
    b.append(
        Para(
            "Paired on (task, repeat) blocks. Rates: Newcombe interval and exact test on discordant blocks; counts "
            "and cost: t interval on the per-block differences (not computable below "
            f"{min_interval_blocks(1 - report.alpha)} blocks) and the sign-flip test (exact up to 16 blocks, "
            "Monte Carlo with resamples scaled to the family's α/m above). Holm within each family (primary, "
            "secondary); intervals are per comparison (not adjusted), so 'real?' comes from the Holm-adjusted p "
            "alone."
        )
    )
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
        b.append(Heading(METRIC_LABELS.get(metric, metric), 3))
        b.append(
            Table(
                [
                    "cell",
                    "strips",
                    "task",
                    "family",
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
                row_styles=[row_style(c) for c in report.comparisons if c.metric == metric],
            )
        )
    notes = sorted({n for c in report.comparisons if c.not_computable for n in c.not_computable.split("; ")})
    if notes:
        b.append(Para("Not computable: " + "; ".join(notes) + "."))
    return b


def _sequential_mark(c: Comparison, primary: str) -> str:
    """'real?' in a sequential report: the anytime test's mark, or that the row is only description."""
    if c.task is None and c.metric == primary and c.method.startswith("anytime-valid"):
        return real_mark(c) + " (anytime)"
    return "descr." if c.p is not None else "n/a"


def spread_power_section(report: Report, plot: Plot) -> list[Block]:
    """Spread and power."""
    b: list[Block] = []
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
                "cell",
                "paired blocks",
                "α/m",
                "smallest detectable Δ (80% power)",
                "target Δ",
                "repeats needed",
                "cost of that run",
            ],
            [
                [
                    METRIC_LABELS.get(p.metric, p.metric),
                    p.cell or "–",
                    str(p.blocks_per_cell),
                    f"{p.alpha_each:.2g}" if p.alpha_each is not None else "–",
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
    return b


def regressions_dead_section(report: Report, plot: Plot) -> list[Block]:
    """Regressions and dead layers."""
    b: list[Block] = []
    b.extend(regressions_blocks(report))
    b.extend(holdout_blocks(report))
    b.extend(graders_blocks(report))
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
    return b


def isolation_section(report: Report, plot: Plot) -> list[Block]:
    """Isolation and exclusions."""
    b: list[Block] = []
    b.append(Heading("Isolation and provenance"))
    if report.probe:
        b.append(Para(probe_words(report.probe)))
    else:
        b.append(
            Para(
                "No probe.json in this run folder (it was planned or run without the probe-first step): run "
                "`ablate probe` on the same setup to prove what reaches the model."
            )
        )
    b.extend(carried_blocks(report))
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
    return b


def own_history_section(report: Report, plot: Plot) -> list[Block]:
    """The user's own history of the stripped layers (only on a machine that has it; context, not evidence)."""
    if report.provenance is None:
        return []
    from ablate.report.provenance import provenance_blocks

    return provenance_blocks(report.provenance)


def caveats_section(report: Report, plot: Plot) -> list[Block]:
    """Caveats."""
    b: list[Block] = []
    b.append(Heading("Caveats"))
    b.append(Bullets([f"**{c.id}**: {c.text}" for c in report.caveats]))
    return b


def what_was_run_section(report: Report, plot: Plot) -> list[Block]:
    """What was run."""
    run = report.run
    b: list[Block] = []
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
    return b


#: The document's sections, in reading order.
def noise_floor_section(report: Report, plot: Plot) -> list[Block]:
    """``--aa``: the two controls compared, metric by metric — the run's measured noise floor."""
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


DOC_SECTIONS: list[DocSection] = [
    header_section,
    noise_floor_section,
    ranking_section,
    per_task_section,
    contributions_section,
    spread_power_section,
    regressions_dead_section,
    isolation_section,
    own_history_section,
    caveats_section,
    what_was_run_section,
]


LAYER_SECTIONS = (ranking_section, contributions_section, spread_power_section, regressions_dead_section)


def build_document(report: Report, *, plot_svg: str | None, plot_png: str | None) -> Document:
    """The sections (:data:`DOC_SECTIONS`) in order; a piece run's (its cells cut many pieces) not the layer ones."""
    doc = Document(f"ablate report — {report.run.id}")
    skip = LAYER_SECTIONS if report.piece_design is not None else ()
    doc.blocks.extend(b for s in DOC_SECTIONS if s not in skip for b in s(report, Plot(plot_svg, plot_png)))
    return doc


def _undecided(report: Report) -> set[str]:
    """Cells a sequential analysis left undecided: shown as such, never in the draw group's style."""
    if report.sequential is None:
        return set()
    return {c for c, d in report.sequential.decisions.items() if d.get("decision") == "undecided"}

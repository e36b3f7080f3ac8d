"""The report's mandatory caveats (DESIGN §8), each filled with this run's facts, never boilerplate."""

from __future__ import annotations

from ablate.folder.layout import RunManifest
from ablate.report.model import BINARY_METRICS, METRIC_LABELS, Caveat, Report


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def compute_caveats(report: Report, manifest: RunManifest, m_family: int) -> list[Caveat]:
    """Every caveat of DESIGN §8 for this run (the list is never empty)."""
    out: list[Caveat] = []
    run, n = report.run, report.n
    control = run.control
    tested = [c for c in report.cells if c.cell != control and not c.no_op]
    blocks = n.tasks * n.repeats
    det = "; ".join(
        f"{METRIC_LABELS.get(p.metric, p.metric)} ±"
        + (f"{100 * p.detectable:.0f} pts" if p.metric in BINARY_METRICS else _num(p.detectable))
        if p.detectable is not None
        else f"{METRIC_LABELS.get(p.metric, p.metric)}: {p.detectable_note}"
        for p in report.power
    )
    out.append(
        Caveat(
            id="sample-size",
            text=(
                f"n per cell: {n.tasks} tasks × {n.repeats} repeats = {blocks} paired blocks "
                f"({n.excluded} of {n.items} items excluded). With Holm over {m_family} comparisons at "
                f"α = {report.alpha}, the smallest pooled differences this run detects with 80% power are: {det}."
            ),
        )
    )
    if n.repeats < 2:
        need = "; ".join(
            f"{METRIC_LABELS.get(p.metric, p.metric)}: {p.repeats_needed} repeats"
            + (f" (≈ ${p.cost_usd:.2f} at this run's spend per session)" if p.cost_usd is not None else "")
            for p in report.power
            if p.repeats_needed is not None
        )
        out.append(
            Caveat(
                id="one-repeat",
                text=(
                    "One repeat per (task, cell): run-to-run variance cannot be told apart from a layer's effect, "
                    "so nothing in this report is significant and no layer is ranked above another. "
                    f"Repeats needed at 80% power: {need or 'not computable from this run'}."
                ),
            )
        )
    expects = {str(t["id"]): list(t.get("expects", [])) for t in run.tasks}  # type: ignore[call-overload]
    targeted = sorted({lid for v in expects.values() for lid in v})
    untargeted_layers = sorted({lid for c in tested for lid in c.layers} - set(targeted))
    none = [t for t, v in expects.items() if not v]
    out.append(
        Caveat(
            id="task-selection",
            text=(
                f"Tasks were chosen, not randomly sampled: {len(expects)} tasks "
                f"({'; '.join(t + ' targets ' + (', '.join(v) or 'nothing') for t, v in expects.items())}). "
                + (
                    f"No task targets {', '.join(untargeted_layers)}: a draw there says little. "
                    if untargeted_layers
                    else ""
                )
                + (
                    f"Tasks that target no layer: {', '.join(none)}."
                    if none
                    else "Every task targets at least one layer."
                )
            ),
        )
    )
    out.append(
        Caveat(
            id="known-answer-bias",
            text=(
                f"The tasks' pitfalls were written by someone who knows the setup ({sum(1 for v in expects.values() if v)} "
                f"of {len(expects)} tasks name the layers they expect to matter): they test what the author "
                "already believes the setup does, and may miss what it does elsewhere."
            ),
        )
    )
    leaks = [f"{c.id}: {leak}" for c in manifest.cells for leak in c.leaks]
    flagged = [e for e in report.excluded_items if e.reason.startswith("provenance")]
    parts = [f"isolation backend: {run.isolation}"]
    parts.append(
        f"{len(leaks)} leak(s) the builder could not remove"
        + (f" ({'; '.join(map(str, leaks[:5]))})" if leaks else "")
    )
    parts.append(f"{len(flagged)} session(s) flagged by provenance and excluded")
    if report.no_op_cells:
        parts.append(
            "no-op cells (identical to the control, not tested): "
            + ", ".join(c.cell for c in report.no_op_cells)
        )
    if run.binary:
        parts.append(
            "binary run: the setup-off cell keeps the repository's ordinary files (README, code, repo CLAUDE.md "
            "unless stripped), so 'setup off' is not 'no context'"
        )
    if "links" in run.isolation:
        parts.append(
            "in links mode big trees are linked, not copied: writes through them reach the real files "
            "(every manifest cell lists them), and leaks such as managed settings, ancestor CLAUDE.md and the "
            "network are not removed"
        )
    out.append(Caveat(id="isolation", text="; ".join(parts) + "."))
    has_grades = any(m in ("checks_passed", "judge_pass") for m in {c.metric for c in report.comparisons})
    out.append(
        Caveat(
            id="turns-proxy",
            text=(
                "Turn and tool-call counts are weak proxies for quality (a layer can add turns by making the model "
                "check its work); read them with the pitfall-free rate"
                + (
                    " and the graded outcomes."
                    if has_grades
                    else "; this run has no execution checks or judge verdicts (`grades/`)."
                )
            ),
        )
    )
    seen = ", ".join(f"{m} ×{k}" for m, k in sorted(run.models_seen.items())) or "none"
    out.append(
        Caveat(
            id="model",
            text=(
                f"Model pinned to {run.model}; "
                + (
                    "verified: every scored transcript names it and no other"
                    if run.model_verified
                    else f"NOT verified: transcripts name {seen}; {run.sessions_without_model} name no model"
                )
                + "."
            ),
        )
    )
    spreads = [
        (c.cell, c.metrics["pitfall_free"].spread)
        for c in report.cells
        if "pitfall_free" in c.metrics and c.metrics["pitfall_free"].spread is not None
    ]
    if spreads:
        worst = max(spreads, key=lambda x: x[1] or 0.0)
        variance = (
            f"Run-to-run spread (sd of per-repeat pitfall-free rates) ranges {_pct(min(s for _, s in spreads if s is not None))}"
            f"–{_pct(worst[1])} (largest in {worst[0]}): a single run of one cell can differ from another run of the same "
            "cell by that much."
        )
    else:
        variance = (
            "Run-to-run variance is unknown: one repeat gives no spread; any single difference may be noise."
        )
    out.append(Caveat(id="variance", text=variance))
    shares = [(c.cell, c.cache_read_share) for c in report.cells if c.cache_read_share is not None]
    cache = (
        "Prompt cache: cache-read share of input tokens per cell "
        + ", ".join(f"{c} {_pct(s)}" for c, s in shares)
        if shares
        else "Prompt cache: no token counts recorded"
    )
    out.append(
        Caveat(
            id="prompt-cache",
            text=(
                cache
                + f". Order was randomised within each (task, repeat) block (seed {run.seed}), so cache warmth does not "
                "line up with a cell. Cost is shown as spent"
                + (
                    f" (${run.spend_usd:.4f}) and at list price with cache reads priced as fresh input "
                    f"(${run.spend_list_usd:.4f})"
                    if run.spend_list_usd is not None
                    else f" (${run.spend_usd:.4f}); the list price is unknown for this model"
                )
                + "."
            ),
        )
    )
    imports = [n for c in report.cells for n in c.notes if "imported by" in n]
    out.append(
        Caveat(
            id="version",
            text=(
                f"claude {run.claude_version} (sha256 {run.claude_sha256[:12]}…, "
                + ("the pinned version" if run.claude_pinned else "NOT the pinned version")
                + f"), isolation {run.isolation}. Results hold for this CLI version and model only."
                + (f" Nested layers: {'; '.join(imports)}." if imports else "")
            ),
        )
    )
    failed: dict[str, int] = {}
    for e in report.excluded_items:
        if e.reason.startswith(("failed", "not run")):
            failed[e.cell] = failed.get(e.cell, 0) + 1
    if failed:
        out.append(
            Caveat(
                id="failed-items",
                text="Items that failed or never ran are excluded from every comparison: "
                + ", ".join(f"{c} {k}" for c, k in sorted(failed.items()))
                + ". A cell that fails more often may look better on the sessions that survived.",
            )
        )
    return out

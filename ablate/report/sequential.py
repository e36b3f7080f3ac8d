"""The report of a sequential run: how it stopped, each cell's confidence sequence over rounds, its caveats
(report.json's ``sequential``, the "How the run stopped" section). A fixed run read before it is complete
gets the same anytime-valid figures from its results so far, because its fixed-n p-values are not valid at a
peek; a complete fixed run gets nothing from here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ablate.folder.adaptive import AdaptiveOptions, AdaptiveState, CellLook, Look, control_of, read_state
from ablate.folder.layout import PlanItem, RunFolder, RunManifest, read_manifest, utcnow
from ablate.folder.result import ItemResult, iter_results
from ablate.report.blocks import Block, Bullets, Figure, Heading, Para, Table, fmt_delta
from ablate.report.context import Context, Page, Section
from ablate.report.model import Report, SequentialReport
from ablate.stats.adaptive import analyse

#: Minimum effect assumed for the anytime figures of a fixed run looked at early.
PEEK_MIN_EFFECT = 0.2


def sequential_section(run_dir: Path, *, alpha: float = 0.05) -> SequentialReport | None:
    """The sequential block of ``run_dir``'s report, or None for a complete fixed run."""
    folder = RunFolder(run_dir)
    return sequential_of(folder, read_manifest(folder), folder.read_plan(), iter_results(folder), alpha=alpha)


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """An adaptive run, or a fixed run read before its end: "real" (so the verdicts and the ranking) from the
    anytime-valid analysis alone, every fixed-n figure kept as description; a complete fixed run is left as is."""
    from ablate.report.anytime import anytime_comparisons, anytime_families
    from ablate.report.ranking import ranking_of

    seq = sequential_of(ctx.folder, ctx.manifest, ctx.plan, ctx.results, alpha=ctx.alpha)
    if seq is None:
        return {"sequential": None}
    ctx.say(f"{seq.mode} run: real marks from the anytime-valid analysis of {seq.primary}")
    if seq.alpha != ctx.alpha:
        # the run decided at its own α (adaptive.json): the report's --alpha cannot re-decide it
        seq.caveats.append(
            f"The {seq.primary} comparisons are marked real at the run's own α {seq.alpha} (adaptive.json), "
            f"the level its stopping rule used; this report's α {ctx.alpha} applies to its descriptive "
            "figures only."
        )
    comparisons = anytime_comparisons(report.comparisons, seq, alpha=seq.alpha)
    return {
        "sequential": seq,
        "comparisons": comparisons,
        "families": anytime_families(report.families, seq, seq.alpha),
        "ranking": ranking_of(ctx, comparisons),
    }


def render(report: Report, page: Page) -> list[Block]:
    """ "How the run stopped" with its plot (drawn into the page's plots folder); nothing for a fixed run."""
    seq = report.sequential
    return [] if seq is None else section_blocks(seq, page.figure("sequential", lambda d: cs_plot(seq, d)))


def sequential_of(
    folder: RunFolder,
    manifest: RunManifest,
    plan: Sequence[PlanItem],
    results: Sequence[ItemResult],
    *,
    alpha: float,
) -> SequentialReport | None:
    """:func:`sequential_section` on a run folder already read (the report's builder has it in hand)."""
    state = read_state(folder)
    if state is not None:
        return _from_state(state, mode="adaptive")
    ran = {r.item for r in results}
    done = {r.item for r in results if r.complete}
    if not plan or all(p.item in ran for p in plan):
        return None  # every item ran (failed ones included): the fixed design reached its end
    options = AdaptiveOptions(max_repeats=manifest.repeats, min_effect=PEEK_MIN_EFFECT, alpha=alpha)
    control = control_of(manifest)
    repeats_done = sum(
        1 for r in range(manifest.repeats) if all(p.item in done for p in plan if p.repeat == r)
    )
    look = Look(
        round=repeats_done,
        at=utcnow(),
        sessions=len(done),
        spend_usd=round(sum(r.cost_usd or 0.0 for r in results), 6),
        analysis_s=0.0,
        cells=analyse(manifest, results, options, control),
    )
    return _from_state(AdaptiveState(options=options, control=control, looks=[look]), mode="peek")


def _from_state(state: AdaptiveState, *, mode: Literal["adaptive", "peek"]) -> SequentialReport:
    decisions: dict[str, dict[str, object]] = {}
    for cell, last in state.decisions().items():
        first = next(
            (lk.round for lk in state.looks if lk.cells.get(cell) and lk.cells[cell].decision != "undecided"),
            None,
        )
        decisions[cell] = {
            "decision": last.decision,
            "reason": last.reason,
            "round": first,
            "blocks": last.blocks,
        }
    return SequentialReport(
        mode=mode,
        primary=state.primary,
        control=state.control,
        **state.options.model_dump(include={"alpha", "min_effect", "draw_beta", "max_repeats"}),
        stopped=state.stopped,
        looks=state.looks,
        decisions=decisions,
        caveats=_caveats(state, mode),
        replans=state.replans,
        inert=state.inert,
    )


def _caveats(state: AdaptiveState, mode: str) -> list[str]:
    o = state.options
    out = []
    if mode == "adaptive":
        rounds = len(state.looks)
        m = len(state.decisions())
        out.append(
            f"The design was sequential: {rounds} looks (one after every round), cells stopped once decided. "
            f"The guarantees that hold: the chance of any false 'real' among the {m} "
            f"comparisons is at most {o.alpha} however many looks were taken (anytime-valid p-values, Holm); "
            f"a cell whose pitfall-free effect is at least {o.min_effect} is called 'no effect of interest' "
            f"with probability at most {o.draw_beta} (e-processes against an effect of ±{o.min_effect}); each "
            f"cell's {100 * (1 - o.alpha):.0f}% confidence sequence holds at every round at once — per cell, "
            f"not jointly: some one of {m} sequences may miss with probability up to "
            f"{1 - (1 - o.alpha) ** m:.2g}. Holm's adjustment is recomputed at every look from every cell's "
            "anytime p-value, so a stopped cell's adjusted p can still fall when other cells' p-values fall (a "
            "cell stopped as 'no effect of interest' can later read 'real'); a 'real' never reverts."
        )
        out.append(
            f"Only the pooled {state.primary} comparisons are tested (anytime-valid p, Holm, and the "
            "confidence sequence as their interval); every other p-value and interval of the report is "
            "fixed-n, assumes the number of blocks was fixed in advance, is descriptive here and marks "
            "nothing real. Cells that stopped early have fewer blocks than the control, so their per-cell "
            "rates rest on fewer sessions."
        )
    else:
        out.append(
            "This run is not complete: a fixed-n p-value read before the planned end is invalid (each peek "
            "inflates the false-positive rate), so the anytime-valid figures of this section are the ones to "
            f"read now (Holm at {o.alpha}; 'no effect of interest' for |Δ| < {o.min_effect}). The report's "
            f"'real' marks come from them alone (the pooled {state.primary} comparisons); every fixed-n "
            "p-value and interval is descriptive until the run is complete."
        )
    out.append(constant_effect_caveat(state))
    if state.stopped in ("max-repeats", "budget"):
        left = [c for c, v in state.decisions().items() if v.decision == "undecided"]
        if left:
            out.append(
                f"Stopped at the {state.stopped}: {', '.join(left)} undecided — neither an effect nor its "
                "absence was established."
            )
    return out


def constant_effect_caveat(state: AdaptiveState) -> str:
    """What the confidence sequences assume, and the drift check of the looks (first half against second)."""
    text = (
        "The confidence sequences and the e-values assume one effect throughout the run (the paired "
        "differences of every round drawn from the same distribution); an effect that drifts during the run (a "
        "model or CLI change, a flaky service) can leave the sequence far from the running mean."
    )
    if len(state.looks) < 2:
        return text + " Drift check: not possible with one look."
    drifted = drift(state)
    if not drifted:
        return text + (
            " Drift check (each cell's mean paired difference, first half of its blocks against the second, "
            "permutation test, Bonferroni over cells): no drift found."
        )
    return text + " Drift check: " + "; ".join(drifted) + " — read those cells' intervals with care."


def drift(state: AdaptiveState, alpha: float = 0.05) -> list[str]:
    """Cells whose mean paired difference (+1 gained, −1 lost, 0) differs between the look nearest half their
    blocks and the rest: a seeded two-sided permutation test of the means, Bonferroni over cells."""
    import numpy as np
    from scipy import stats as sps

    last = state.looks[-1].cells
    out = []
    for cell, now in last.items():
        half = min(
            (lk.cells[cell] for lk in state.looks[:-1] if cell in lk.cells),
            key=lambda c: abs(c.blocks - now.blocks / 2),
            default=None,
        )
        if half is None or not 1 < half.blocks < now.blocks - 1:
            continue
        first = (half.gained, half.lost, half.blocks)
        second = (now.gained - half.gained, now.lost - half.lost, now.blocks - half.blocks)
        a, b = (np.repeat([1.0, -1.0, 0.0], [g, lo, n - g - lo]) for g, lo, n in (first, second))
        if np.ptp(np.concatenate([a, b])) == 0:
            continue
        res = sps.permutation_test(
            (a, b),
            lambda x, y, axis: x.mean(axis=axis) - y.mean(axis=axis),
            permutation_type="independent",
            n_resamples=9999,
            vectorized=True,
            random_state=0,
        )
        p = float(res.pvalue)
        if p <= alpha / max(1, len(last)):
            out.append(
                f"{cell}'s mean paired difference was {a.mean():+.2f} over its first {len(a)} blocks and "
                f"{b.mean():+.2f} over the next {len(b)} (permutation p {p:.2g})"
            )
    return out


def section_blocks(seq: SequentialReport, plot: tuple[str, str] | None) -> list[Block]:
    """The "How the run stopped" section (or "Anytime-valid figures so far" for a peek)."""
    title = "How the run stopped" if seq.mode == "adaptive" else "Anytime-valid figures so far"
    blocks: list[Block] = [Heading(title)]
    last = seq.looks[-1] if seq.looks else None
    if seq.mode == "adaptive":
        blocks.append(
            Para(
                f"Stopped: {seq.stopped or 'not yet (the run goes on)'} after {len(seq.looks)} rounds"
                + (f", {last.sessions} sessions, ${last.spend_usd:.4f}" if last else "")
                + f" (at most {seq.max_repeats} rounds; min effect {100 * seq.min_effect:.0f} pts; α {seq.alpha})."
                + "".join(
                    f" After round {r.round} the rounds ran the control and the one-out cells of the "
                    f"{len(r.pieces)} pieces still undecided ({', '.join(r.pieces)})."
                    for r in seq.replans
                )
                + "".join(
                    f" {task} was no longer scheduled after round {r}: every cell had scored the same on it."
                    for task, r in seq.inert.items()
                )
            )
        )
    rows = []
    for cell, d in seq.decisions.items():
        c = last.cells[cell] if last else None
        cs = (
            f"[{fmt_delta('pitfall_free', c.cs_low)}, {fmt_delta('pitfall_free', c.cs_high)}]"
            if c and c.cs_low is not None and c.cs_high is not None
            else "–"
        )
        rows.append(
            [
                cell,
                str(d["decision"]),
                "–" if d["round"] is None else str(d["round"]),
                str(d["blocks"]),
                fmt_delta("pitfall_free", None if c is None else c.delta),
                cs,
                "–" if c is None else f"{c.p_holm:.3g}",
                _turns(c),
                str(d["reason"]),
            ]
        )
    blocks.append(
        Table(
            ["cell", "decision", "round", "blocks", f"Δ {seq.primary}", f"{100 * (1 - seq.alpha):.0f}% CS",
             "anytime p (Holm)", "Δ turns (CS)", "reason"],
            rows,
            id="sequential",
            caption=f"each cell against {seq.control} on the paired (task, repeat) blocks",
        )
    )  # fmt: skip
    if plot is not None:
        blocks.append(Figure(svg=plot[0], png=plot[1], alt="confidence sequence of each cell over rounds"))
    blocks.append(Bullets(list(seq.caveats)))
    return blocks


def _turns(c: CellLook | None) -> str:
    if c is None or c.turns_delta is None or c.turns_cs_low is None or c.turns_cs_high is None:
        return "–"
    return f"{c.turns_delta:+.1f} [{c.turns_cs_low:+.1f}, {c.turns_cs_high:+.1f}]"


def cs_plot(seq: SequentialReport, out_dir: Path) -> tuple[Path, Path] | None:
    """``sequence.svg``/``.png``: each cell's confidence sequence for Δ over rounds, ±min-effect marked."""
    if len(seq.looks) < 1 or not seq.decisions:
        return None
    from ablate.report.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for cell in seq.decisions:
        looks = [
            (lk.round, c.delta, c.cs_low, c.cs_high)
            for lk in seq.looks
            if (c := lk.cells.get(cell)) is not None
        ]
        drawn = [look for look in looks if None not in look]
        if not drawn:
            continue
        xs, mid, low, high = zip(*drawn, strict=True)
        line = ax.plot(xs, mid, marker="o", ms=3, label=cell)[0]
        ax.fill_between(xs, low, high, alpha=0.15, color=line.get_color())
    for y in (-seq.min_effect, seq.min_effect):
        ax.axhline(y, ls=":", color="#555555", lw=1)
    ax.axhline(0, color="#999999", lw=0.8)
    ax.set_xlabel("round")
    ax.set_ylabel(f"Δ {seq.primary} (cell − {seq.control})")
    ax.set_ylim(-1, 1)
    ax.legend(fontsize=7, ncol=4, loc="lower left")
    fig.tight_layout()
    return save_figure(plt, fig, out_dir, "sequence")


SECTION = Section("sequential", build, render)

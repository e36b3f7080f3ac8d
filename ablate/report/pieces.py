"""The report of a piece run (``ablate run --pieces``, docs/PIECES.md#runs): every piece's effect (on − off, from
:func:`ablate.stats.screening_inference.analyse` over the manifest's design), its verdict, a confirmed piece's
removal answer, and its cost in tokens per point of effect; a table and a forest plot, first in its report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ablate.core.tokens import tokens_of_chars
from ablate.folder.adaptive import PieceLook, read_state
from ablate.folder.design import PieceDesignRecord
from ablate.folder.layout import RunManifest
from ablate.report.blocks import Block, Bullets, Figure, Heading, Para, Table, fmt_delta, fmt_interval, fmt_p
from ablate.report.context import Context, Page, Section, on_model, read_probe
from ablate.report.families import side_values
from ablate.report.model import BINARY_METRICS, HIGHER_IS_BETTER, METRIC_LABELS, Caveat, Report
from ablate.report.paired import holm_real, interval, not_computable, pair_blocks, paired_test
from ablate.report.piece_model import PieceDesignInfo, PieceRow, Removal
from ablate.stats.screening import DesignError, design_of
from ablate.stats.screening_inference import Outcome, PieceAnalysis, PieceEffect, PieceVerdict, analyse
from ablate.stats.types import PairedResult


def outcomes_of(ctx: Context, record: PieceDesignRecord) -> list[Outcome]:
    """Every scored session of a design cell with a value of the primary metric (in a screening run that
    re-planned, of its whole-design rounds: the later ones ran one-out cells beside the control)."""
    row_of = record.row_of()
    state = read_state(ctx.folder)
    end = state.replans[0].round if state and state.replans and record.kind == "screening" else None
    return [
        Outcome(row_of[cell], task, repeat, it.values[ctx.primary])
        for (task, cell, repeat), it in ctx.items.scored.items()
        if cell in row_of
        and ctx.primary in it.values
        and record.screens(repeat)
        and (end is None or repeat < end)
    ]


def removals(ctx: Context, record: PieceDesignRecord) -> dict[str, Removal]:
    """Each confirmed piece's one-out answer on the confirmation blocks (the layers' paired test), Holm over them."""
    stage = record.confirm
    if stage is None:
        return {}
    ran = {p.cell for p in ctx.plan if not record.screens(p.repeat)}
    confirmed = [p.id for p in record.pieces if stage.cells.get(p.id) in ran]
    blocks = [(t, r) for t in ctx.task_ids for r in ctx.repeats if not record.screens(r)]
    control = side_values(ctx, record.rows[0].cell)
    floor = ctx.alpha / max(1, len(confirmed))
    results = [
        paired_test(
            ctx.primary,
            pair_blocks(side_values(ctx, stage.cells[p]), control, blocks),
            level=1 - ctx.alpha,
            seed=ctx.manifest.seed % 2**32,
            p_floor=floor,
        )
        for p in confirmed
    ]
    marked = holm_real([(r.p_value, r.delta) for r in results], ctx.alpha)
    return {
        p: _removal(r, padj, real, record.min_effect, ctx.primary in HIGHER_IS_BETTER)
        for p, r, (padj, real) in zip(confirmed, results, marked, strict=True)
    }


def _removal(r: PairedResult, p_adjusted: float | None, real: bool, margin: float, higher: bool) -> Removal:
    """The cell's Δ (without − with) turned round: with − without, as a piece's effect."""
    lo, hi, _method = interval(r)
    effect = None if r.delta is None else -r.delta
    low, high = (None, None) if lo is None or hi is None else (-hi, -lo)
    verdict: PieceVerdict = "undecided"
    if real and effect:
        verdict = "helps" if (effect > 0) == higher else "hurts"
    elif low is not None and high is not None and -margin < low and high < margin:
        verdict = "draw"
    why = "; ".join(not_computable(r)) or None
    return Removal(
        effect=effect, ci_low=low, ci_high=high, p_adjusted=p_adjusted, verdict=verdict, blocks=r.n_pairs,
        reason=why,
    )  # fmt: skip


def cost_per_point(tokens: int, effect: float | None, verdict: str, binary: bool) -> float | None:
    """Tokens per percentage point (pass/fail) or per metric unit of effect, for a piece that helps."""
    if verdict != "helps" or effect is None or effect == 0:
        return None
    return tokens / (abs(effect) * (100.0 if binary else 1.0))


def measured(record: PieceDesignRecord, probe: dict[str, Any] | None) -> PieceDesignRecord:
    """``record`` with each piece's tokens measured from the run's probe (docs/PIECES.md#tokens): the characters
    the proved cells removed, solved by least squares over the cells (4 a token); unchanged when the probe did
    not run or too few cells were proved to tell every piece apart."""
    import numpy as np

    rows = [
        (set(c["cut_pieces"]), float(c["pieces"]["removed_chars"]))
        for c in (probe or {}).get("cells", [])
        if c.get("verdict") == "faithful" and c.get("cut_pieces") and isinstance(c.get("pieces"), dict)
    ]
    ids = [p.id for p in record.pieces]
    design = np.array([[pid in cut for pid in ids] for cut, _ in rows], dtype=float).reshape(-1, len(ids))
    if np.linalg.matrix_rank(design) < len(ids):
        return record
    chars = np.linalg.lstsq(design, np.array([n for _, n in rows]), rcond=None)[0]
    pieces = [
        p.model_copy(update={"tokens": tokens_of_chars(max(0, round(n))), "tokens_source": "measured"})
        for p, n in zip(record.pieces, chars, strict=True)
    ]
    return record.model_copy(update={"pieces": pieces})


def piece_rows(record: PieceDesignRecord, effects: Sequence[PieceEffect], *, binary: bool) -> list[PieceRow]:
    """The report's rows: each piece's estimate with its kind and tokens from the design record."""
    by_id = {p.id: p for p in record.pieces}
    return [
        PieceRow(
            **asdict(e),
            **by_id[e.id].model_dump(include={"layer", "kind", "tokens", "tokens_source"}),
            tokens_per_point=cost_per_point(by_id[e.id].tokens, e.effect, e.verdict, binary),
        )
        for e in effects
    ]


def pieces_section(ctx: Context, report: Report) -> dict[str, Any]:
    """A piece run's per-piece rows and design (nothing for a layer run)."""
    record = ctx.manifest.design
    if record is None:
        return {}
    record = measured(record, read_probe(ctx.run_dir))
    binary = ctx.primary in BINARY_METRICS
    outcomes = outcomes_of(ctx, record)
    ctx.say(f"estimating {len(record.pieces)} pieces' effects from {len(outcomes)} sessions")
    analysis: PieceAnalysis | None = None
    try:
        analysis = analyse(
            design_of(record),
            outcomes,
            binary=binary,
            alpha=ctx.alpha,
            min_effect=record.min_effect,
            higher_is_better=ctx.primary in HIGHER_IS_BETTER,
        )
        effects = analysis.pieces
    except DesignError as exc:
        effects = [
            PieceEffect(p.id, None, None, None, None, None, "undecided", str(exc)) for p in record.pieces
        ]
    removal = removals(ctx, record)
    rows = [
        r.model_copy(update={"removal": removal.get(r.id)})
        for r in piece_rows(record, effects, binary=binary)
    ]
    info = PieceDesignInfo(
        kind=record.kind,
        construction=record.construction,
        metric=ctx.primary,
        method=analysis.method if analysis else "not estimated",
        sessions=len(outcomes),
        blocks=analysis.blocks if analysis else 0,
        df=analysis.df if analysis else 0,
        alpha=ctx.alpha,
        min_effect=record.min_effect,
        cost_unit="percentage point" if binary else METRIC_LABELS.get(ctx.primary, ""),
    )
    state = read_state(ctx.folder) if analysis is not None else None
    decided = state.piece_decisions() if state is not None else {}
    if state is not None and decided:
        rows = [_anytime(r, decided.get(r.id), binary) for r in rows]
        info = info.model_copy(update={"decided_by": "anytime", "alpha": state.options.alpha})
    return {"pieces": rows, "piece_design": info}


def _anytime(row: PieceRow, last: PieceLook | None, binary: bool) -> PieceRow:
    """An adaptive run's piece: verdict and adjusted p from its last anytime-valid look (the rest: description)."""
    if last is None:
        return row
    per_point = cost_per_point(row.tokens, row.effect, last.verdict, binary)
    return row.model_copy(
        update={"p_adjusted": last.p_holm, "verdict": last.verdict, "tokens_per_point": per_point}
    )


def piece_caveat(report: Report, manifest: RunManifest) -> Caveat | None:
    """What a piece run's effects are, and how far its tokens are measured."""
    info = report.piece_design
    if info is None:
        return None
    text = (
        f"Per-piece effects come from a {info.kind} design ({info.construction}). A piece's effect is its main "
        "effect: the mean with it minus the mean without it, averaged over the other pieces being on or off."
    )
    if info.kind == "screening":
        text += (
            " That is the piece's average contribution over the design's sub-setups (its Banzhaf value), not "
            "what deleting it from your full setup does: when pieces work together (a section that tells the "
            "model to use a skill) the two differ, and only the 'removing it' column of a confirmed piece "
            "answers the second."
        )
        drawn = manifest.design is not None and manifest.design.drawn is not None
        text += (
            " The design's columns were drawn at random from the run's seed, and each piece is tested by "
            "re-drawing its own column (a conditional randomization test): a piece nothing depends on is "
            f"marked real at most {info.alpha:g} of the time (Holm over the pieces), whatever the other "
            "pieces' interactions. Its effect and interval are least-squares figures: a description, whose "
            "interval may not cover when pieces interact."
            if drawn
            else " The folded-over design keeps main effects clear of every two-piece interaction, but each "
            "is aliased with some three-piece interactions: pieces that only work together can show as one "
            "piece, or mark a piece that takes no part in them (this run folder predates drawn designs)."
        )
    else:
        text += " Leave-one-out measures each piece against the full setup only (pieces that stand in for each other look useless)."
    if any(p.tokens_source == "estimate" for p in report.pieces):
        text += (
            " Tokens are estimates from each piece's text (4 characters a token), not measured from a request; "
            "`ablate pieces --measure` measures them."
        )
    return Caveat(id="pieces", text=text)


def piece_sentence(r: PieceRow, metric: str) -> str:
    """One piece's verdict in one sentence."""
    words = {
        "helps": "it earns its keep",
        "hurts": "the setup did better without it",
        "draw": "no real effect",
    }
    effect = "not estimated" if r.effect is None else fmt_delta(metric, r.effect)
    return (
        f"**{r.id}** ({r.kind}, {r.tokens} tokens): **{headline(r)}**"
        + (" (removing it)" if r.removal is not None else "")
        + ", "
        + words.get(headline(r), "neither an effect nor its absence was established")
        + f"; keeping it moves {METRIC_LABELS.get(metric, metric)} by {effect} "
        + fmt_interval(metric, r.ci_low, r.ci_high)
        + "."
    )


def headline(row: PieceRow) -> str:
    """A piece's answer: its removal verdict when the run confirmed it, else the screening's."""
    return row.removal.verdict if row.removal is not None else row.verdict


def _verdict_cell(row: PieceRow) -> str:
    said = headline(row)
    text = f"**{said}**" if said in ("helps", "hurts") else said
    return text + (f" (removal; screening: {row.verdict})" if row.removal is not None else "")


def _removal_cell(metric: str, row: PieceRow) -> str:
    r = row.removal
    if r is None:
        return "–"
    if r.effect is None:
        return f"not computable ({r.reason})" if r.reason else "not computable"
    return f"{fmt_delta(metric, r.effect)} {fmt_interval(metric, r.ci_low, r.ci_high)}, Holm p {fmt_p(r.p_adjusted)}"


def pieces_blocks(report: Report, plot: tuple[str, str] | None) -> list[Block]:
    """The per-piece table (and its forest plot) of a piece run."""
    from ablate.report.flipped import links

    info = report.piece_design
    if info is None:
        return []
    metric = info.metric
    confirmed = [r for r in report.pieces if r.removal is not None]
    rows = [
        [r.id, r.kind, f"{r.tokens}" + ("" if r.tokens_source in ("request", "measured") else " (est.)"),
         "–" if r.effect is None else fmt_delta(metric, r.effect), fmt_interval(metric, r.ci_low, r.ci_high),
         fmt_p(r.p_adjusted), _verdict_cell(r), *([_removal_cell(metric, r)] if confirmed else []),
         "–" if r.tokens_per_point is None else f"{r.tokens_per_point:.3g}"]
        for r in report.pieces
    ]  # fmt: skip
    unit = info.cost_unit or "unit"
    headers = ["piece", "kind", "tokens", "effect", "interval", "Holm p", "verdict",
               *(["removing it"] if confirmed else []), f"tokens per {unit}"]  # fmt: skip
    stage = (
        f" Confirmed ({len(confirmed)} piece(s): real at screening or named with --confirm): removing it = the "
        "full setup − the full setup without the piece, on the one-out confirmation stage's own blocks "
        f"({max(r.removal.blocks for r in confirmed if r.removal)} at most), with its "
        f"{int(100 * (1 - info.alpha))}% interval and Holm p over the confirmed pieces; a confirmed piece's "
        "verdict is its removal verdict."
        if confirmed
        else ""
    )
    out: list[Block] = [
        Heading("Pieces: which piece earns its keep" + on_model(report)),
        Table(
            headers,
            rows,
            id="pieces",
            links=links(report, piece=True),
            row_styles=["real" if headline(r) in ("helps", "hurts") else "draw" for r in report.pieces],
        ),
        Bullets([piece_sentence(r, metric) for r in report.pieces]),
        Para(
            f"{info.kind} design, {info.construction}; {info.sessions} sessions in {info.blocks} blocks "
            f"(task × repeat). Effect = the piece's average contribution over the design's sub-setups (its "
            f"Banzhaf value): mean {METRIC_LABELS.get(metric, metric)} with the piece − without it "
            f"(positive: keeping it raises the metric), {int(100 * (1 - info.alpha))}% interval (per piece, not "
            f"adjusted for the others), Holm across the pieces: helps or hurts when the Holm p is at most "
            f"{info.alpha:g}; draw = the interval inside ±{fmt_delta(metric, info.min_effect).lstrip('+')}. Tokens per "
            f"{unit} = the context the piece adds to every session divided by the effect it has "
            "(for a piece that helps)."
            + (
                " Adaptive run: each verdict and Holm p come from the anytime-valid look the run stopped on "
                "(adaptive.json); the effects and intervals are the fixed-n fit, as description."
                if info.decided_by == "anytime"
                else ""
            )
            + stage
        ),
    ]
    if plot is not None:
        out.append(Figure(plot[0], plot[1], "Each piece's effect (with − without) and its interval"))
    return out


def render(report: Report, page: Page) -> list[Block]:
    """The per-piece section with its forest plot (drawn into the page's plots folder); nothing for a layer run."""
    if report.piece_design is None:
        return []
    from ablate.report.plots import pieces_plot

    return pieces_blocks(report, page.figure("pieces", lambda d: pieces_plot(report, d)))


SECTION = Section("pieces", pieces_section, render)

"""Models as a factor (``--models``): each model's answer, built by the answer's own sections on a context
narrowed to that model's items, and the model × cell interaction per cell and other model against the first:
per block (cell − control on the first) − (cell − control on the other), its mean, t interval and sign-flip
test of zero (:func:`ablate.report.paired.zero_tests`), Holm over every cell and pair
(docs/ARCHITECTURE.md#models)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import Field

from ablate.folder.metrics import METRIC_LABELS, fmt_delta
from ablate.report import header, pieces, power_table, ranking, sequential, tables
from ablate.report.blocks import Block, Bullets, Heading, Para, Table, strips_text
from ablate.report.context import Context, Page, Section, make_context
from ablate.report.families import side_values
from ablate.report.interactions import interaction_blocks
from ablate.report.model import CellSummary, Comparison, Counts, Doc, Family, PowerRow, RankEntry, Report
from ablate.report.paired import fmt_tested, zero_tests
from ablate.report.piece_model import PieceRow

KEY = "models"
INTERACTIONS = "model_interactions"
#: The sections whose parts make one model's answer, in report order, and the fields a part takes of them.
ANSWER = [m.SECTION for m in (ranking, pieces, sequential, header, tables, power_table)]
RUN_FIELDS = ("model", "model_verified", "models_seen", "spend_usd")
ROWS = ("n", "comparisons", "families", "ranking", "cells", "power", "pieces")


class ModelPart(Doc):
    """One model's part of ``report.json``: the rows of the top level, from that model's sessions alone."""

    model: str
    """The model its sessions were pinned to."""
    model_verified: bool
    """Every scored transcript of it names that model and no other."""
    models_seen: dict[str, int] = Field(default_factory=dict)
    """Model id → its sessions whose transcript names it."""
    spend_usd: float
    """Its sessions' recorded spend."""
    n: Counts
    """Its items: planned, complete, excluded."""
    comparisons: list[Comparison]
    families: list[Family]
    ranking: list[RankEntry]
    cells: list[CellSummary]
    power: list[PowerRow]
    pieces: list[PieceRow] = Field(default_factory=list, exclude_if=lambda v: not v)
    """A piece run: each piece's effect on this model."""


def parts(report: Report) -> list[ModelPart]:
    """The report's model parts (none for a run of one model)."""
    return [ModelPart.model_validate(p) for p in SECTION.part(report) or []]


def view(report: Report, part: ModelPart) -> Report:
    """``report`` with ``part``'s answer in place of the top level's (the reference model's)."""
    run = report.run.model_copy(update={k: getattr(part, k) for k in RUN_FIELDS})
    return report.model_copy(update={"run": run, **{k: getattr(part, k) for k in ROWS}})


def _part(ctx: Context, report: Report) -> ModelPart:
    built = Report.model_construct(**{k: report.__dict__[k] for k in ("generated_by", "alpha")})
    for section in ANSWER:
        built.__dict__.update(section.build(ctx, built))
    run = built.__dict__["run"]
    return ModelPart(
        **{k: getattr(run, k) for k in RUN_FIELDS}, **{k: built.__dict__.get(k, []) for k in ROWS}
    )


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Each model's part, and every cell's interaction with the model (each other model against the first)."""
    models = ctx.manifest.models
    if not models:
        return {}
    ctx.say(f"models: each of {', '.join(models)} on its own, and the model × cell interaction")
    views = [make_context(ctx.run_dir, alpha=ctx.alpha, control=ctx.control.id, primary=ctx.primary,
                          say=lambda _m: None, model=m) for m in models]  # fmt: skip
    got = [_part(v, report) for v in views]
    found: list[dict[str, Any]] = []
    diffs: list[list[float]] = []
    for cell in ctx.ranked():
        for i in range(1, len(models)):
            found.append(_pair(cell.id, strips_text(ctx.layers[cell.id], cell.pieces), got[0], got[i]))
            diffs.append(block_differences(views[0], views[i], cell.id))
    rows = []
    for f, t in zip(found, zero_tests(diffs, alpha=ctx.alpha, seed=ctx.manifest.seed), strict=True):
        row = {**f, "delta_difference": t.pop("effect"), **t}
        row["verdict"] = "the model changes it" if row["real"] else "no real difference"
        rows.append({**row, "sentence": sentence(row, ctx.primary)})
    return {KEY: [p.model_dump(mode="json") for p in got], INTERACTIONS: rows}


def block_differences(first: Context, other: Context, cell: str) -> list[float]:
    """Per block with all four sessions scored: (cell − control on ``first``) − (cell − control on ``other``)."""
    a, ca, b, cb = (
        side_values(v, c, first.primary) for v in (first, other) for c in (cell, first.control.id)
    )
    return [(a[k] - ca[k]) - (b[k] - cb[k]) for k in a if k in ca and k in b and k in cb]


def _pair(cell: str, strips: str, first: ModelPart, other: ModelPart) -> dict[str, Any]:
    """The row's identity and each model's pooled primary comparison of the cell (Δ and verdict)."""
    primary = {p.model: next((c for c in p.comparisons if c.cell == cell and c.task is None and c.family == "primary"), None)
               for p in (first, other)}  # fmt: skip
    return {
        "cell": cell,
        "strips": strips,
        "models": [first.model, other.model],
        "deltas": {m: c.delta if c else None for m, c in primary.items()},
        "verdicts": {m: c.verdict if c else "not computable" for m, c in primary.items()},
    }


def _on(row: dict[str, Any], model: str, metric: str) -> str:
    delta, verdict = row["deltas"][model], row["verdicts"][model]
    if verdict in ("helps", "hurts") and delta is not None:
        return f"{verdict} on {model} by {ranking.amount(metric, abs(delta))}"
    if delta is None:
        return f"could not be compared on {model}"
    return f"makes no real difference on {model} ({fmt_delta(metric, delta)})"


def sentence(row: dict[str, Any], metric: str) -> str:
    """``C11 (strips …): it helps on A by 41 pts … and makes no real difference on B (−2 pts); the difference
    between the two (−39 pts [−60, −18]) is real (Holm p 0.004, 12 blocks).``"""
    first, other = row["models"]
    head = f"**{row['cell']}** (strips {row['strips']}): it {_on(row, first, metric)} and {_on(row, other, metric)}"
    if row["delta_difference"] is None:
        return f"{head}; no block has both models' sessions of it and the control scored."
    lo, hi = (fmt_delta(metric, row[k]) for k in ("ci_low", "ci_high"))
    interval = f" [{lo}, {hi}]" if row["ci_low"] is not None else ""
    return (
        f"{head}; the difference between the two ({fmt_delta(metric, row['delta_difference'])}{interval}) is "
        f"{'real' if row['real'] else 'not real'} {fmt_tested(row)}."
    )


def answer_lines(report: Report) -> list[str]:
    """The terminal's lines for a run of several models: each model's verdicts, then the interactions."""
    out = []
    for part in parts(report):
        blocks = answer_blocks(view(report, part))
        said = next((b.items for b in blocks if isinstance(b, Bullets)), [])
        out += [f"on {part.model}:", *(f"  {s.replace('**', '')}" for s in said)]
    said = [f"  {r['sentence'].replace('**', '')}" for r in getattr(report, INTERACTIONS, None) or []]
    return out + (["the model × cell interaction:", *said] if said else [])


def answer_blocks(report: Report) -> list[Block]:
    """The answer's blocks: a layer run's ranking, or a piece run's per-piece table (no figure drawn)."""
    section = pieces.SECTION if report.piece_design is not None else ranking.SECTION
    return section.render(report, Page())


def render(report: Report, page: Page) -> list[Block]:
    """Each model's answer table and verdicts, then the interaction table and one sentence per cell."""
    got = parts(report)
    if not got:
        return []
    out: list[Block] = [
        Heading("Models: the answer on each"),
        Para(f"Every (task, repeat) block ran every cell on each of {', '.join(p.model for p in got)}, in one shuffled "
             f"sweep ({sum(p.n.items for p in got)} sessions, ${sum(p.spend_usd for p in got):.4f} in all). The "
             f"answer above, and every table below this section, is on {got[0].model}, the reference; here is each model's own."),
    ]  # fmt: skip
    for part in got:
        verified = "verified from every transcript" if part.model_verified else "**NOT verified**"
        out += [Heading(f"On {part.model}", level=3),
                Para(f"{part.n.complete} of {part.n.items} sessions complete, ${part.spend_usd:.4f}; model {verified}.")]  # fmt: skip
        for b in answer_blocks(view(report, part)):
            if isinstance(b, Table):
                out.append(dataclasses.replace(b, id=f"{b.id}-{part.model}", links={}))
            elif isinstance(b, Bullets):
                out.append(b)
    metric = report.primary_metric
    return out + interaction_blocks(
        getattr(report, INTERACTIONS, None) or [],
        metric,
        "Does the model change the answer?",
        f"Per cell and per model against {got[0].model}: in each block, (cell − control on {got[0].model}) − "
        f"(cell − control on the other), on {METRIC_LABELS.get(metric, metric)}; sign-flip test over the blocks, "
        "Holm over every cell and model pair.",
        {
            "cell": lambda r: r["cell"],
            "models": lambda r: " − ".join(r["models"]),
            "difference": lambda r: fmt_delta(metric, r["delta_difference"]),
        },
        "model-interactions",
    )


SECTION = Section(KEY, build, render)

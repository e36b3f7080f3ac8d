"""Interactions found, not only warned about: for each pair of pieces the confirmation stage ran, how much more
the two give together than the sum of each alone (docs/PIECES.md#interactions). Per (task, repeat) block,
full − without A − without B + without both; its mean, t interval and sign-flip test of 0
(:func:`ablate.report.paired.zero_tests`, exact up to its block limit), Holm over the pairs: a **synergy**
when positive on a metric where higher is better, an **overlap** when negative."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ablate.folder.metrics import HIGHER_IS_BETTER, fmt_delta
from ablate.report.blocks import Block, Heading, Para, Table, fmt_interval
from ablate.report.context import Context, Page, Section
from ablate.report.families import side_values
from ablate.report.model import Report
from ablate.report.paired import fmt_holm, fmt_tested, zero_tests

KEY = "interactions"
#: One column of an interaction table: its text for a row.
Cell = Callable[[dict[str, Any]], str]


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Every pair the stage ran: the interaction, its interval, Holm-adjusted p, verdict and sentence."""
    record = ctx.manifest.design
    stage = record.confirm if record is not None else None
    if record is None or stage is None or not stage.pairs:
        return {}
    ran = {p.cell for p in ctx.plan if not record.screens(p.repeat)}
    blocks = [(t, r) for t in ctx.task_ids for r in ctx.repeats if not record.screens(r)]
    values = functools.partial(side_values, ctx)

    full = values(record.rows[0].cell)
    found: list[dict[str, Any]] = []
    diffs: list[list[float]] = []
    for key, cell in stage.pairs.items():
        a, b = key.split("+")
        if cell not in ran or stage.cells.get(a) not in ran or stage.cells.get(b) not in ran:
            continue
        no_a, no_b, neither = values(stage.cells[a]), values(stage.cells[b]), values(cell)
        both = [k for k in blocks if all(k in v for v in (full, no_a, no_b, neither))]
        diffs.append([full[k] - no_a[k] - no_b[k] + neither[k] for k in both])
        found.append({
            "pieces": [a, b],
            "together": _mean([full[k] - neither[k] for k in both]),
            "alone": {a: _mean([no_b[k] - neither[k] for k in both]), b: _mean([no_a[k] - neither[k] for k in both])},
            "removing": {a: _mean([full[k] - no_a[k] for k in both]), b: _mean([full[k] - no_b[k] for k in both])},
        })  # fmt: skip
    rows = tested(
        ctx, found, diffs, ("synergy", "overlap"), lambda r: sentence(r, ctx.primary, record.min_effect)
    )
    return {KEY: rows} if rows else {}


def tested(
    ctx: Context,
    found: list[dict[str, Any]],
    diffs: list[list[float]],
    verdicts: tuple[str, str],
    say: Callable[[dict[str, Any]], str],
    effect: str = "effect",
) -> list[dict[str, Any]]:
    """Each subject's row with its test against zero (Holm over the subjects; its value under ``effect``), its
    verdict (the first of ``verdicts`` for a real effect in the metric's better direction, the second for the
    other, else ``not shown``) and its ``sentence``, said by ``say``."""
    higher, up, down = ctx.primary in HIGHER_IS_BETTER, *verdicts
    rows = []
    for f, t in zip(found, zero_tests(diffs, alpha=ctx.alpha, seed=ctx.manifest.seed), strict=True):
        real, value = t.pop("real"), t.pop("effect")
        verdict = (up if (value > 0) == higher else down) if real and value else "not shown"
        row = {**f, effect: value, **t, "verdict": verdict}
        rows.append({**row, "sentence": say(row)})
    return rows


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def sentence(row: dict[str, Any], metric: str, min_effect: float) -> str:
    """``A and B help only together: removing either loses 55 pts`` — or what the figures say otherwise."""
    a, b = row["pieces"]
    fmt = functools.partial(fmt_delta, metric)
    alone, removing = row["alone"], row["removing"]
    if row["effect"] is None:
        return f"{a} and {b}: no block has all four of their cells scored."
    figures = (
        f"together they give {fmt(row['together'])}, {a} alone {fmt(alone[a])}, {b} alone {fmt(alone[b])}; "
        f"interaction {fmt(row['effect'])} {fmt_tested(row)}"
    )
    small = all(v is not None and abs(v) < min_effect for v in alone.values())
    if row["verdict"] == "synergy" and small:
        return (
            f"{a} and {b} help only together: removing {a} loses {fmt(removing[a])}, removing {b} "
            f"{fmt(removing[b])}; {figures}."
        )
    if row["verdict"] == "synergy":
        return f"{a} and {b} give more together than apart: {figures}."
    if row["verdict"] == "overlap":
        return f"{a} and {b} overlap (either does part of the other's work): {figures}."
    return f"{a} and {b}: no interaction shown; {figures}."


def interaction_section(
    base: Section, heading: str, intro: str, columns: Callable[[str], dict[str, Cell]], table_id: str
) -> Section:
    """``base`` rendered as :func:`interaction_blocks` of its own rows, ``columns`` given the primary metric."""

    def render(report: Report, page: Page) -> list[Block]:
        metric = report.primary_metric
        return interaction_blocks(base.part(report), metric, heading, intro, columns(metric), table_id)

    return dataclasses.replace(base, render=render)


def interaction_blocks(
    rows: list[dict[str, Any]], metric: str, heading: str, intro: str, columns: dict[str, Cell], table_id: str
) -> list[Block]:
    """An interaction section: its ``columns``, interval, Holm p and verdict, and each row's sentence."""
    if not rows:
        return []
    tail: dict[str, Cell] = {"interval": lambda r: fmt_interval(metric, r["ci_low"], r["ci_high"]),
            "Holm p": lambda r: fmt_holm(r["p_adjusted"]), "verdict": lambda r: r["verdict"]}  # fmt: skip
    cells = {**columns, **tail}
    return [
        Heading(heading),
        Para(intro),
        Table(list(cells), [[cell(r) for cell in cells.values()] for r in rows], id=table_id),
        *(Para(r["sentence"]) for r in rows),
    ]


SECTION = interaction_section(
    Section(KEY, build),
    "Interactions: pieces that work together",
    "Per pair the confirmation stage ran: the full setup, each piece removed and both removed, in the "
    "same blocks. The interaction is how much more the two give together than the sum of each alone "
    "(full − without A − without B + without both); sign-flip test over the blocks, Holm over the pairs.",
    lambda metric: {
        "pieces": lambda r: " + ".join(r["pieces"]),
        "together": lambda r: fmt_delta(metric, r["together"]),
        "interaction": lambda r: fmt_delta(metric, r["effect"]),
    },
    KEY,
)

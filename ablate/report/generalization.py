"""How far it generalizes: per layer (cell − control) or per piece (on − off, from each task's sessions alone),
the effect on each task and the two-sided sign test over the tasks whose effect is not 0
(``scipy.stats.binomtest``), Holm over the subjects: the tasks as a sample of those the run did not see. With
n tasks of one sign p = 2^(1 − n), so a claim about k subjects needs ⌈1 + log2(k / α)⌉ tasks (9 for 11 at 0.05)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats as sps

from ablate.folder.metrics import HIGHER_IS_BETTER, fmt_delta
from ablate.report.blocks import Block, Heading, Para, Table
from ablate.report.context import Context, Page, Section
from ablate.report.families import task_differences
from ablate.report.model import METRIC_LABELS, Report
from ablate.report.paired import fmt_holm, holm_some
from ablate.report.pieces import outcomes_of
from ablate.stats.screening import DesignError, design_of
from ablate.stats.screening_inference import block_ols

KEY = "generalization"
TEST = "two-sided sign test over tasks (exact binomial), Holm over the subjects"


def tasks_needed(subjects: int, alpha: float) -> int:
    """The fewest tasks at which a two-sided sign test, Holm over ``subjects``, can reach ``alpha``."""
    return math.ceil(1 + math.log2(max(1, subjects) / alpha))


def layer_effects(ctx: Context) -> dict[str, dict[str, float]]:
    """Per ranked cell, per task: the mean over its paired blocks of cell − control."""
    return {
        c.id: {t: float(np.mean(d)) for t, d in task_differences(ctx, c.id).items()} for c in ctx.ranked()
    }


def piece_effects(ctx: Context) -> dict[str, dict[str, float]]:
    """Per piece, per task: its least-squares effect from that task's sessions (a task that cannot separate
    the pieces left out)."""
    record = ctx.manifest.design
    assert record is not None
    design = design_of(record)
    outcomes = outcomes_of(ctx, record)
    out: dict[str, dict[str, float]] = {p: {} for p in design.pieces}
    for task in ctx.task_ids:
        got = [o for o in outcomes if o.task == task]
        if not got:
            continue
        try:
            fit = block_ols(
                design.matrix()[[o.row for o in got]],
                np.array([o.repeat for o in got]),
                np.array([o.value for o in got]),
            )
        except DesignError:
            continue
        for pid, effect in zip(design.pieces, fit.beta, strict=True):
            out[pid][task] = float(effect)
    return out


def sign_p(helps: int, hurts: int) -> float | None:
    """The two-sided sign test's p of helps against hurts (None: no task with an effect)."""
    n = helps + hurts
    return None if n == 0 else float(sps.binomtest(helps, n, 0.5).pvalue)


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Every subject's per-task effects, the sign test across tasks and what a task-level claim needs."""
    piece_run = ctx.manifest.design is not None
    effects = piece_effects(ctx) if piece_run else layer_effects(ctx)
    higher = ctx.primary in HIGHER_IS_BETTER
    # a layer's Δ removes it (a loss helps-by-keeping); a piece's effect keeps it
    keeps_sign = 1.0 if piece_run else -1.0
    rows: list[dict[str, Any]] = []
    for subject, by_task in effects.items():
        kept = [keeps_sign * v for v in by_task.values()]
        helps = sum(1 for v in kept if (v > 0) == higher and v != 0)
        hurts = sum(1 for v in kept if (v < 0) == higher and v != 0)
        rows.append({
            "subject": subject, "kind": "piece" if piece_run else "layer",
            "layers": [] if piece_run else ctx.layers.get(subject, []),
            "per_task": [{"task": t, "effect": by_task[t]} for t in ctx.task_ids if t in by_task],
            "helps_on": helps, "hurts_on": hurts, "tasks": len(by_task), "p": sign_p(helps, hurts),
        })  # fmt: skip
    needed = tasks_needed(len(rows), ctx.alpha)
    for r, adjusted in zip(rows, holm_some([r["p"] for r in rows]), strict=True):
        r["p_adjusted"] = adjusted
        r["verdict"] = verdict(r, ctx.alpha)
        r["sentence"] = sentence(r, needed, len(ctx.task_ids))
    if not rows:
        return {}
    effect = "on − off: what keeping it does" if piece_run else "cell − control: what removing it does"
    return {
        KEY: {"metric": ctx.primary, "effect": effect, "test": TEST, "alpha": ctx.alpha, "tasks": len(ctx.task_ids),
              "tasks_needed": needed, "subjects": rows}
    }  # fmt: skip


def verdict(row: dict[str, Any], alpha: float) -> str:
    """``helps``/``hurts across tasks`` (Holm-adjusted p ≤ α, by the majority), else ``not shown across tasks``."""
    p = row["p_adjusted"]
    if p is not None and p <= alpha:
        return "helps across tasks" if row["helps_on"] > row["hurts_on"] else "hurts across tasks"
    return "not shown across tasks"


def sentence(row: dict[str, Any], needed: int, tasks: int) -> str:
    """``skills helps on 3 of 4 tasks, hurts on 1; across tasks p = 0.62 (Holm: 1) — 4 tasks cannot …``."""
    name = row["subject"] + (f" ({', '.join(row['layers'])})" if row["layers"] else "")
    said = f"{name} helps on {row['helps_on']} of {row['tasks']} tasks, hurts on {row['hurts_on']}"
    if row["p"] is None:
        said += "; no task shows an effect"
    else:
        said += f"; across tasks p = {row['p']:.3g} (Holm: {row['p_adjusted']:.3g})"
    if tasks < needed:
        said += (
            f" — {tasks} task(s) cannot support a task-level claim about this many subjects: it needs at "
            f"least {needed}"
        )
    return said + "."


def render(report: Report, page: Page) -> list[Block]:
    """The per-task table and each subject's sentence."""
    part = SECTION.part(report)
    if not part:
        return []
    subjects: Sequence[dict[str, Any]] = part["subjects"]
    tasks = sorted({t["task"] for s in subjects for t in s["per_task"]})
    metric = str(part["metric"])
    table_rows = []
    for s in subjects:
        by = {t["task"]: t["effect"] for t in s["per_task"]}
        effects = [fmt_delta(metric, by.get(t)) if t in by else "—" for t in tasks]
        table_rows.append([s["subject"], *effects, fmt_holm(s["p_adjusted"]), s["verdict"]])
    return [
        Heading("How far it generalizes"),
        Para(
            f"Per task, each {subjects[0]['kind']}'s effect on the {METRIC_LABELS.get(metric, metric)} "
            f"({part['effect']}); across tasks, the {part['test']}. The tests above are about these sessions; "
            "this one treats the tasks as a sample of the tasks you care about."
        ),
        Table(["subject", *tasks, "across tasks p (Holm)", "verdict"], table_rows, id="generalization"),
        *(Para(s["sentence"]) for s in subjects),
    ]


SECTION = Section(KEY, build, render)

"""The power section: each cell's run-to-run spread, and power rows per cell and metric, from the blocks the
cell's pooled comparison actually paired, for the test the report runs at Holm's first step (alpha / m of the
metric's family): the exact discordant-block test for rates; the paired t power (the large-sample sign-flip
test) for counts and costs, never below what the exact sign-flip test can reach (smallest p 2 / 2^n); the
anytime-valid e-process for a sequential report's pooled primary comparisons
(:func:`ablate.stats.sequential.detectable_anytime`). A detectable rate change is the weaker direction's."""

from __future__ import annotations

import functools
import math
import statistics
from typing import Any

from ablate.report.blocks import Block, Heading, Table, fmt_delta, fmt_value
from ablate.report.context import Context, Page, Section
from ablate.report.families import paired_values
from ablate.report.model import BINARY_METRICS, METRIC_LABELS, MetricSummary, PowerRow, Report
from ablate.stats.power import detectable_binary, detectable_mean, runs_needed_binary, runs_needed_mean
from ablate.stats.resampling import EXACT_MAX_BLOCKS
from ablate.stats.types import NotComputable

#: Effects the "repeats needed" figures are computed for.
TARGET_RATE_CHANGE = 0.2
TARGET_TURNS = 1.0
TARGET_COST_FRACTION = 0.1


@functools.lru_cache(maxsize=256)
def _binary(
    n: int, base: float | None, alpha_each: float
) -> tuple[float | NotComputable, int | NotComputable, float | None]:
    if base is None:
        none = NotComputable("no control items")
        return none, none, None
    target = base - TARGET_RATE_CHANGE if base - TARGET_RATE_CHANGE >= 0 else base + TARGET_RATE_CHANGE
    return detectable_binary(n, base, alpha_each), runs_needed_binary(base, target, alpha_each), target - base


@functools.lru_cache(maxsize=256)
def _unit_detectable(n: int, alpha_each: float) -> float | NotComputable:
    """detectable_mean for sd 1: the detectable effect scales with the sd."""
    return detectable_mean(n, 1.0, alpha_each)


@functools.lru_cache(maxsize=256)
def _anytime(n: int, base: float | None, alpha_each: float, min_effect: float) -> float | NotComputable:
    from ablate.stats.sequential import detectable_anytime, prior_for

    if base is None:
        return NotComputable("no control items")
    d = detectable_anytime(n, base, alpha_each, prior_for(min_effect))
    if d is None:
        return NotComputable(f"no change of the rate is detectable with 80% power in {n} blocks")
    return d


def _mean(
    n: int, diffs: list[float], base: float | None, metric: str, alpha_each: float
) -> tuple[float | NotComputable, int | NotComputable, float | None, float | None]:
    sd = statistics.stdev(diffs) if len(diffs) > 1 else None
    effect = (TARGET_COST_FRACTION * base if base else None) if metric == "cost_usd" else TARGET_TURNS
    if sd is None or sd == 0:
        why = NotComputable(
            "fewer than 2 paired blocks" if sd is None else "no spread of the per-block differences"
        )
        return why, why, effect, sd
    floor = max(2, math.ceil(1 - math.log2(alpha_each)))  # the fewest blocks where 2 / 2^n ≤ alpha_each
    det: float | NotComputable
    if n < floor and n <= EXACT_MAX_BLOCKS:
        det = NotComputable(
            f"the exact sign-flip test's smallest p with {n} blocks is {2 / 2**n:.2g}, above α/m = {alpha_each:.2g}"
        )
    else:
        unit = _unit_detectable(n, alpha_each)
        det = unit * sd if isinstance(unit, float) else unit
    need = runs_needed_mean(effect, sd, alpha_each) if effect else NotComputable("no effect size")
    if isinstance(need, int):
        need = max(need, floor)
    return det, need, effect, sd


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """One power row per (metric, tested cell), from the blocks its pooled comparison actually paired."""
    task_ids, sequential = ctx.task_ids, report.sequential
    spend = sum(it.result.cost_usd or 0.0 for it in ctx.items.all_items)
    mean_cost = spend / len(ctx.items.all_items) if ctx.items.all_items else None
    m = {f.name: max(1, f.m) for f in report.families}
    rows: list[PowerRow] = []
    for x in report.comparisons:
        if x.task is not None:
            continue
        alpha_each = ctx.alpha / m[x.family]
        xs, ys, _ = paired_values(ctx, x.cell, x.metric)
        n, base = len(xs), sum(ys) / len(ys) if ys else None
        sd: float | None = None
        if sequential is not None and x.metric == sequential.primary:
            alpha_each = sequential.alpha / max(1, len(sequential.decisions))
            det, need, effect = _binary(n, base, alpha_each)
            det = _anytime(n, base, alpha_each, sequential.min_effect)
            test = "anytime-valid e-process (Holm's first step; repeats needed: fixed-n)"
        elif x.metric in BINARY_METRICS:
            det, need, effect = _binary(n, base, alpha_each)
            test = "exact discordant-block test"
        else:
            det, need, effect, sd = _mean(
                n, [a - b for a, b in zip(xs, ys, strict=True)], base, x.metric, alpha_each
            )
            test = "sign-flip test (power from the paired t)"
        reps = math.ceil(need / len(task_ids)) if isinstance(need, int) and task_ids else None
        rows.append(
            PowerRow(
                metric=x.metric,
                cell=x.cell,
                family=x.family,
                blocks_per_cell=n,
                alpha_each=alpha_each,
                sd_diff=sd,
                test=test,
                detectable=det if isinstance(det, float) else None,
                detectable_note=det.reason if isinstance(det, NotComputable) else None,
                effect=effect,
                repeats_needed=reps,
                repeats_note=need.reason if isinstance(need, NotComputable) else None,
                cost_usd=(reps * len(task_ids) * len(ctx.manifest.cells) * mean_cost)
                if reps and mean_cost is not None
                else None,
            )
        )
    return {"power": rows}


def _spread(metric: str, s: MetricSummary | None) -> str:
    if s is None:
        return "–"
    return f"{fmt_value(metric, s.value)} (sd {'–' if s.spread is None else fmt_value(metric, s.spread)})"


def render(report: Report, page: Page) -> list[Block]:
    """Each cell's run-to-run spread per metric, and the power table."""
    metrics = list(dict.fromkeys(c.metric for c in report.comparisons)) or ["pitfall_free"]
    headers = ["metric", "cell", "paired blocks", "α/m", "smallest detectable Δ (80% power)", "target Δ",
               "repeats needed", "cost of that run"]  # fmt: skip
    return [
        Heading("Run-to-run spread and power"),
        Table(
            ["cell", *[f"{METRIC_LABELS.get(m, m)} (sd of repeat means)" for m in metrics]],
            [[c.cell, *(_spread(m, c.metrics.get(m)) for m in metrics)] for c in report.cells],
            id="spread",
        ),
        Table(
            headers,
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
        ),
    ]


SECTION = Section("power", build, render, layer_runs_only=True)

"""Build the report (:class:`~ablate.report.model.Report`) from a run folder, and nothing else.

Paired design: a block is one (task, repeat); every cell of a block ran in one sweep. A comparison pairs the
cell's and the control's items of the blocks where both are scored (complete, not flagged, metric known).
The report is assembled by :data:`SECTIONS`, a list of builders run in order: each reads the shared
:class:`Context` and the fields earlier builders filled, and fills its own fields of the report.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ablate import __version__
from ablate.core.errors import RunFolderError
from ablate.folder.layout import ManifestCell, RunManifest
from ablate.report.carried import carried_section
from ablate.report.context import Context, make_context, read_probe
from ablate.report.families import plan_comparisons, run_comparisons
from ablate.report.model import (
    HIGHER_IS_BETTER,
    METRIC_LABELS,
    Caveat,
    Counts,
    GraderRate,
    HoldoutFinding,
    Provenance,
    Report,
    RunInfo,
    SequentialReport,
)
from ablate.report.pieces import pieces_section
from ablate.report.power_table import power_rows
from ablate.report.ranking import RANKING_KEY, rank
from ablate.report.summaries import cell_summaries, layer_use, task_table

#: A section builder fills some fields of the report being built from the context.
Section = Callable[[Context, Report], None]


def comparisons_section(ctx: Context, report: Report) -> None:
    """Every comparison in its Holm family, and the ranking read from the real ones."""
    ctx.say(f"comparing {len(ctx.tested)} cells with {ctx.control.id} on {len(ctx.metrics)} metrics")
    planned = plan_comparisons(ctx.tested, ctx.metrics, ctx.task_ids, ctx.primary)
    comparisons, families = run_comparisons(
        planned,
        ctx.items.scored,
        control=ctx.control.id,
        layers=ctx.layers,
        task_ids=ctx.task_ids,
        repeats=ctx.repeats,
        alpha=ctx.alpha,
        seed=ctx.manifest.seed,
    )
    report.comparisons, report.families, report.primary_metric = comparisons, families, ctx.primary
    report.ranking = rank(_layers_tested(ctx), ctx.layers, comparisons, ctx.primary)
    report.ranking_key, report.no_op_cells = RANKING_KEY, ctx.no_ops


def sequential_inference_section(ctx: Context, report: Report) -> None:
    """An adaptive run, or a fixed run read before its end: "real" (and so the verdicts, the ranking and the
    regressions) from the anytime-valid analysis alone; every fixed-n figure stays, as description
    (:mod:`ablate.report.anytime`). A complete fixed run is left exactly as the comparisons made it."""
    from ablate.report.anytime import anytime_comparisons, anytime_families
    from ablate.report.sequential import sequential_of

    seq = sequential_of(ctx.folder, ctx.manifest, ctx.plan, ctx.results, alpha=ctx.alpha)
    report.sequential = seq
    if seq is None:
        return
    ctx.say(f"{seq.mode} run: real marks from the anytime-valid analysis of {seq.primary}")
    if seq.alpha != ctx.alpha:
        # the run decided at its own α (adaptive.json): the report's --alpha cannot re-decide it
        seq.caveats.append(
            f"The {seq.primary} comparisons are marked real at the run's own α {seq.alpha} (adaptive.json), "
            f"the level its stopping rule used; this report's α {ctx.alpha} applies to its descriptive "
            "figures only."
        )
    report.comparisons = anytime_comparisons(report.comparisons, seq, alpha=seq.alpha)
    report.families = anytime_families(report.families, seq, seq.alpha)
    report.ranking = rank(_layers_tested(ctx), ctx.layers, report.comparisons, ctx.primary)


def _layers_tested(ctx: Context) -> list[ManifestCell]:
    """The tested cells that strip layers (the A/A cell of ``--aa`` is a noise floor, never ranked)."""
    return [c for c in ctx.tested if not c.aa_of]


def noise_floor_section(ctx: Context, report: Report) -> None:
    """``--aa``: each metric's pooled A/A difference — flip rate, spread, and whether it is "real"."""
    from ablate.report.families import paired_values
    from ablate.report.model import BINARY_METRICS, NoiseFloorRow

    rows = []
    for aa in (c for c in ctx.tested if c.aa_of):
        for x in report.comparisons:
            if x.cell != aa.id or x.task is not None:
                continue
            xs, ys, _ = paired_values(
                ctx.items.scored, aa.id, ctx.control.id, x.metric, ctx.task_ids, ctx.repeats
            )
            d = [a - b for a, b in zip(xs, ys, strict=True)]
            sd = statistics.stdev(d) if len(d) > 1 else None
            rows.append(
                NoiseFloorRow(
                    metric=x.metric,
                    cell=aa.id,
                    blocks=len(d),
                    flip_rate=sum(1 for v in d if v) / len(d) if d and x.metric in BINARY_METRICS else None,
                    spread=sd,
                    delta=x.delta,
                    ci_low=x.ci_low,
                    ci_high=x.ci_high,
                    p_adjusted=x.p_adjusted,
                    real=x.real,
                )
            )
    report.noise_floor = rows


def provenance_section(ctx: Context, report: Report) -> None:
    """The user's own history of the stripped layers, when this machine has it (never part of the figures)."""
    from ablate.report.provenance import provenance_block

    config = ctx.manifest.setup.config_dir
    block = None
    if config is not None:
        try:
            block = provenance_block(ctx.run_dir, Path(config))
        except OSError as exc:
            ctx.say(f"your own history: not read ({exc})")
    report.provenance = Provenance.model_validate(block) if block else None


def cells_section(ctx: Context, report: Report) -> None:
    """Per-cell summaries and the per-task table."""
    report.cells = cell_summaries(
        ctx.manifest,
        ctx.plan,
        ctx.items,
        ctx.metrics,
        ctx.repeats,
        ctx.layers,
        {n.cell for n in ctx.no_ops},
        ctx.alpha,
    )
    report.task_table = task_table(ctx.manifest, ctx.items.scored)


def power_section(ctx: Context, report: Report) -> None:
    """Power per cell and metric from the blocks actually paired (see :mod:`ablate.report.power_table`)."""
    spend = sum(it.result.cost_usd or 0.0 for it in ctx.items.all_items)
    n = len(ctx.items.all_items)
    report.power = power_rows(
        report.comparisons,
        report.families,
        ctx.items.scored,
        control=ctx.control.id,
        task_ids=ctx.task_ids,
        repeats=ctx.repeats,
        alpha=ctx.alpha,
        mean_cost=spend / n if n else None,
        n_cells=len(ctx.manifest.cells),
        sequential=report.sequential,
    )


def regressions_section(ctx: Context, report: Report) -> None:
    """Real comparisons where stripping a layer made the result better; the rest in that direction counted."""
    comparisons = report.comparisons
    report.regressions = [x for x in comparisons if x.verdict == "hurts"]
    report.regressions_not_real = sum(
        1
        for x in comparisons
        if x.task is not None and not x.real and x.delta and ((x.delta > 0) == (x.metric in HIGHER_IS_BETTER))
    )


def holdout_section(ctx: Context, report: Report) -> None:
    """The dev/holdout check on the primary metric, task by task (:mod:`ablate.grade.splits`)."""
    from ablate.grade.splits import holdout_finding, split_of_tasks

    split_of = split_of_tasks(ctx.folder)
    if set(split_of.values()) != {"dev", "holdout"}:
        report.holdout_note = "not checked: the dev/holdout check needs tasks in both splits"
        return
    found: list[HoldoutFinding] = []
    for c in ctx.tested:
        by: dict[str, dict[str, list[float]]] = {"dev": {}, "holdout": {}}
        for (t, cid, r), it in ctx.items.scored.items():
            other = ctx.items.scored.get((t, ctx.control.id, r))
            if cid == c.id and other and ctx.primary in it.values and ctx.primary in other.values:
                by[split_of[t]].setdefault(t, []).append(it.values[ctx.primary] - other.values[ctx.primary])
        f = holdout_finding(
            c.id,
            ctx.primary,
            by["dev"],
            by["holdout"],
            higher_is_better=ctx.primary in HIGHER_IS_BETTER,
            alpha=ctx.alpha,
        )
        if f is not None:
            found.append(f)
    report.holdout = found
    report.holdout_note = (
        f"checked {len(ctx.tested)} cells on {METRIC_LABELS[ctx.primary]}, task by task: "
        + (f"{len(found)} dev gain(s) reverse on holdout" if found else "no dev gain reverses on holdout")
    )


def run_section(ctx: Context, report: Report) -> None:
    """The run's identity, counts, model verification, spend and fingerprints."""
    m = ctx.manifest
    models_seen: dict[str, int] = {}
    without = 0
    for it in ctx.items.scored.values():
        seen = it.result.session.models if it.result.session is not None else []
        without += not seen
        for name in seen:
            models_seen[name] = models_seen.get(name, 0) + 1
    lists = [it.list_cost for it in ctx.items.all_items]
    report.run = RunInfo(
        id=m.run_id,
        claude_version=m.claude.version,
        claude_sha256=m.claude.sha256,
        claude_pinned=m.claude.pinned,
        model=m.model,
        model_verified=bool(ctx.items.scored) and without == 0 and set(models_seen) == {m.model},
        models_seen=models_seen,
        sessions_without_model=without,
        cell_set=m.cell_set,
        binary=m.cell_set == "binary",
        control=ctx.control.id,
        isolation=isolation_words(m),
        repeats=m.repeats,
        seed=m.seed,
        created_at=m.created_at,
        ablate_version=m.ablate_version,
        tasks=[
            {"id": t.id, "split": t.split, "expects": list(t.expects), "sha256": t.sha256} for t in m.tasks
        ],
        spend_usd=sum(it.result.cost_usd or 0.0 for it in ctx.items.all_items),
        spend_list_usd=None if any(v is None for v in lists) else sum(v or 0.0 for v in lists),
        simulated=bool(m.setup.endpoint and m.setup.endpoint.simulated),
    )
    report.n = Counts(
        tasks=len(ctx.task_ids),
        repeats=m.repeats,
        items=len(ctx.plan),
        complete=sum(1 for r in ctx.results if r.complete),
        excluded=len(ctx.items.excluded),
    )
    report.excluded_items = ctx.items.excluded
    report.layer_use = layer_use(m, ctx.control, ctx.items.scored)
    report.fingerprints = {
        "claude": {"version": m.claude.version, "sha256": m.claude.sha256},
        "tasks": {t.id: t.sha256 for t in m.tasks},
        "cells": {c.id: c.fingerprints for c in m.cells},
        "plan_sha256": m.plan_sha256,
    }
    report.probe = read_probe(ctx.run_dir)


#: The report's section builders, in order (a builder may read the fields an earlier one filled).
def graders_section(ctx: Context, report: Report) -> None:
    """Each named check (a plugin-eval grader) under its name: how often it passed, per task and cell."""
    from ablate.grade.record import read_grade

    tally: dict[tuple[str, str, str, float, str], list[int]] = {}
    for (task, cell, _r), it in ctx.items.scored.items():
        grade = read_grade(ctx.folder, it.result.item)
        checks = grade.checks_for(it.result.attempt) if grade is not None else None
        for c in checks.results if checks is not None else []:
            if c.name and c.passed is not None:
                entry = tally.setdefault((task, c.name, c.kind, c.weight, cell), [0, 0])
                entry[0] += int(c.passed)
                entry[1] += 1
    order = {c.id: i for i, c in enumerate(ctx.manifest.cells)}
    report.graders = [
        GraderRate(task=t, grader=g, kind=k, weight=w, cell=c, passed=p, n=n)
        for (t, g, k, w, c), (p, n) in sorted(
            tally.items(), key=lambda kv: (*kv[0][:2], order.get(kv[0][4], 0))
        )
    ]


SECTIONS: list[Section] = [
    run_section,
    comparisons_section,
    sequential_inference_section,
    cells_section,
    graders_section,
    power_section,
    regressions_section,
    noise_floor_section,
    holdout_section,
    carried_section,
    provenance_section,
    pieces_section,
]


def build_report(
    run_dir: Path,
    *,
    alpha: float = 0.05,
    control: str | None = None,
    primary: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Read ``run_dir`` and compute the report. No model calls; the same folder gives the same report."""
    from ablate.report.caveats import compute_caveats
    from ablate.report.digest import inputs_digest

    digest = inputs_digest(run_dir)  # before reading: a change while building makes the report stale
    ctx = make_context(
        run_dir, alpha=alpha, control=control, primary=primary, say=progress or (lambda _m: None)
    )
    start: dict[str, Any] = {"generated_by": f"ablate {__version__}", "alpha": alpha, "inputs_sha256": digest}
    building = Report.model_construct(caveats=[], **start)  # the sections fill the rest
    for section in SECTIONS:
        section(ctx, building)
    report = Report.model_validate(building.__dict__)  # every required field filled, every value checked
    report.caveats = compute_caveats(report, ctx.manifest)
    if report.sequential is not None:
        report.caveats.append(sequential_caveat(report.sequential))
    if not report.caveats:
        raise RunFolderError(
            f"{run_dir}: no caveats could be computed; a report without caveats is not produced"
        )
    return report


def sequential_caveat(seq: SequentialReport) -> Caveat:
    """The caveat of a sequential report: which figures are tests and which are description."""
    return Caveat(id="sequential", text=" ".join(seq.caveats))


def isolation_words(manifest: RunManifest) -> str:
    """The isolation backend in words: ``namespace — <reason>`` (never a printed dict)."""
    if manifest.isolation is None:
        return "links (shadow home and config dir; not recorded in this run's manifest)"
    return manifest.isolation.describe()


__all__ = ["METRIC_LABELS", "RANKING_KEY", "SECTIONS", "build_report"]

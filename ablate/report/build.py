"""Build the report (:class:`~ablate.report.model.Report`) from a run folder, and nothing else.

Paired design (DESIGN §7): a block is one (task, repeat); every cell of a block ran in one sweep. A comparison
pairs the cell's and the control's items of the blocks where both are scored (complete, not flagged, metric
known). Holm runs over every comparison of the report whose p is computable.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

import orjson

from ablate import __version__
from ablate.core.errors import RunFolderError, UsageError
from ablate.core.pricing import estimate_cost
from ablate.folder.layout import ManifestCell, RunFolder, RunManifest, read_manifest
from ablate.folder.result import ItemResult, iter_results
from ablate.folder.session import ThreadSummary
from ablate.report.model import (
    BINARY_METRICS,
    HIGHER_IS_BETTER,
    METRIC_LABELS,
    CellSummary,
    Comparison,
    Counts,
    ExcludedItem,
    LayerUse,
    MetricSummary,
    NoOpCell,
    PowerRow,
    RankEntry,
    Report,
    RunInfo,
    TaskCellCell,
)
from ablate.setup.kinds import layer_kind
from ablate.setup.layers import Shows
from ablate.stats import (
    Interval,
    NotComputable,
    PairedResult,
    detectable_binary,
    detectable_mean,
    holm,
    paired_binary,
    paired_mean,
    runs_needed_binary,
    runs_needed_mean,
    spread,
    wilson,
)

#: Metrics every report compares (graded metrics join when ``grades/`` has them).
BASE_METRICS = ("pitfall_free", "turns", "tool_calls", "cost_usd")
GRADED_METRICS = ("checks_passed", "judge_pass")
#: Pooled metrics the ranking orders by, with the sign that makes "the layer is worth more" positive.
RANK_METRICS = ("pitfall_free", "turns", "cost_usd")
RANKING_KEY = (
    "layers with a real effect first, ordered by what stripping them costs: first the pitfall-free rate "
    "lost (−Δ pitfall-free), then turns added (Δ turns), then cost added (Δ cost); only real differences "
    "count; layers with no real effect form one tie group, 'draw'; layers whose removal helps rank last"
)
#: Effects the "repeats needed" figures are computed for.
TARGET_RATE_CHANGE = 0.2
TARGET_TURNS = 1.0
TARGET_COST_FRACTION = 0.1


@dataclass
class Item:
    """One scored or excluded item with its metric values."""

    result: ItemResult
    values: dict[str, float] = field(default_factory=dict)
    list_cost: float | None = None
    input_tokens: int = 0
    cache_read: int = 0
    skills_invoked: int = 0


def _session_total(res: ItemResult) -> ThreadSummary:
    return res.session.total if res.session is not None else ThreadSummary()


def _grades(folder: RunFolder, res: ItemResult) -> dict[str, bool]:
    """checks_passed / judge_pass of the result's attempt from ``grades/<item>.json``.

    A verdict that is a judge error, or checks that could not be evaluated, give no value (the item then
    leaves that metric's comparisons) rather than a guessed one. The first verdict recorded for the attempt
    counts.
    """
    from ablate.grade.record import read_grade

    grade = read_grade(folder, res.item)
    if grade is None:
        return {}
    out: dict[str, bool] = {}
    checks = grade.checks_for(res.attempt)
    if checks is not None and checks.passed is not None:
        out["checks_passed"] = bool(checks.passed)
    verdicts = [v for v in grade.judges if v.attempt == res.attempt and v.verdict != "error"]
    if verdicts:
        out["judge_pass"] = verdicts[0].verdict == "pass"
    return out


def _item(folder: RunFolder, res: ItemResult, model: str) -> Item:
    it = Item(res)
    total = _session_total(res)
    it.values["pitfall_free"] = 1.0 if not any(v for v in res.pitfall_hits.values()) else 0.0
    if res.turns is not None:
        it.values["turns"] = float(res.turns)
    if res.session is not None:
        it.values["tool_calls"] = float(total.tool_calls)
    if res.cost_usd is not None:
        it.values["cost_usd"] = float(res.cost_usd)
    for metric, passed in _grades(folder, res).items():
        it.values[metric] = 1.0 if passed else 0.0
    inp, cw, cr = total.input_tokens, total.cache_creation_tokens, total.cache_read_tokens
    it.input_tokens, it.cache_read = inp + cw + cr, cr
    models = (res.session.models if res.session is not None else []) or [model]
    it.list_cost = estimate_cost(
        models[0], input_tokens=inp + cr, output_tokens=total.output_tokens, cache_write_5m_tokens=cw
    )
    it.skills_invoked = len(total.skills_invoked)
    return it


def _noop_reason(cell: ManifestCell, control: ManifestCell | None) -> str | None:
    if cell.noop is not None:
        return cell.noop
    if control is None or not cell.stripped or cell.empty_config:
        return None
    fp = control.fingerprints
    if fp and all(fp.get(lid, "") == "" for lid in cell.stripped):
        return f"{cell.id}: no {', '.join(cell.stripped)} in this setup — identical to the control by construction"
    return None


def _present_layers(cell: ManifestCell, control: ManifestCell | None) -> list[str]:
    if control is None or not control.fingerprints:
        return list(cell.stripped)
    return [lid for lid in cell.stripped if control.fingerprints.get(lid, "") != ""]


def _seed(base: int, *parts: object) -> int:
    return (base + zlib.crc32("/".join(map(str, parts)).encode())) % (2**32)


def _mean(xs: Iterable[float]) -> float | None:
    v = list(xs)
    return sum(v) / len(v) if v else None


def build_report(
    run_dir: Path,
    *,
    alpha: float = 0.05,
    control: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Read ``run_dir`` and compute the report. No model calls; the same folder gives the same report."""
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: must be between 0 and 1", hint="the usual value is 0.05")
    say = progress or (lambda _m: None)
    folder = RunFolder(run_dir)
    manifest = read_manifest(folder)
    plan = folder.read_plan()
    results = iter_results(folder)
    cells = {c.id: c for c in manifest.cells}
    if not manifest.cells:
        raise RunFolderError(f"{run_dir}: the manifest lists no cells")
    # the set's control is the cell that strips nothing (the manifest does not record the set's `control`)
    control_id = control or next((c.id for c in manifest.cells if not c.stripped), manifest.cells[0].id)
    if control_id not in cells:
        raise UsageError(
            f"--control {control_id}: not a cell of this run",
            hint="cells: " + ", ".join(cells),
        )
    control_cell = cells[control_id]
    say(f"read {len(results)} results of {len(plan)} planned items")

    # ---- items: scored or excluded (with the reason)
    by_item = {r.item: r for r in results}
    excluded: list[ExcludedItem] = []
    scored: dict[tuple[str, str, int], Item] = {}
    all_items: list[Item] = []
    for p in plan:
        res = by_item.get(p.item)
        if res is None:
            excluded.append(
                ExcludedItem(item=p.item, task=p.task, cell=p.cell, repeat=p.repeat, reason="not run")
            )
            continue
        it = _item(folder, res, manifest.model)
        all_items.append(it)
        if not res.complete:
            reason = f"failed: {res.status}" + (f" ({res.error})" if res.error else "")
        elif res.flags:
            reason = "provenance: " + ", ".join(res.flags)
        else:
            scored[(p.task, p.cell, p.repeat)] = it
            continue
        excluded.append(ExcludedItem(item=p.item, task=p.task, cell=p.cell, repeat=p.repeat, reason=reason))

    task_ids = [t.id for t in manifest.tasks]
    repeats = sorted({p.repeat for p in plan})
    metrics = list(BASE_METRICS) + [
        m for m in GRADED_METRICS if any(m in it.values for it in scored.values())
    ]

    # ---- no-op cells
    no_ops: list[NoOpCell] = []
    for c in manifest.cells:
        if c.id == control_id:
            continue
        why = _noop_reason(c, control_cell)
        if why:
            no_ops.append(NoOpCell(cell=c.id, layers=list(c.stripped), reason=why))
    no_op_ids = {n.cell for n in no_ops}
    tested = [c for c in manifest.cells if c.id != control_id and c.id not in no_op_ids]

    # ---- comparisons
    say(f"comparing {len(tested)} cells with {control_id} on {len(metrics)} metrics")
    raw: list[tuple[ManifestCell, str | None, str, PairedResult]] = []
    for c in tested:
        for metric in metrics:
            # with a single task the per-task comparison would repeat the pooled one: only the pooled is made
            for task in [None, *task_ids] if len(task_ids) > 1 else [None]:
                xs: list[float] = []
                ys: list[float] = []
                strata: list[str] = []
                for t in task_ids if task is None else [task]:
                    for r in repeats:
                        a, b = scored.get((t, c.id, r)), scored.get((t, control_id, r))
                        if a and b and metric in a.values and metric in b.values:
                            xs.append(a.values[metric])
                            ys.append(b.values[metric])
                            strata.append(t)
                pr: PairedResult
                if metric in BINARY_METRICS:
                    pr = paired_binary([x > 0.5 for x in xs], [y > 0.5 for y in ys], level=1 - alpha)
                else:
                    pr = paired_mean(
                        xs, ys, strata, level=1 - alpha, seed=_seed(manifest.seed, c.id, metric, task)
                    )
                raw.append((c, task, metric, pr))
    computable = [i for i, entry in enumerate(raw) if entry[3].p_value is not None]
    adjusted = holm([raw[i][3].p_value or 0.0 for i in computable])
    adj_by_index = dict(zip(computable, adjusted, strict=True))
    one_repeat = len(repeats) < 2
    comparisons: list[Comparison] = []
    for i, (c, task, metric, pres) in enumerate(raw):
        iv = pres.interval
        reasons = [x.reason for x in (pres.p, iv) if isinstance(x, NotComputable)]
        padj = adj_by_index.get(i)
        comparisons.append(
            Comparison(
                cell=c.id,
                control=control_id,
                layers=_present_layers(c, control_cell),
                task=task,
                metric=metric,
                cell_value=pres.cell_value,
                control_value=pres.control_value,
                delta=pres.delta,
                ci_low=iv.low if isinstance(iv, Interval) else None,
                ci_high=iv.high if isinstance(iv, Interval) else None,
                ci_method=iv.method if isinstance(iv, Interval) else None,
                p=pres.p_value,
                p_adjusted=padj,
                real=bool(padj is not None and padj <= alpha and not one_repeat),
                n_pairs=pres.n_pairs,
                method=pres.method,
                not_computable="; ".join(dict.fromkeys(reasons)) or None,
                gained=pres.gained,
                lost=pres.lost,
            )
        )
    m_family = max(1, len(computable)) if computable else max(1, len(raw))
    say(f"{len(comparisons)} comparisons, {len(computable)} testable; Holm over {len(computable)}")

    pooled = {(x.cell, x.metric): x for x in comparisons if x.task is None}
    ranking = _rank(tested, pooled, comparisons, control_cell)

    # ---- per-cell summaries and per-task table
    cell_summaries: list[CellSummary] = []
    for c in manifest.cells:
        mine = [it for (t, cid, r), it in scored.items() if cid == c.id]
        ms: dict[str, MetricSummary] = {}
        for metric in metrics:
            vals = [it.values[metric] for it in mine if metric in it.values]
            per_rep = [
                v
                for r in repeats
                if (
                    v := _mean(
                        it.values[metric]
                        for (t, cid, rr), it in scored.items()
                        if cid == c.id and rr == r and metric in it.values
                    )
                )
                is not None
            ]
            sp = spread(per_rep)
            summary = MetricSummary(
                value=_mean(vals), n=len(vals), spread=sp if isinstance(sp, float) else None
            )
            if metric in BINARY_METRICS and vals:
                w = wilson(int(sum(vals)), len(vals), 1 - alpha)
                if isinstance(w, Interval):
                    summary.ci_low, summary.ci_high = w.low, w.high
            ms[metric] = summary
        cell_all = [it for it in all_items if it.result.cell == c.id]
        inp = sum(it.input_tokens for it in mine)
        lists = [it.list_cost for it in cell_all]
        cell_summaries.append(
            CellSummary(
                cell=c.id,
                label=c.label,
                layers=[]
                if c.id == control_id
                else (list(c.stripped) if c.id in no_op_ids else _present_layers(c, control_cell)),
                no_op=c.id in no_op_ids,
                items=sum(1 for p in plan if p.cell == c.id),
                scored=len(mine),
                excluded=sum(1 for e in excluded if e.cell == c.id),
                metrics=ms,
                spend_usd=sum(it.result.cost_usd or 0.0 for it in cell_all),
                spend_list_usd=None if any(v is None for v in lists) else sum(v or 0.0 for v in lists),
                cache_read_share=(sum(it.cache_read for it in mine) / inp) if inp else None,
                skills_invoked=sum(it.skills_invoked for it in mine),
                notes=list(c.notes),
            )
        )
    table: list[TaskCellCell] = []
    for t in task_ids:
        for c in manifest.cells:
            its = [it for (tt, cid, r), it in scored.items() if tt == t and cid == c.id]
            table.append(
                TaskCellCell(
                    task=t,
                    cell=c.id,
                    n=len(its),
                    pitfall_free=_mean(it.values["pitfall_free"] for it in its),
                    turns=_mean(it.values["turns"] for it in its if "turns" in it.values),
                    tool_calls=_mean(it.values["tool_calls"] for it in its if "tool_calls" in it.values),
                    cost_usd=_mean(it.values["cost_usd"] for it in its if "cost_usd" in it.values),
                    skills_invoked=_mean(float(it.skills_invoked) for it in its) if its else None,
                )
            )

    # ---- power
    spend = sum(it.result.cost_usd or 0.0 for it in all_items)
    mean_cost = spend / len(all_items) if all_items else None
    power = _power(
        metrics,
        tested,
        control_id,
        task_ids,
        repeats,
        scored,
        alpha / m_family,
        mean_cost,
        len(manifest.cells),
    )

    # ---- regressions: stripping made a task better
    regressions = [
        x
        for x in comparisons
        if x.task is not None
        and x.delta is not None
        and x.delta != 0
        and x.metric in ("pitfall_free", "turns", "cost_usd", "checks_passed", "judge_pass")
        and ((x.delta > 0) == (x.metric in HIGHER_IS_BETTER))
        and (x.real or x.metric in BINARY_METRICS)
    ]

    # ---- model verification
    models_seen: dict[str, int] = {}
    without = 0
    for it in scored.values():
        ms_ = it.result.session.models if it.result.session is not None else []
        if not ms_:
            without += 1
        for m in ms_:
            models_seen[m] = models_seen.get(m, 0) + 1
    verified = bool(scored) and without == 0 and set(models_seen) == {manifest.model}

    lists_all = [it.list_cost for it in all_items]
    run = RunInfo(
        id=manifest.run_id,
        claude_version=manifest.claude.version,
        claude_sha256=manifest.claude.sha256,
        claude_pinned=manifest.claude.pinned,
        model=manifest.model,
        model_verified=verified,
        models_seen=models_seen,
        sessions_without_model=without,
        cell_set=manifest.cell_set,
        binary=manifest.cell_set == "binary",
        control=control_id,
        isolation=_isolation(manifest),
        repeats=manifest.repeats,
        seed=manifest.seed,
        created_at=manifest.created_at,
        ablate_version=manifest.ablate_version,
        tasks=[
            {"id": t.id, "split": t.split, "expects": list(t.expects), "sha256": t.sha256}
            for t in manifest.tasks
        ],
        spend_usd=spend,
        spend_list_usd=None if any(v is None for v in lists_all) else sum(v or 0.0 for v in lists_all),
    )
    counts = Counts(
        tasks=len(task_ids),
        repeats=manifest.repeats,
        items=len(plan),
        complete=sum(1 for r in results if r.complete),
        excluded=len(excluded),
    )
    layer_use = _layer_use(manifest, control_cell, scored)
    report = Report(
        generated_by=f"ablate {__version__}",
        alpha=alpha,
        run=run,
        n=counts,
        comparisons=comparisons,
        ranking=ranking,
        ranking_key=RANKING_KEY,
        caveats=[],
        no_op_cells=no_ops,
        excluded_items=excluded,
        cells=cell_summaries,
        task_table=table,
        power=power,
        regressions=regressions,
        layer_use=layer_use,
        fingerprints={
            "claude": {"version": manifest.claude.version, "sha256": manifest.claude.sha256},
            "tasks": {t.id: t.sha256 for t in manifest.tasks},
            "cells": {c.id: c.fingerprints for c in manifest.cells},
            "plan_sha256": manifest.plan_sha256,
        },
        probe=_probe(run_dir),
    )
    from ablate.report.caveats import compute_caveats

    report.caveats = compute_caveats(report, manifest, m_family)
    if not report.caveats:
        raise RunFolderError(
            f"{run_dir}: no caveats could be computed; a report without caveats is not produced"
        )
    return report


def _isolation(manifest: RunManifest) -> str:
    if manifest.isolation is not None:
        return manifest.isolation.describe()
    return "links (shadow home and config dir; not recorded in this run's manifest)"


def _probe(run_dir: Path) -> dict[str, object] | None:
    for name in ("probe.json", "probe/probe.json"):
        path = run_dir / name
        if path.exists():
            try:
                data = orjson.loads(path.read_bytes())
            except orjson.JSONDecodeError:
                return {"error": f"{name} is not valid JSON"}
            return data if isinstance(data, dict) else None
    return None


def _rank(
    tested: list[ManifestCell],
    pooled: dict[tuple[str, str], Comparison],
    comparisons: list[Comparison],
    control: ManifestCell,
) -> list[RankEntry]:
    """Real effects ordered by the ranking key; every cell without one in a single 'draw' group.

    A metric counts as real for a cell when its pooled comparison or any per-task one is real (a layer that
    matters for one task of several is diluted in the pooled figure); the order uses the pooled Δ.
    """
    entries: list[tuple[tuple[float, float, float], RankEntry]] = []
    for c in tested:
        deltas = {m: pooled[(c.id, m)].delta if (c.id, m) in pooled else None for m in RANK_METRICS}
        real_on: dict[str, list[Comparison]] = {}
        for x in comparisons:
            if x.cell == c.id and x.real:
                real_on.setdefault(x.metric, []).append(x)
        real = [m for m in RANK_METRICS if m in real_on] + [m for m in real_on if m not in RANK_METRICS]

        # "worth" of the layer = what stripping it costs, real differences only
        key = (
            _worth(deltas, real, "pitfall_free", -1.0),
            _worth(deltas, real, "turns", 1.0),
            _worth(deltas, real, "cost_usd", 1.0),
        )
        signs = []
        for m in real:
            pooled_delta = pooled[(c.id, m)].delta if (c.id, m) in pooled else None
            d = pooled_delta if pooled_delta else (real_on[m][0].delta or 0.0)
            helps = (d < 0) if m in HIGHER_IS_BETTER else (d > 0)
            signs.append(helps)
        # the verdict follows the first real metric in ranking order; disagreeing others make it "mixed"
        verdict = "draw" if not real else ("helps" if signs[0] else "hurts")
        if real and len(set(signs)) > 1:
            verdict += " (mixed)"
        entries.append(
            (
                key,
                RankEntry(
                    rank=0,
                    cell=c.id,
                    layers=_present_layers(c, control),
                    tie_group="draw" if not real else c.id,
                    delta_pitfall_free=deltas["pitfall_free"],
                    delta_turns=deltas["turns"],
                    delta_cost_usd=deltas["cost_usd"],
                    real_metrics=real,
                    real_on=[f"{m}: " + ", ".join(x.task or "pooled" for x in real_on[m]) for m in real],
                    verdict=verdict,
                ),
            )
        )
    positive = sorted(
        [e for e in entries if e[1].tie_group != "draw" and e[0] >= (0.0, 0.0, 0.0)],
        key=lambda e: e[0],
        reverse=True,
    )
    negative = sorted(
        [e for e in entries if e[1].tie_group != "draw" and e[0] < (0.0, 0.0, 0.0)],
        key=lambda e: e[0],
        reverse=True,
    )
    draws = [e for e in entries if e[1].tie_group == "draw"]
    out: list[RankEntry] = []
    rank = 0
    prev_key: tuple[float, float, float] | None = None
    for key, entry in positive:
        if key != prev_key:
            rank = len(out) + 1
        entry.rank = rank
        prev_key = key
        out.append(entry)
    draw_rank = len(out) + 1
    for _, entry in draws:
        entry.rank = draw_rank
        out.append(entry)
    prev_key = None
    for key, entry in negative:
        if key != prev_key:
            rank = len(out) + 1
        entry.rank = rank
        prev_key = key
        out.append(entry)
    # identical real effects share a tie group
    groups: dict[tuple[int, str], list[RankEntry]] = {}
    for e in out:
        if e.tie_group != "draw":
            groups.setdefault((e.rank, "real"), []).append(e)
    for members in groups.values():
        if len(members) > 1:
            gid = "+".join(e.cell for e in members)
            for e in members:
                e.tie_group = gid
    return out


def _worth(deltas: dict[str, float | None], real: list[str], metric: str, sign: float) -> float:
    d = deltas.get(metric)
    return sign * d if (metric in real and d is not None) else 0.0


def _power(
    metrics: list[str],
    tested: list[ManifestCell],
    control_id: str,
    task_ids: list[str],
    repeats: list[int],
    scored: dict[tuple[str, str, int], Item],
    alpha_each: float,
    mean_cost: float | None,
    n_cells: int,
) -> list[PowerRow]:
    """Per metric: the smallest pooled effect this run detects, and the repeats a target effect needs."""
    rows: list[PowerRow] = []
    blocks = len(task_ids) * len(repeats)
    for metric in metrics:
        ctrl = [
            it.values[metric] for (t, c, r), it in scored.items() if c == control_id and metric in it.values
        ]
        diffs: list[float] = []
        for c in tested:
            for t in task_ids:
                for r in repeats:
                    a, b = scored.get((t, c.id, r)), scored.get((t, control_id, r))
                    if a and b and metric in a.values and metric in b.values:
                        diffs.append(a.values[metric] - b.values[metric])
        det: float | NotComputable
        need: int | NotComputable
        effect: float | None
        if metric in BINARY_METRICS:
            base = _mean(ctrl)
            if base is None:
                det, need, effect = NotComputable("no control items"), NotComputable("no control items"), None
            else:
                det = detectable_binary(blocks, base, alpha_each)
                target = (
                    base - TARGET_RATE_CHANGE if base - TARGET_RATE_CHANGE >= 0 else base + TARGET_RATE_CHANGE
                )
                effect = target - base
                need = runs_needed_binary(base, target, alpha_each)
        else:
            sd = _sd(diffs)
            if metric == "cost_usd":
                base = _mean(ctrl)
                effect = TARGET_COST_FRACTION * base if base else None
            else:
                effect = TARGET_TURNS
            if sd is None:
                det = NotComputable("fewer than 2 paired differences")
                need = NotComputable("fewer than 2 paired differences")
            else:
                det = detectable_mean(blocks, sd, alpha_each)
                need = runs_needed_mean(effect, sd, alpha_each) if effect else NotComputable("no effect size")
        reps = math.ceil(need / len(task_ids)) if isinstance(need, int) and task_ids else None
        rows.append(
            PowerRow(
                metric=metric,
                blocks_per_cell=blocks,
                detectable=det if isinstance(det, float) else None,
                detectable_note=det.reason if isinstance(det, NotComputable) else None,
                effect=effect,
                repeats_needed=reps,
                repeats_note=need.reason if isinstance(need, NotComputable) else None,
                cost_usd=(reps * len(task_ids) * n_cells * mean_cost)
                if reps and mean_cost is not None
                else None,
            )
        )
    return rows


def _sd(xs: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _layer_use(
    manifest: RunManifest, control: ManifestCell, scored: dict[tuple[str, str, int], Item]
) -> list[LayerUse]:
    """Dead layers: never loaded in any control session, or loaded and never used."""
    from ablate.setup.layers import load_catalog

    try:
        catalog = load_catalog()
    except Exception:
        return []
    stripped = sorted(
        {lid for c in manifest.cells for lid in c.stripped if control.fingerprints.get(lid, "") != ""}
    )
    sessions = [
        it.result.session
        for (t, c, r), it in scored.items()
        if c == control.id and it.result.session is not None
    ]
    loaded_paths = [f.path for s in sessions for f in s.instruction_files]
    read_paths = [p for s in sessions for p in s.total.files_read]
    skills_used = sum(len(s.total.skills_invoked) for s in sessions)
    skills_listed = any(s.skills_listed for s in sessions)
    hooks_fired = sum(sum(s.hooks_fired.values()) for s in sessions)
    out: list[LayerUse] = []
    for lid in stripped:
        if lid not in catalog:
            out.append(
                LayerUse(layer=lid, status="not assessed", evidence="layer not in the shipped catalog")
            )
            continue
        layer = catalog.get(lid)
        pats = [p.rstrip("/") for p in layer.paths if "<" not in p]

        def hit(paths: list[str], pats: list[str] = pats, side: str = layer.side) -> int:
            n = 0
            for raw_path in paths:
                path = raw_path if raw_path.startswith("/") else "/" + raw_path
                for p in pats:
                    tail = "/" + p
                    if (side == "config" and "/.claude" + tail in path) or (
                        side == "repo" and (path.endswith(tail) or tail + "/" in path)
                    ):
                        n += 1
                        break
            return n

        if lid == "skills":
            if not skills_listed:
                out.append(
                    LayerUse(
                        layer=lid, status="never loaded", evidence="no skill listed in any control session"
                    )
                )
            elif not skills_used:
                out.append(
                    LayerUse(
                        layer=lid,
                        status="loaded, never used",
                        evidence=f"listed in {len(sessions)} control sessions, never invoked",
                    )
                )
            else:
                out.append(LayerUse(layer=lid, status="used", evidence=f"{skills_used} skill invocations"))
        elif lid == "hooks":
            status = "used" if hooks_fired else "never loaded"
            out.append(
                LayerUse(layer=lid, status=status, evidence=f"{hooks_fired} hook firings in control sessions")
            )
        else:
            out.append(_kind_use(lid, layer.shows, hit, loaded_paths, read_paths, len(sessions)))
    return out


def _kind_use(
    lid: str, shows: Shows, hit: Callable[[list[str]], int], loaded: list[str], read: list[str], sessions: int
) -> LayerUse:
    """How a layer (other than skills and hooks) was used in the control sessions, by its kind's row."""
    used_by = layer_kind(shows).used
    match used_by:
        case "instructions" | "memory":
            n = hit(loaded) if used_by == "instructions" else sum("/memory/" in p for p in loaded)
            return LayerUse(
                layer=lid,
                status="used" if n else "never loaded",
                evidence=f"loaded as instructions {n} times in {sessions} control sessions",
            )
        case "reads":
            n = hit(read)
            return LayerUse(
                layer=lid,
                status="used" if n else "loaded, never used",
                evidence=f"files read {n} times in {sessions} control sessions"
                + ("" if n else " (present in every cell's checkout, never opened)"),
            )
        case "not_mined":
            return LayerUse(layer=lid, status="not assessed", evidence=f"shows as {shows}: not mined yet")
        case _:
            assert_never(used_by)


__all__ = ["BASE_METRICS", "METRIC_LABELS", "RANKING_KEY", "build_report"]

"""Descriptive sections of the report: per-cell summaries, the per-task table, and dead layers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import assert_never

from ablate.folder.layout import ManifestCell, RunManifest
from ablate.folder.session import SessionMetrics
from ablate.report.context import Context
from ablate.report.items import Item, Key
from ablate.report.model import BINARY_METRICS, CellSummary, LayerUse, MetricSummary, TaskCellCell
from ablate.setup.kinds import layer_kind
from ablate.setup.layers import Shows
from ablate.stats.power import spread
from ablate.stats.proportions import wilson
from ablate.stats.types import Interval


def mean(xs: Iterable[float]) -> float | None:
    v = list(xs)
    return sum(v) / len(v) if v else None


def _metric_summary(
    scored: dict[Key, Item], cell: str, metric: str, repeats: Sequence[int], alpha: float
) -> MetricSummary:
    mine = [
        (r, it.values[metric]) for (_t, cid, r), it in scored.items() if cid == cell and metric in it.values
    ]
    vals = [v for _r, v in mine]
    per_rep = [m for r in repeats if (m := mean(v for rr, v in mine if rr == r)) is not None]
    sp = spread(per_rep)
    summary = MetricSummary(value=mean(vals), n=len(vals), spread=sp if isinstance(sp, float) else None)
    if metric in BINARY_METRICS and vals:
        w = wilson(int(sum(vals)), len(vals), 1 - alpha)
        if isinstance(w, Interval):
            summary.ci_low, summary.ci_high = w.low, w.high
    return summary


def cell_summaries(ctx: Context) -> list[CellSummary]:
    """Per cell: each metric's value, spread and (rates) Wilson interval; spend; cache share; cost per pass."""
    from ablate.report.cost_per_pass import cell_cost_per_pass, pass_metric

    items, alpha, no_op_ids = ctx.items, ctx.alpha, {n.cell for n in ctx.no_ops}
    out: list[CellSummary] = []
    for c in ctx.manifest.cells:
        mine = [it for (_t, cid, _r), it in items.scored.items() if cid == c.id]
        cell_all = [it for it in items.all_items if it.result.cell == c.id]
        inp = sum(it.input_tokens for it in mine)
        lists = [it.list_cost for it in cell_all]
        per_pass, why = cell_cost_per_pass(mine, pass_metric(ctx.primary), alpha, ctx.manifest.seed)
        out.append(
            CellSummary(
                cell=c.id,
                label=c.label,
                layers=ctx.layers.get(c.id, list(c.stripped) if c.id in no_op_ids else []),
                pieces=list(c.pieces),
                no_op=c.id in no_op_ids,
                items=sum(1 for p in ctx.plan if p.cell == c.id),
                scored=len(mine),
                excluded=sum(1 for e in items.excluded if e.cell == c.id),
                metrics={m: _metric_summary(items.scored, c.id, m, ctx.repeats, alpha) for m in ctx.metrics},
                spend_usd=sum(it.result.cost_usd or 0.0 for it in cell_all),
                spend_list_usd=None if any(v is None for v in lists) else sum(v or 0.0 for v in lists),
                cache_read_share=(sum(it.cache_read for it in mine) / inp) if inp else None,
                skills_invoked=sum(it.skills_invoked for it in mine),
                notes=list(c.notes),
                cost_per_pass=per_pass,
                cost_per_pass_note=why,
            )
        )
    return out


def task_table(manifest: RunManifest, scored: dict[Key, Item]) -> list[TaskCellCell]:
    """Per (task, cell): the means of every metric."""
    table: list[TaskCellCell] = []
    for t in manifest.tasks:
        for c in manifest.cells:
            its = [it for (tt, cid, _r), it in scored.items() if tt == t.id and cid == c.id]
            table.append(
                TaskCellCell(
                    task=t.id,
                    cell=c.id,
                    n=len(its),
                    pitfall_free=mean(it.values["pitfall_free"] for it in its),
                    turns=mean(it.values["turns"] for it in its if "turns" in it.values),
                    tool_calls=mean(it.values["tool_calls"] for it in its if "tool_calls" in it.values),
                    cost_usd=mean(it.values["cost_usd"] for it in its if "cost_usd" in it.values),
                    skills_invoked=mean(float(it.skills_invoked) for it in its) if its else None,
                )
            )
    return table


def layer_use(manifest: RunManifest, control: ManifestCell, scored: dict[Key, Item]) -> list[LayerUse]:
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
        it.result.session for (_t, c, _r), it in scored.items() if c == control.id and it.result.session
    ]
    loaded = [f.path for s in sessions for f in s.instruction_files]
    read = [p for s in sessions for p in s.total.files_read]
    out: list[LayerUse] = []
    for lid in stripped:
        if lid not in catalog:
            out.append(
                LayerUse(layer=lid, status="not assessed", evidence="layer not in the shipped catalog")
            )
        elif lid in ("skills", "hooks"):
            out.append(_listed_use(lid, sessions))
        else:
            layer = catalog.get(lid)
            hit = partial(_hits, [p.rstrip("/") for p in layer.paths if "<" not in p], layer.side)
            out.append(_kind_use(lid, layer.shows, hit, loaded, read, len(sessions)))
    return out


def _hits(pats: list[str], side: str, paths: list[str]) -> int:
    """How many of ``paths`` fall under one of a layer's path patterns on its side (config or repo)."""

    def under(path: str, tail: str) -> bool:
        path = path if path.startswith("/") else "/" + path
        if side == "config":
            return "/.claude" + tail in path
        return side == "repo" and (path.endswith(tail) or tail + "/" in path)

    return sum(any(under(path, "/" + p) for p in pats) for path in paths)


def _listed_use(lid: str, sessions: list[SessionMetrics]) -> LayerUse:
    """Skills (listed, then invoked) and hooks (fired) in the control sessions."""
    if lid == "hooks":
        fired = sum(sum(s.hooks_fired.values()) for s in sessions)
        status = "used" if fired else "never loaded"
        return LayerUse(layer=lid, status=status, evidence=f"{fired} hook firings in control sessions")
    used = sum(len(s.total.skills_invoked) for s in sessions)
    if not any(s.skills_listed for s in sessions):
        return LayerUse(layer=lid, status="never loaded", evidence="no skill listed in any control session")
    if not used:
        said = f"listed in {len(sessions)} control sessions, never invoked"
        return LayerUse(layer=lid, status="loaded, never used", evidence=said)
    return LayerUse(layer=lid, status="used", evidence=f"{used} skill invocations")


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

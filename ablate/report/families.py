"""The comparisons of a report, in two Holm families (:data:`FAMILY_RULE`): **primary**, the pooled primary
metric, one comparison per tested cell (the question the report answers); **secondary**, every other metric
pooled and every metric per task. Holm within each keeps the primary family's error rate at ``alpha`` whatever
the number of secondary comparisons; each test's resamples are scaled to its family's ``alpha / m``, so no
p-value floor stands between a consistent effect and "real"."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from ablate.folder.layout import ManifestCell
from ablate.report.context import Context
from ablate.report.model import HIGHER_IS_BETTER, Comparison, ComparisonVerdict, Family, FamilyName
from ablate.report.paired import Block, estimate, holm_real, not_computable, pair_blocks, paired_test
from ablate.stats.types import PairedResult

FAMILY_RULE = (
    "separate families: Holm at α within the primary family (the pooled primary metric, one comparison per "
    "cell) and, on its own, within the secondary family (other metrics pooled, every metric per task)"
)


@dataclass(frozen=True)
class Planned:
    cell: ManifestCell
    task: str | None
    metric: str
    family: FamilyName


def _seed(base: int, *parts: object) -> int:
    return (base + zlib.crc32("/".join(map(str, parts)).encode())) % (2**32)


def plan_comparisons(
    tested: Sequence[ManifestCell], metrics: Sequence[str], task_ids: Sequence[str], primary: str
) -> list[Planned]:
    """Every comparison of the report; with one task the per-task comparison would repeat the pooled one."""
    out: list[Planned] = []
    for c in tested:
        for metric in metrics:
            out.append(Planned(c, None, metric, "primary" if metric == primary else "secondary"))
            if len(task_ids) > 1:
                out.extend(Planned(c, t, metric, "secondary") for t in task_ids)
    return out


def side_values(ctx: Context, cell: str, metric: str | None = None) -> dict[Block, float]:
    """One cell's values of ``metric`` (default: the primary) by (task, repeat) block, where scored."""
    m = metric or ctx.primary
    return {
        (t, r): it.values[m] for (t, c, r), it in ctx.items.scored.items() if c == cell and m in it.values
    }


def task_differences(ctx: Context, cell: str) -> dict[str, list[float]]:
    """Task → the cell's differences from the control (cell − control) on the primary, block by block."""
    control = side_values(ctx, ctx.control.id)
    out: dict[str, list[float]] = {}
    for (task, repeat), v in side_values(ctx, cell).items():
        if (task, repeat) in control:
            out.setdefault(task, []).append(v - control[(task, repeat)])
    return out


def paired_values(ctx: Context, cell: str, metric: str) -> tuple[list[float], list[float], list[str]]:
    """The cell's and the control's values on the blocks where both are scored, and each block's task."""
    blocks = [(t, r) for t in ctx.task_ids for r in ctx.repeats]
    pairs = pair_blocks(side_values(ctx, cell, metric), side_values(ctx, ctx.control.id, metric), blocks)
    return pairs.cell, pairs.control, pairs.strata


def layer_verdict(metric: str, delta: float | None, real: bool, p: float | None) -> ComparisonVerdict:
    """helps / hurts (real only) from the sign of this comparison's own Δ; draw; not computable."""
    if p is None:
        return "not computable"
    if not real or not delta:
        return "draw"
    stripping_lowered = delta < 0
    return "helps" if stripping_lowered == (metric in HIGHER_IS_BETTER) else "hurts"


def run_comparisons(ctx: Context, planned: Sequence[Planned]) -> tuple[list[Comparison], list[Family]]:
    """Test every planned comparison against the control, Holm within each family, and mark what is real."""
    control, alpha, seed = ctx.control.id, ctx.alpha, ctx.manifest.seed
    m = {f: sum(1 for p in planned if p.family == f) for f in ("primary", "secondary")}
    values = {(c, metric): side_values(ctx, c, metric) for c in {control, *(p.cell.id for p in planned)}
              for metric in {p.metric for p in planned}}  # fmt: skip
    results: list[PairedResult] = []
    for p in planned:
        blocks = [(t, r) for t in (ctx.task_ids if p.task is None else [p.task]) for r in ctx.repeats]
        pairs = pair_blocks(values[(p.cell.id, p.metric)], values[(control, p.metric)], blocks)
        floor = alpha / max(1, m[p.family])
        s = _seed(seed, p.cell.id, p.metric, p.task)
        results.append(paired_test(p.metric, pairs, level=1 - alpha, seed=s, p_floor=floor))
    marked: dict[int, tuple[float | None, bool]] = {}
    for fam in ("primary", "secondary"):
        idx = [i for i, p in enumerate(planned) if p.family == fam]
        marked.update(
            zip(idx, holm_real([(results[i].p_value, results[i].delta) for i in idx], alpha), strict=True)
        )
    out = [
        _comparison(p, r, *marked[i], control, ctx.layers[p.cell.id])
        for i, (p, r) in enumerate(zip(planned, results, strict=True))
    ]
    families = [
        _family("primary", planned, out, "the pooled primary metric, one comparison per tested cell"),
        _family("secondary", planned, out, "every other metric pooled, and every metric per task"),
    ]
    return out, families


def _comparison(
    p: Planned, r: PairedResult, padj: float | None, real: bool, control: str, layers: list[str]
) -> Comparison:
    return Comparison(
        cell=p.cell.id,
        control=control,
        layers=layers,
        task=p.task,
        metric=p.metric,
        **estimate(r),
        p_adjusted=padj,
        real=real,
        family=p.family,
        verdict=layer_verdict(p.metric, r.delta, real, r.p_value),
        not_computable="; ".join(not_computable(r)) or None,
        **{k: getattr(r, k) for k in _AS_TESTED},
    )


#: What a comparison takes of its paired test as it is.
_AS_TESTED = ("cell_value", "control_value", "n_pairs", "method", "gained", "lost")


def _family(name: FamilyName, planned: Sequence[Planned], out: Sequence[Comparison], scope: str) -> Family:
    members = [c for p, c in zip(planned, out, strict=True) if p.family == name]
    return Family(
        name=name,
        metrics=list(dict.fromkeys(c.metric for c in members)),
        scope=scope,
        m=len(members),
        testable=sum(1 for c in members if c.p is not None),
        rule=FAMILY_RULE,
    )

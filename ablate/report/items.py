"""The items of a run folder as the report sees them: each scored (with its metric values) or excluded."""

from __future__ import annotations

from dataclasses import dataclass, field

from ablate.core.pricing import estimate_cost
from ablate.folder.layout import PlanItem, RunFolder
from ablate.folder.metrics import METRICS
from ablate.folder.result import ItemResult
from ablate.folder.session import ThreadSummary
from ablate.report.model import ExcludedItem

#: A scored item's key: (task, cell, repeat).
Key = tuple[str, str, int]


@dataclass
class Item:
    """One scored or excluded item with its metric values."""

    result: ItemResult
    values: dict[str, float] = field(default_factory=dict)
    list_cost: float | None = None
    input_tokens: int = 0
    cache_read: int = 0
    skills_invoked: int = 0


@dataclass
class Items:
    """Every item of the plan: the scored ones by key, the excluded ones with the reason, and all results."""

    scored: dict[Key, Item]
    excluded: list[ExcludedItem]
    all_items: list[Item]


def _grades(folder: RunFolder, res: ItemResult) -> dict[str, float]:
    """checks_passed / checks_score / judge_pass of the result's attempt from ``grades/<item>.json`` (the first
    verdict recorded); a judge error or checks not evaluated give no value, never a guessed one."""
    from ablate.grade.record import read_grade

    grade = read_grade(folder, res.item)
    if grade is None:
        return {}
    out: dict[str, float] = {}
    checks = grade.checks_for(res.attempt)
    if checks is not None and checks.passed is not None:
        out["checks_passed"] = 1.0 if checks.passed else 0.0
    if checks is not None and checks.score is not None and any(r.name for r in checks.results):
        out["checks_score"] = checks.score  # named checks: a plugin-eval suite's weighted graders
    if verdicts := [v for v in grade.judges if v.attempt == res.attempt and v.verdict != "error"]:
        out["judge_pass"] = 1.0 if verdicts[0].verdict == "pass" else 0.0
    return out


def read_item(folder: RunFolder, res: ItemResult, model: str) -> Item:
    """The metric values, token counts and list-price cost of one result."""
    it = Item(res)
    total = res.session.total if res.session is not None else ThreadSummary()
    for m in METRICS:  # the registry's mined metrics; the graded ones come from grades/
        if m.value is not None and (v := m.value(res)) is not None:
            it.values[m.name] = v
    it.values.update(_grades(folder, res))
    inp, cw, cr = total.input_tokens, total.cache_creation_tokens, total.cache_read_tokens
    it.input_tokens, it.cache_read = inp + cw + cr, cr
    models = (res.session.models if res.session is not None else []) or [model]
    it.list_cost = estimate_cost(
        models[0], input_tokens=inp + cr, output_tokens=total.output_tokens, cache_write_5m_tokens=cw
    )
    it.skills_invoked = len(total.skills_invoked)
    return it


def collect_items(folder: RunFolder, plan: list[PlanItem], results: list[ItemResult], model: str) -> Items:
    """Score every planned item, or exclude it with the reason (not run, failed, flagged by provenance)."""
    by_item = {r.item: r for r in results}
    out = Items({}, [], [])
    for p in plan:
        res, reason = by_item.get(p.item), "not run"
        if res is not None:
            it = read_item(folder, res, model)
            out.all_items.append(it)
            if not res.complete:
                reason = f"failed: {res.status}" + (f" ({res.error})" if res.error else "")
                reason += f"; provenance: {', '.join(res.flags)}" if res.flags else ""
            elif res.flags:
                reason = "provenance: " + ", ".join(res.flags)
            else:
                out.scored[(p.task, p.cell, p.repeat)] = it
                continue
        out.excluded.append(
            ExcludedItem(item=p.item, task=p.task, cell=p.cell, repeat=p.repeat, reason=reason)
        )
    return out

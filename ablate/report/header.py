"""The run section: the run's identity, its counts, the model verification and the spend."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ablate.report.blocks import Block, Heading, Para, Table
from ablate.report.context import Context, Page, Section
from ablate.report.model import Counts, Report, RunInfo


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """The run's identity, counts, model verification and spend."""
    m = ctx.manifest
    seen = [it.result.session.models if it.result.session else [] for it in ctx.items.scored.values()]
    models_seen = dict(Counter(name for names in seen for name in names))
    without = sum(not names for names in seen)
    lists = [it.list_cost for it in ctx.items.all_items]
    run = RunInfo(
        id=m.run_id,
        claude_version=m.claude.version,
        claude_sha256=m.claude.sha256,
        claude_pinned=m.claude.pinned,
        model=ctx.model,
        model_verified=bool(ctx.items.scored) and without == 0 and set(models_seen) == {ctx.model},
        models_seen=models_seen,
        sessions_without_model=without,
        cell_set=m.cell_set,
        binary=m.cell_set == "binary",
        control=ctx.control.id,
        isolation=m.isolation.describe()  # the backend in words: ``namespace — <reason>``
        if m.isolation is not None
        else "links (shadow home and config dir; not recorded in this run's manifest)",
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
    n = Counts(
        tasks=len(ctx.task_ids),
        repeats=m.repeats,
        items=len(ctx.plan),
        complete=sum(1 for r in ctx.results if r.complete),
        excluded=len(ctx.items.excluded),
    )
    return {"run": run, "n": n}


def render(report: Report, page: Page) -> list[Block]:
    """The run's identity table (and, for a simulated run, that nothing was billed)."""
    run, n = report.run, report.n
    spend = f"${run.spend_usd:.4f} " + ("simulated (nothing was billed)" if run.simulated else "spent")
    if run.spend_list_usd is not None:
        spend += f", ${run.spend_list_usd:.4f} at list price with cache reads priced as fresh input"
    tasks = ", ".join(f"{t['id']} ({t['split']})" for t in run.tasks)
    # --models: this table is the first model's
    several = ", ".join(m["model"] for m in getattr(report, "models", None) or [])
    model = f"{run.model} — " + (
        "verified from every transcript" if run.model_verified else "**NOT verified**"
    )
    model += f"; the reference of {several} (each: 'Models')" if several else ""
    rows = [
        ["run", run.id],
        ["claude", f"{run.claude_version} (sha256 {run.claude_sha256[:16]}…)"],
        ["model", model],
        ["isolation", run.isolation],
        ["cell set", f"{run.cell_set} (control {run.control})" + (" — binary A/B" if run.binary else "")],
        ["tasks", tasks],
        ["repeats", str(run.repeats)],
        ["items", f"{n.items} planned, {n.complete} complete, {n.excluded} excluded"],
        ["spend", spend],
    ]
    b: list[Block] = [Heading("The run"), Table(["", ""], rows, id="header")]
    if run.simulated:
        b.append(
            Para(
                "Simulated: the sessions reached ablate's simulated endpoint (ablate.sim), so every dollar "
                "figure in this report is what the simulated usage would cost at list price; nothing was billed.",
                strong=True,
            )
        )
    return b


SECTION = Section("run", build, render)

"""Tasks that tell the cells apart, and those that tell nothing: ``report.json`` → ``tasks`` (its fields, what
an adaptive run's ``inert`` tasks saved, and what such a task does to the figures:
docs/ARCHITECTURE.md#inert-tasks). Rendered only when a task tells nothing; the caveat is ``inert-tasks``."""

from __future__ import annotations

from typing import Any

from ablate.folder.adaptive import read_state
from ablate.report.blocks import Block, Heading, Para, Table
from ablate.report.context import Context, Page, Section
from ablate.report.model import METRIC_LABELS, Caveat, Report
from ablate.stats.adaptive import discordance, inert_after


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Each task's blocks, discordant blocks and, when an adaptive run dropped it, what that saved."""
    prim = ctx.primary
    seen = discordance({key: it.values[prim] for key, it in ctx.items.scored.items() if prim in it.values})
    state = read_state(ctx.folder)
    design = ctx.manifest.design
    cells: dict[int, set[str]] = {}
    for p in ctx.plan:
        if design is None or design.screens(p.repeat):
            cells.setdefault(p.repeat, set()).add(p.cell)
    costs = [r.cost_usd for r in ctx.results if r.complete and r.cost_usd is not None]
    per_session = sum(costs) / len(costs) if costs else None
    rows = []
    for t in ctx.task_ids:
        blocks, odd = seen.get(t, (0, 0))
        after = state.inert.get(t) if state is not None else None
        saved = None if after is None else sum(len(c) for r, c in cells.items() if r >= after)
        usd = None if saved is None or per_session is None else round(saved * per_session, 6)
        rows.append(
            {"id": t, "blocks": blocks, "discordant": odd, "discriminating": odd > 0, "dropped_after": after,
             "sessions_saved": saved, "usd_saved": usd}
        )  # fmt: skip
    return {"tasks": rows}


def _rows(report: Report) -> list[dict[str, Any]]:
    """The ``tasks`` part, of a report being built (its ``__dict__``) or read (its extra fields)."""
    return list(getattr(report, "tasks", None) or [])


def _rule(report: Report) -> str:
    seq = report.sequential
    if seq is None or seq.mode != "adaptive":
        return ""
    n = inert_after(seq.min_effect, seq.draw_beta)
    return (
        f" An adaptive run stops scheduling a task after {n} blocks without a discordant one: had some cell "
        f"differed from the control by {100 * seq.min_effect:.0f} pts or more on it, a block would have been "
        f"discordant by then with probability at least {1 - seq.draw_beta:g} (n = ⌈ln β / ln(1 − d)⌉)."
    )


def render(report: Report, page: Page) -> list[Block]:
    """A table of the tasks when one of them tells the cells nothing."""
    rows = _rows(report)
    if all(r["discriminating"] for r in rows):
        return []
    table = [
        [r["id"], str(r["blocks"]), str(r["discordant"]), "yes" if r["discriminating"] else "no",
         "–" if r["dropped_after"] is None else str(r["dropped_after"]),
         "–" if r["sessions_saved"] is None else str(r["sessions_saved"]),
         "–" if r["usd_saved"] is None else f"${r['usd_saved']:.4f}"]
        for r in rows
    ]  # fmt: skip
    head = [
        "task",
        "blocks",
        "discordant",
        "tells the cells apart",
        "stopped after round",
        "sessions saved",
        "saved",
    ]
    return [
        Heading("Tasks that tell the cells apart"),
        Table(
            head,
            table,
            id="tasks",
            caption=f"a block is discordant when its sessions differ on {METRIC_LABELS.get(report.primary_metric, 'the primary outcome')}",
        ),
        Para(
            "A task whose every block is concordant cannot tell the cells apart: every cell scored the same on "
            "every session." + _rule(report)
        ),
    ]


def inert_caveat(report: Report, _manifest: object) -> Caveat | None:
    """Tasks on which every cell scored the same on every session, and what they do to the run's figures."""
    inert = [r for r in _rows(report) if not r["discriminating"]]
    if not inert:
        return None
    dropped = [r for r in inert if r["dropped_after"] is not None]
    saved = sum(r["sessions_saved"] or 0 for r in dropped)
    usd = sum(r["usd_saved"] or 0.0 for r in dropped)
    return Caveat(
        id="inert-tasks",
        text=f"{', '.join(r['id'] for r in inert)}: every cell scored the same on every session (no discordant "
        f"block), so {'these tasks tell' if len(inert) > 1 else 'this task tells'} the cells nothing. "
        f"{'They count' if len(inert) > 1 else 'It counts'} in each cell's pooled rates and blocks and pulls "
        "every pooled Δ towards 0, while the paired tests, which only discordant blocks move, are unchanged; the "
        "answers rest on the other tasks."
        + (
            f" The adaptive run stopped scheduling {', '.join(r['id'] for r in dropped)} once sure, which saved "
            f"{saved} sessions (${usd:.4f} at this run's spend per session)."
            if dropped
            else ""
        ),
    )


SECTION = Section("tasks", build, render)

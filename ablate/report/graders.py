"""The graders section: each named check (a plugin-eval grader) under its name, how often it passed, per task
and cell (nothing when no task has one)."""

from __future__ import annotations

from typing import Any

from ablate.report.blocks import Block, Heading, Table
from ablate.report.context import Context, Page, Section
from ablate.report.model import GraderRate, Report


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Each named check's passes and evaluations per (task, grader, cell), in the manifest's cell order."""
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
    return {
        "graders": [
            GraderRate(task=t, grader=g, kind=k, weight=w, cell=c, passed=p, n=n)
            for (t, g, k, w, c), (p, n) in sorted(
                tally.items(), key=lambda kv: (*kv[0][:2], order.get(kv[0][4], 0))
            )
        ]
    }


def render(report: Report, page: Page) -> list[Block]:
    """Passed / evaluated per named check and cell."""
    if not report.graders:
        return []
    cells = list(dict.fromkeys(g.cell for g in report.graders))
    rows: dict[tuple[str, str], dict[str, str]] = {}
    meta: dict[tuple[str, str], tuple[str, float]] = {}
    for g in report.graders:
        rows.setdefault((g.task, g.grader), {})[g.cell] = f"{g.passed}/{g.n}"
        meta[(g.task, g.grader)] = (g.kind, g.weight)
    return [
        Heading("Graders"),
        Table(
            ["task", "grader", "kind", "weight", *cells],
            [
                [t, name, meta[(t, name)][0], f"{meta[(t, name)][1]:g}", *[by.get(c, "–") for c in cells]]
                for (t, name), by in rows.items()
            ],
            caption="times each named check passed / items where it could be evaluated",
            id="graders",
        ),
    ]


SECTION = Section("graders", build, render, layer_runs_only=True)

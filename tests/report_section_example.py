"""An example report section: per cell, how many of its sessions were scored (docs/EXTENDING.md shows it)."""

from __future__ import annotations

from typing import Any

from ablate.report.blocks import Block, Heading, Table
from ablate.report.context import Context, Page, Section
from ablate.report.model import Report


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Its part of report.json: cell id → scored sessions."""
    counts = {c.id: 0 for c in ctx.manifest.cells}
    for _task, cell, _repeat in ctx.items.scored:
        counts[cell] += 1
    return {"scored_sessions": counts}


def render(report: Report, page: Page) -> list[Block]:
    """Its blocks of report.md and report.html: a heading and a table."""
    counts: dict[str, int] = SECTION.part(report)
    return [
        Heading("Scored sessions"),
        Table(["cell", "sessions"], [[c, str(n)] for c, n in counts.items()], id="scored-sessions"),
    ]


SECTION = Section("scored_sessions", build, render)

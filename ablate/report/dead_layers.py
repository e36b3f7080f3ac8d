"""The dead layers section: per layer of the control, whether its sessions loaded and used it."""

from __future__ import annotations

from typing import Any

from ablate.report.blocks import Block, Heading, Para, Table
from ablate.report.context import Context, Page, Section
from ablate.report.model import Report
from ablate.report.summaries import layer_use


def build(ctx: Context, report: Report) -> dict[str, Any]:
    return {"layer_use": layer_use(ctx.manifest, ctx.control, ctx.items.scored)}


def render(report: Report, page: Page) -> list[Block]:
    """The layer-use table and the layers dead here."""
    b: list[Block] = [Heading("Dead layers")]
    dead = [u for u in report.layer_use if u.status in ("never loaded", "loaded, never used")]
    b.append(
        Table(
            ["layer", "status", "evidence"],
            [[u.layer, u.status, u.evidence] for u in report.layer_use],
            id="layer-use",
        )
        if report.layer_use
        else Para("Not assessed.")
    )
    if dead:
        b.append(Para("Dead here: " + ", ".join(f"{u.layer} ({u.status})" for u in dead) + "."))
    return b


SECTION = Section("layer_use", build, render, layer_runs_only=True)

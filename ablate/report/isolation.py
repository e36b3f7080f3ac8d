"""The isolation section: what the probe proved of the run's cells, and the items excluded from the figures."""

from __future__ import annotations

from typing import Any

from ablate.report.blocks import Block, Heading, Para, Table
from ablate.report.context import Context, Page, Section, read_probe
from ablate.report.model import Report


def build(ctx: Context, report: Report) -> dict[str, Any]:
    return {"probe": read_probe(ctx.run_dir), "excluded_items": ctx.items.excluded}


def probe_words(probe: dict[str, object]) -> str:
    """The stored probe result in words: overall verdict, fidelity, each cell's verdict."""
    if "error" in probe:
        return f"Probe: {probe['error']}"
    if probe.get("skipped"):
        earlier = probe.get("earlier")
        return (
            f"Probe: not run ({probe['skipped']}): nothing in this folder proves which layers reached the model "
            "in each cell; `ablate probe` on the same setup does, for free."
            + (
                f" An earlier probe of this folder refused the run — {probe_words(earlier)}"
                if isinstance(earlier, dict)
                else ""
            )
        )
    cells = probe.get("cells")
    cells = cells if isinstance(cells, list) else []
    verdicts = [f"{c.get('id', '?')} {c.get('verdict', '?')}" for c in cells if isinstance(c, dict)]
    fidelity = probe.get("fidelity")
    equal = fidelity.get("equal") if isinstance(fidelity, dict) else None
    said = "Probe: " + ("every cell as expected" if probe.get("ok") else "NOT every cell as expected")
    said += "; shadow fidelity equal" if equal else "; shadow fidelity DIFFERENT" if equal is not None else ""
    return said + (f"; cells: {', '.join(verdicts)}" if verdicts else "") + "."


def render(report: Report, page: Page) -> list[Block]:
    """The probe in words (or how to get one), and the excluded items (or that there is none)."""
    probe = probe_words(report.probe) if report.probe else (
        "No probe.json in this run folder (it was planned or run without the probe-first step): run "
        "`ablate probe` on the same setup to prove what reaches the model."
    )  # fmt: skip
    excluded = (
        Table(["item", "reason"], [[e.item, e.reason] for e in report.excluded_items], id="excluded")
        if report.excluded_items
        else Para(
            "No item was excluded: every planned item completed and no session was flagged by provenance."
        )
    )
    return [Heading("Isolation and provenance"), Para(probe), excluded]


SECTION = Section("isolation", build, render)

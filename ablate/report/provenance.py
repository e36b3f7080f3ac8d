"""The report's optional "your own history" section: what ``ablate usage`` says about the run's layers, built
only where that history can be read. Context for the figures, never evidence: it feeds no Δ, test or ranking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablate.folder.layout import RunManifest
from ablate.mine.usage import provenance_for
from ablate.report.blocks import Block, Bullets, Heading, Para
from ablate.report.context import Context, Page, Section
from ablate.report.model import Provenance, Report

HEADING = "Your own history (context, not part of the measurement)"


def provenance_block(manifest: RunManifest, config_dir: Path, *, last: int = 500) -> dict[str, Any] | None:
    """``{"heading", "sessions", "lines": [...]}`` for ``report.json``: the history of the layers the run's
    cells strip, or None when the config dir holds no session of its repository (no section)."""
    if not (config_dir / "projects").is_dir():
        return None
    repo = Path(manifest.setup.repo) if manifest.setup.repo else None
    lines = provenance_for((s for c in manifest.cells for s in c.stripped), config_dir, repo=repo, last=last)
    return {"heading": HEADING, "sessions": lines[0]["sessions"], "lines": lines} if lines else None


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """The user's own history of the stripped layers, when this machine has it (never part of the figures)."""
    config = ctx.manifest.setup.config_dir
    block = None
    if config is not None:
        try:
            block = provenance_block(ctx.manifest, Path(config))
        except OSError as exc:
            ctx.say(f"your own history: not read ({exc})")
    return {"provenance": Provenance.model_validate(block) if block else None}


def render(report: Report, page: Page) -> list[Block]:
    """The section for a report's :attr:`~ablate.report.model.Report.provenance` (nothing without it)."""
    prov = report.provenance
    if prov is None:
        return []
    note = (
        f"From the last {prov.sessions} sessions in your config dir (`ablate usage`): how often the CLI "
        "loaded each stripped layer and how often a session used it. These counts are not part of the "
        "measured effects above."
    )
    return [Heading(prov.heading), Para(note), Bullets([ln.sentence for ln in prov.lines])]


SECTION = Section("provenance", build, render)

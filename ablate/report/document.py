"""The report as a document: each section's blocks (:data:`ablate.report.sections.SECTIONS`), in order."""

from __future__ import annotations

from ablate.report import sections
from ablate.report.blocks import Document
from ablate.report.context import Page
from ablate.report.model import Report


def build_document(report: Report, page: Page | None = None) -> Document:
    """Every section's blocks in order (figures drawn into ``page.plots``; none without a page); a piece run
    leaves out the sections of a layer run (its cells cut many pieces: the per-piece table is its answer)."""
    page = page or Page()
    doc = Document(f"ablate report — {report.run.id}")
    for s in sections.SECTIONS:
        if not (s.layer_runs_only and report.piece_design is not None):
            doc.blocks.extend(s.render(report, page))
    return doc

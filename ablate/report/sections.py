"""The report's sections, in order: the one list that makes ``report.json``, ``report.md`` and ``report.html``
(docs/EXTENDING.md#adding-a-report-section). The answer comes first (the ranking, or a piece run's per-piece
table), then what qualifies it; :func:`build_report` runs every ``build`` over one
:class:`~ablate.report.context.Context` (the run folder read once), :func:`build_document` every ``render``."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

from ablate import __version__
from ablate.report.blocks import Document
from ablate.report.context import Page, Section, make_context
from ablate.report.model import Report

#: The section modules of ``ablate/report/``, in report order.
ORDER = (
    "ranking",
    "pieces",
    "interactions",
    "models",
    "sequential",
    "noise_floor",
    "header",
    "tables",
    "contributions",
    "layer_interactions",
    "power_table",
    "regressions",
    "holdout",
    "generalization",
    "discriminating",
    "graders",
    "dead_layers",
    "isolation",
    "carried",
    "flipped",
    "provenance",
    "caveats",
    "fingerprints",
)
SECTIONS: list[Section] = [import_module(f"ablate.report.{name}").SECTION for name in ORDER]


def build_report(
    run_dir: Path,
    *,
    alpha: float = 0.05,
    control: str | None = None,
    primary: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Read ``run_dir`` and compute the report. No model calls; the same folder gives the same report."""
    from ablate.report.digest import inputs_digest

    digest = inputs_digest(run_dir)  # before reading: a change while building makes the report stale
    ctx = make_context(
        run_dir, alpha=alpha, control=control, primary=primary, say=progress or (lambda _m: None)
    )
    start: dict[str, Any] = {"generated_by": f"ablate {__version__}", "alpha": alpha, "inputs_sha256": digest}
    building = Report.model_construct(**start)  # unvalidated until every section has built its part
    for section in SECTIONS:
        building.__dict__.update(section.build(ctx, building))
    return Report.model_validate(building.__dict__)  # every required field filled, every value checked


def build_document(report: Report, page: Page | None = None) -> Document:
    """Every section's blocks in order, figures drawn into ``page.plots``; a piece run's without a layer run's."""
    page = page or Page()
    doc = Document(f"ablate report — {report.run.id}")
    for s in SECTIONS:
        if not (s.layer_runs_only and report.piece_design is not None):
            doc.blocks.extend(s.render(report, page))
    return doc

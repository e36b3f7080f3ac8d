"""Build the report (:class:`~ablate.report.model.Report`) from a run folder, and nothing else: the sections
of :data:`ablate.report.sections.SECTIONS`, run in order over one :class:`~ablate.report.context.Context`
(docs/ARCHITECTURE.md#statistics: the paired design)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ablate import __version__
from ablate.report import sections
from ablate.report.context import make_context
from ablate.report.model import Report


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
    for section in sections.SECTIONS:
        building.__dict__.update(section.build(ctx, building))
    return Report.model_validate(building.__dict__)  # every required field filled, every value checked

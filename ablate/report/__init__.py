"""The report: ``report.json``, ``report.md``, ``report.html`` and ``plots/`` from a run folder
(:func:`write_report`; the report itself: :func:`ablate.report.sections.build_report`, over
:data:`ablate.report.sections.SECTIONS`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ablate.core.errors import UsageError
from ablate.core.fsutil import atomic_write_bytes
from ablate.folder.layout import RunFolder
from ablate.report.model import Report

FORMATS = ("md", "json", "html")


@dataclass
class WrittenReport:
    report: Report
    paths: dict[str, Path] = field(default_factory=dict)
    """Format (md, json, html, svg, png) → file written."""


def parse_formats(value: str | Iterable[str]) -> list[str]:
    """``md,json,html`` → a checked list; an unknown format is a :class:`UsageError`."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out = [f.strip().lower() for f in items if f.strip()]
    bad = [f for f in out if f not in FORMATS]
    if bad or not out:
        raise UsageError(
            f"--format {','.join(items) if not isinstance(value, str) else value}: unknown format "
            f"{', '.join(bad) or '(none)'}",
            hint="use any of md, json, html, comma-separated",
        )
    return list(dict.fromkeys(out))


def write_report(
    run_dir: Path,
    *,
    formats: Iterable[str] = FORMATS,
    alpha: float = 0.05,
    control: str | None = None,
    primary: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> WrittenReport:
    """Build the report of ``run_dir`` and write it there (atomically, file by file)."""
    from ablate.report.context import Page
    from ablate.report.html import render_html
    from ablate.report.markdown import render_markdown
    from ablate.report.sections import build_document, build_report

    say = progress or (lambda _m: None)
    fmts = parse_formats(list(formats))
    report = build_report(run_dir, alpha=alpha, control=control, primary=primary, progress=say)
    written, folder = WrittenReport(report), RunFolder(run_dir)
    if "json" in fmts:
        data = orjson.dumps(report.model_dump(mode="json"), option=orjson.OPT_INDENT_2) + b"\n"
        atomic_write_bytes(folder.report_json, data)
        written.paths["json"] = folder.report_json
    if "md" in fmts or "html" in fmts:
        say("drawing the plots")
        page = Page(folder.plots_dir)
        doc = build_document(report, page)
        if "ranking" in page.drawn:  # the forest plot
            written.paths["svg"], written.paths["png"] = page.drawn["ranking"]
        if "md" in fmts:
            atomic_write_bytes(folder.report_md, render_markdown(doc).encode())
            written.paths["md"] = folder.report_md
        if "html" in fmts:
            atomic_write_bytes(folder.report_html, render_html(doc, run_dir).encode())
            written.paths["html"] = folder.report_html
    return written


__all__ = ["FORMATS", "Report", "WrittenReport", "parse_formats", "write_report"]

"""The blocks a report document is made of (headings, paragraphs, tables, the figure) and the formatters
every section uses, rendered to Markdown and HTML alike (``fmt_value``/``fmt_delta`` come from
the metric registry :mod:`ablate.folder.metrics`, shared with the grade stage)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ablate.folder.metrics import fmt_delta as fmt_delta, fmt_value as fmt_value
from ablate.report.model import Comparison

RowStyle = Literal["real", "draw", ""]


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str
    strong: bool = False


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    id: str = ""
    caption: str = ""
    row_styles: list[RowStyle] = field(default_factory=list)
    """One per row when set: ``real`` (a real effect), ``draw`` (no real effect) or ``""`` (the HTML row class)."""
    links: dict[str, str] = field(default_factory=dict)
    """A cell's text → an anchor of the page: report.html links the cell there (Markdown shows the text)."""


@dataclass
class Figure:
    """The forest plot (the renderer embeds it; Markdown links it)."""

    svg: str
    png: str
    alt: str


@dataclass
class Raw:
    """HTML of its own (report.html only; Markdown leaves it out)."""

    html: str


Block = Heading | Para | Bullets | Table | Figure | Raw


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)


def fmt_ci(c: Comparison) -> str:
    return fmt_interval(c.metric, c.ci_low, c.ci_high)


def fmt_interval(metric: str, lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return "not computable"
    return f"[{fmt_delta(metric, lo)}, {fmt_delta(metric, hi)}]"


def fmt_p(p: float | None) -> str:
    return "–" if p is None else "<0.001" if p < 0.001 else f"{p:.3f}"


def row_style(c: Comparison) -> RowStyle:
    """How a comparison's row is styled: by its evidence, never by its text."""
    return "" if c.p is None else "real" if c.real else "draw"


def real_mark(c: Comparison) -> str:
    return "n/a" if c.p is None else "**real**" if c.real else "draw"


def layers_text(layers: list[str]) -> str:
    return f"{len(layers)} layers (everything)" if len(layers) > 3 else ", ".join(layers) or "–"


def strips_text(layers: list[str], pieces: list[str]) -> str:
    """What a cell strips, short: its layers, or a piece run's cell its pieces."""
    if not pieces:
        return layers_text(layers)
    return ", ".join(pieces) if len(pieces) <= 3 else f"{len(pieces)} pieces"

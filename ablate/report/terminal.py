"""The report's answer on the terminal: the table report.md opens with (the ranking, or a piece run's
per-piece table) and its one sentence per verdict, as plain aligned text."""

from __future__ import annotations

import textwrap

from tabulate import tabulate

from ablate.report.blocks import Bullets, Table
from ablate.report.model import Report

#: Columns of the ranking left out on the terminal (long; report.md has them).
TERMINAL_LEFT_OUT = ("real on",)
#: Columns left out, in this order, until the table fits a narrow terminal.
NARROW = ("evidence", "Δ cost", "Δ turns", "strips", "kind", "tokens", "p ")


def answer_text(report: Report, width: int | None = None) -> list[str]:
    """The answer's table (less :data:`TERMINAL_LEFT_OUT`) and its sentences, bold dropped; with a ``width``,
    :data:`NARROW` columns left out and the sentences wrapped until they fit."""
    from ablate.report import models

    blocks = models.answer_blocks(report)
    table = next((b for b in blocks if isinstance(b, Table)), None)
    if table is None or not table.rows:
        return []
    keep = [i for i, h in enumerate(table.headers) if h not in TERMINAL_LEFT_OUT]
    while True:
        rows = [[row[i].replace("**", "") for i in keep] for row in table.rows]
        lines = tabulate(
            rows, headers=[table.headers[i] for i in keep], tablefmt="simple", disable_numparse=True
        ).splitlines()
        narrow = [i for p in NARROW for i in keep if table.headers[i].startswith(p)]
        if width is None or not narrow or max(map(len, lines)) <= width:
            break
        keep.remove(narrow[0])
    said = [f"  {s.replace('**', '')}" for s in next((b.items for b in blocks if isinstance(b, Bullets)), [])]
    said += models.answer_lines(report)  # a run of several models: each one's verdicts, and the interaction
    return lines + (
        [w for s in said for w in textwrap.wrap(s, width, subsequent_indent="    ")] if width else said
    )

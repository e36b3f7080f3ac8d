"""The ranking table on the terminal: the same table report.md opens with, as plain aligned text."""

from __future__ import annotations

from tabulate import tabulate

from ablate.report.blocks import Table
from ablate.report.model import Report


def ranking_table(report: Report) -> Table | None:
    """The report document's ranking table (None when the run ranks no cell, or is a piece run: its
    answer is the per-piece table)."""
    from ablate.report.context import Page
    from ablate.report.ranking import render

    if report.piece_design is not None:
        return None

    blocks = render(report, Page())
    return next((b for b in blocks if isinstance(b, Table) and b.id == "ranking"), None)


#: Columns of the ranking left out on the terminal (long; report.md has them).
TERMINAL_LEFT_OUT = ("real on",)


def ranking_text(report: Report) -> list[str]:
    """The ranking as lines of an aligned plain-text table (empty when nothing was ranked), without the
    columns of :data:`TERMINAL_LEFT_OUT`."""
    table = ranking_table(report)
    if table is None or not table.rows:
        return []
    keep = [i for i, h in enumerate(table.headers) if h not in TERMINAL_LEFT_OUT]
    rows = [[row[i] for i in keep] for row in table.rows]
    headers = [table.headers[i] for i in keep]
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True).splitlines()

"""Per-cell totals of a run folder's results and grades, for tests that check planted outcomes by cell
(descriptive only; the statistics are ``ablate report``'s)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ablate.folder.layout import RunFolder
from ablate.folder.result import ItemResult, iter_results
from ablate.grade.record import read_grade


@dataclass(frozen=True)
class CellSummary:
    cell: str
    items: int
    complete: int
    pitfall_hits: dict[str, int]
    mean_turns: float | None
    cost_usd: float


def cell_totals(run_dir: Path) -> list[CellSummary]:
    """Descriptive per-cell totals over a run folder's results (no statistics: that is ``ablate report``)."""
    by_cell: dict[str, list[ItemResult]] = {}
    for res in iter_results(RunFolder(run_dir)):
        by_cell.setdefault(res.cell, []).append(res)
    out = []
    for cell, docs in by_cell.items():
        hits: dict[str, int] = {}
        for d in docs:
            for pid, n in d.pitfall_hits.items():
                if n:
                    hits[pid] = hits.get(pid, 0) + int(n)
        turns = [d.turns for d in docs if d.turns is not None]
        out.append(
            CellSummary(
                cell=cell,
                items=len(docs),
                complete=sum(1 for d in docs if d.complete),
                pitfall_hits=hits,
                mean_turns=sum(turns) / len(turns) if turns else None,
                cost_usd=sum(d.cost_usd or 0.0 for d in docs),
            )
        )
    return sorted(out, key=lambda s: (len(s.cell), s.cell))


@dataclass
class CellGrades:
    """Checks and judge verdicts of one cell's complete items (their current attempts)."""

    cell: str
    checked: int = 0
    """Items with checks that could be evaluated."""
    checks_passed: int = 0
    """Items whose every check passed."""
    judged: int = 0
    """Items with a pass/fail verdict of the judge."""
    judge_pass: int = 0
    """Items the judge passed."""
    judge_errors: int = 0
    """Items whose verdict is a judge error."""


def grade_totals(run_dir: Path, judge_model: str | None = None) -> list[CellGrades]:
    """Checks and verdicts per cell, in the order cells first appear in the plan.

    ``judge_model`` picks one judge; None counts the first verdict recorded for each item.
    """
    folder = RunFolder(run_dir)
    out: dict[str, CellGrades] = {}
    for res in iter_results(folder):
        row = out.setdefault(res.cell, CellGrades(res.cell))
        if not res.complete:
            continue
        grade = read_grade(folder, res.item)
        if grade is None:
            continue
        checks = grade.checks_for(res.attempt)
        if checks is not None and checks.passed is not None:
            row.checked += 1
            row.checks_passed += int(checks.passed)
        verdicts = [v for v in grade.judges if v.attempt == res.attempt]
        if judge_model is not None:
            verdicts = [v for v in verdicts if v.judge_model == judge_model]
        if verdicts:
            v = verdicts[0]
            if v.verdict == "error":
                row.judge_errors += 1
            else:
                row.judged += 1
                row.judge_pass += int(v.verdict == "pass")
    return list(out.values())

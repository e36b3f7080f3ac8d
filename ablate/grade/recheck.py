"""Second looks at a graded run folder: checks re-run from the saved diffs, and agreement between judges."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.result import iter_results
from ablate.grade.judge import load_run_tasks
from ablate.grade.record import read_grade


@dataclass
class RecheckSummary:
    """What :func:`recheck_folder` did."""

    rechecked: int = 0
    """Items whose checks were re-run from their saved diff."""
    changed: int = 0
    """Of those, items whose overall verdict (passed) differs from the one recorded before."""
    no_diff: int = 0
    """Complete items of tasks with checks but no saved diff (left as they were)."""


def recheck_folder(run_dir: Path, *, split: Literal["dev", "holdout", "both"] = "both") -> RecheckSummary:
    """Re-run every complete item's checks from its saved diff, replacing that attempt's checks."""
    from ablate.grade.checkout import grade_from_diff
    from ablate.grade.record import attempt_trace, diff_rel, record_checks

    folder = RunFolder(run_dir)
    manifest = read_manifest(folder)
    tasks = load_run_tasks(folder, manifest)
    out = RecheckSummary()
    for res in iter_results(folder):
        task = tasks.get(res.task)
        if not res.complete or task is None or not task.spec.checks or split not in ("both", task.spec.split):
            continue
        rel = diff_rel(res.item, res.attempt)
        if not (folder.root / rel).is_file():
            out.no_diff += 1
            continue
        old = read_grade(folder, res.item)
        before = old.checks_for(res.attempt) if old else None
        grade = grade_from_diff(
            task,
            (folder.root / rel).read_text(encoding="utf-8"),
            attempt=res.attempt,
            patch_rel=rel,
            trace=attempt_trace(folder, res.item, res.attempt),
        )
        assert grade is not None
        record_checks(folder, res.item, grade)
        out.rechecked += 1
        out.changed += int(before is not None and before.passed != grade.passed)
    return out


# ----------------------------------------------------------------------------------------------------------
# Agreement between judges


@dataclass(frozen=True)
class Agreement:
    """Agreement of two judges over the items both gave a pass/fail verdict."""

    judge_a: str
    judge_b: str
    n: int
    """Items both judged (errors excluded)."""
    percent: float | None
    """Share of those with the same verdict, in percent (None: no items)."""
    kappa: float | None
    """Cohen's kappa (None: not computable)."""
    kappa_note: str = ""
    """Why kappa is not computable."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def agreement(run_dir: Path, judges: Sequence[str]) -> list[Agreement]:
    """Percent agreement and Cohen's kappa, side by side, for every pair of judges."""
    from ablate.stats.agreement import cohen_kappa
    from ablate.stats.types import NotComputable

    folder = RunFolder(run_dir)
    results = [r for r in iter_results(folder) if r.complete]
    verdicts: dict[str, dict[str, str]] = {j: {} for j in judges}
    for res in results:
        grade = read_grade(folder, res.item)
        if grade is None:
            continue
        for j in judges:
            v = grade.verdict(j, res.attempt)
            if v is not None and v.verdict != "error":
                verdicts[j][res.item] = v.verdict
    out = []
    for a, b in itertools.combinations(judges, 2):
        items = sorted(set(verdicts[a]) & set(verdicts[b]))
        la, lb = [verdicts[a][k] for k in items], [verdicts[b][k] for k in items]
        percent = 100.0 * sum(x == y for x, y in zip(la, lb, strict=True)) / len(items) if items else None
        k = cohen_kappa(la, lb)
        kappa, note = (None, k.reason) if isinstance(k, NotComputable) else (k, "")
        out.append(Agreement(a, b, len(items), percent, kappa, note))
    return out

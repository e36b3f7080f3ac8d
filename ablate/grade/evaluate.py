"""A task's checks evaluated against the end state of an attempt (:class:`~ablate.checks.base.EndState`), each
by its own kind (:mod:`ablate.checks.registry`), and summarised into the attempt's grade."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ablate.checks.base import CheckSpec, EndState
from ablate.core.specs import Spec


class CheckResult(Spec):
    """The outcome of one ``[[checks]]`` table."""

    index: int = Field(ge=0)
    """Position of the check in the task file."""
    kind: str
    target: str
    """The file it reads, or the allowed paths joined by ``, ``."""
    passed: bool | None
    """True / False; None when it could not be evaluated (the detail says why)."""
    detail: str = ""
    """Why it failed or could not be evaluated (empty when it passed)."""
    name: str | None = None
    """The check's name (a plugin-eval grader's), when it has one."""
    weight: float = 1.0
    """Its weight in the grader score."""


class ChecksGrade(Spec):
    """The execution checks of one attempt."""

    attempt: int = Field(ge=1)
    """The attempt (``stdout/<item>.a<N>.json``) whose checkout was graded."""
    source: Literal["checkout", "diff"]
    """``checkout``: read from the checkout the session left; ``diff``: re-run from the saved diff."""
    passed: bool | None
    """Every check passed (None: none failed but some could not be evaluated)."""
    n_passed: int = Field(ge=0)
    n_checks: int = Field(ge=0)
    score: float | None = None
    """Weighted share of checks passed, 0..1 (None: some check could not be evaluated)."""
    results: list[CheckResult] = Field(default_factory=list)
    """One per check, in task order."""
    changed: list[str] | None = None
    """Paths the session added, modified or deleted (None: the diff could not be taken)."""
    diff: str | None = None
    """The saved diff, relative to the run folder (``diffs/<item>.a<N>.patch``)."""
    diff_error: str | None = None
    """Why no diff could be taken."""


def evaluate_check(index: int, check: CheckSpec, end: EndState) -> CheckResult:
    """One check's result: its kind's verdict on ``end``, under the name the kind describes it by."""
    passed, detail = check.evaluate(end)
    name, weight = check.graded()
    return CheckResult(
        index=index,
        kind=check.kind,
        target=check.describe(),
        passed=passed,
        detail=detail,
        name=name,
        weight=weight,
    )


def summarise(
    attempt: int,
    source: Literal["checkout", "diff"],
    results: list[CheckResult],
    changed: list[str] | None,
    diff: str | None,
    diff_error: str | None,
) -> ChecksGrade:
    unknown = any(r.passed is None for r in results)
    passed = False if any(r.passed is False for r in results) else None if unknown else True
    total = sum(r.weight for r in results)
    score = None if not results or unknown else sum(r.weight for r in results if r.passed) / total
    return ChecksGrade(
        attempt=attempt,
        source=source,
        passed=passed,
        n_passed=sum(1 for r in results if r.passed),
        n_checks=len(results),
        score=score,
        results=results,
        changed=changed,
        diff=diff,
        diff_error=diff_error,
    )

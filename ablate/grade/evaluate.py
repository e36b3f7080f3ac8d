"""Evaluating a task's checks against the end state of an attempt (a reader of its files, whether a file is
unchanged, the changed paths and the session's trace) and summarising them into the attempt's grade."""

from __future__ import annotations

import ast
import json
import tomllib
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import Field

from ablate.core.specs import Spec
from ablate.grade.session_checks import Reader, evaluate_session_check
from ablate.grade.trace import SessionTrace
from ablate.setup.tasks import (
    Check,
    DiffTouchesOnly,
    FileContains,
    FileExists,
    FileNotContains,
    FileParses,
    FileUnchanged,
    RegexCheck,
    ToolOrder,
    ToolUsed,
)

UnchangedTest = Callable[[str], tuple[bool | None, str]]
"""Whether a checkout-relative file is as it was at the start: (verdict, why)."""


class CheckResult(Spec):
    """The outcome of one ``[[checks]]`` table."""

    index: int = Field(ge=0)
    """Position of the check in the task file."""
    kind: str
    """The check kind."""
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
    """Checks that passed."""
    n_checks: int = Field(ge=0)
    """Checks of the task."""
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


def _under(path: str, prefixes: Sequence[str]) -> bool:
    for p in prefixes:
        if p.endswith("/"):
            if path.startswith(p):
                return True
        elif path == p or path.startswith(p + "/"):
            return True
    return False


def _parses(data: bytes, language: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 ({exc.reason} at byte {exc.start})"
    try:
        if language == "python":
            ast.parse(text)
        elif language == "json":
            json.loads(text)
        else:
            tomllib.loads(text)
    except SyntaxError as exc:
        return f"does not parse as python: {exc.msg} (line {exc.lineno})"
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        return f"does not parse as {language}: {exc}"
    except (RecursionError, MemoryError):
        return f"too deeply nested to parse as {language}"
    return ""


def evaluate_check(
    index: int,
    check: Check,
    read: Reader,
    unchanged: UnchangedTest,
    changed: list[str] | None,
    diff_error: str | None,
    trace: SessionTrace | None = None,
) -> CheckResult:
    if isinstance(check, RegexCheck | ToolUsed | ToolOrder | FileExists):
        passed, detail, target = evaluate_session_check(check, read, changed, diff_error, trace)
        return CheckResult(
            index=index,
            kind=check.kind,
            target=target,
            passed=passed,
            detail=detail,
            name=check.name or None,
            weight=check.weight,
        )
    if isinstance(check, DiffTouchesOnly):
        target = ", ".join(check.paths)
        if changed is None:
            return CheckResult(
                index=index, kind=check.kind, target=target, passed=None, detail=diff_error or "no diff"
            )
        outside = [p for p in changed if not _under(p, check.paths)]
        detail = f"changed outside the allowed paths: {', '.join(outside[:10])}" if outside else ""
        return CheckResult(index=index, kind=check.kind, target=target, passed=not outside, detail=detail)
    if isinstance(check, FileUnchanged):
        ok, detail = unchanged(check.file)
        return CheckResult(index=index, kind=check.kind, target=check.file, passed=ok, detail=detail)
    data, why = read(check.file)
    if isinstance(check, FileNotContains):
        if data is None:
            passed = True if why == "absent" else None
            return CheckResult(
                index=index, kind=check.kind, target=check.file, passed=passed, detail="" if passed else why
            )
        found = check.text.encode("utf-8") in data
        return CheckResult(
            index=index,
            kind=check.kind,
            target=check.file,
            passed=not found,
            detail=f"contains {check.text!r}" if found else "",
        )
    if data is None:
        # absent: a definite failure; anything else (link out, too large, unknown start): not evaluable
        passed = False if why == "absent" else None
        return CheckResult(index=index, kind=check.kind, target=check.file, passed=passed, detail=why)
    if isinstance(check, FileContains):
        found = check.text.encode("utf-8") in data
        return CheckResult(
            index=index,
            kind=check.kind,
            target=check.file,
            passed=found,
            detail="" if found else f"does not contain {check.text!r}",
        )
    assert isinstance(check, FileParses)
    problem = _parses(data, check.language)
    return CheckResult(index=index, kind=check.kind, target=check.file, passed=not problem, detail=problem)


def summarise(
    attempt: int,
    source: Literal["checkout", "diff"],
    results: list[CheckResult],
    changed: list[str] | None,
    diff: str | None,
    diff_error: str | None,
) -> ChecksGrade:
    if any(r.passed is False for r in results):
        passed: bool | None = False
    elif any(r.passed is None for r in results):
        passed = None
    else:
        passed = True
    total = sum(r.weight for r in results)
    score = (
        None
        if not results or any(r.passed is None for r in results)
        else sum(r.weight for r in results if r.passed) / total
    )
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

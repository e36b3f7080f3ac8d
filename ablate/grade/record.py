"""``grades/<item>.json``: execution checks and judge verdicts of one item (grading never rewrites a result),
written atomically under a lock; checks and verdicts are kept per attempt, so a reader pairs them with the
result's ``attempt``, never with a stale one."""

from __future__ import annotations

import fcntl
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import orjson
from pydantic import Field

from ablate.checks.base import SessionTrace
from ablate.core.fsutil import atomic_write_bytes
from ablate.core.specs import Spec, read_json_object, require_schema, validate
from ablate.folder.layout import DIFFS, GRADE_SCHEMA_VERSION, RunFolder, utcnow
from ablate.grade.checkout import Baseline, grade_checkout
from ablate.grade.evaluate import ChecksGrade
from ablate.grade.trace import read_trace
from ablate.setup.tasks import Task

Verdict = Literal["pass", "fail", "error"]


class JudgeVerdict(Spec):
    """One judge's verdict on one attempt's final answer."""

    judge_model: str
    """The judge model."""
    attempt: int = Field(ge=1)
    """The attempt whose final answer was judged."""
    verdict: Verdict
    """pass / fail; ``error``: no usable verdict (malformed twice, a refusal, an API error): not a fail."""
    reason: str = ""
    """The judge's one-line reason (pass/fail) or what went wrong (error)."""
    tries: int = Field(default=1, ge=0)
    """Calls made for this verdict (a malformed verdict is retried once)."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    """Estimated spend (price table; None for an unknown model)."""
    graded_at: str = Field(default_factory=utcnow)
    """ISO-8601 UTC."""


class GradeFile(Spec):
    """``grades/<item>.json``."""

    schema_version: Literal[1] = GRADE_SCHEMA_VERSION
    item: str
    """``<task>__<cell>__r<repeat>``."""
    checks: dict[str, ChecksGrade] = Field(default_factory=dict)
    """Execution checks per attempt number (as a string)."""
    judges: list[JudgeVerdict] = Field(default_factory=list)
    """Judge verdicts, one per (judge model, attempt): a later verdict replaces an earlier error."""

    def checks_for(self, attempt: int) -> ChecksGrade | None:
        return self.checks.get(str(attempt))

    def verdict(self, judge_model: str, attempt: int) -> JudgeVerdict | None:
        return next((v for v in self.judges if v.judge_model == judge_model and v.attempt == attempt), None)


def diff_rel(item: str, attempt: int) -> str:
    """Where the session diff of an attempt is saved, relative to the run folder."""
    return f"{DIFFS}/{item}.a{attempt}.patch"


def read_grade(folder: RunFolder, item: str) -> GradeFile | None:
    """The item's grades, or None. An unreadable or foreign file is a located :class:`SpecError`."""
    path = folder.grade_path(item)
    data = read_json_object(path)
    if data is None:
        return None
    require_schema(
        data, path, GRADE_SCHEMA_VERSION, "grade", hint="grade the run again: `ablate grade RUN_DIR`"
    )
    return validate(GradeFile, data, path)


_THREAD_LOCK = threading.Lock()


@contextmanager
def grades_lock(folder: RunFolder, name: str = ".lock", *, busy: Exception | None = None) -> Iterator[None]:
    """An exclusive ``flock`` on ``grades/<name>``: waited for, or with ``busy`` refused with it when held."""
    path = folder.grades_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (fcntl.LOCK_NB if busy is not None else 0))
        except BlockingIOError as exc:  # only with LOCK_NB, so with ``busy``
            raise (busy or exc) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def update_grade(folder: RunFolder, item: str, change: Callable[[GradeFile], GradeFile]) -> GradeFile:
    """Read-modify-write the item's grade file atomically, under the folder's grade lock."""
    with _THREAD_LOCK, grades_lock(folder):
        current = read_grade(folder, item) or GradeFile(item=item)
        new = change(current)
        data = orjson.dumps(new.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
        atomic_write_bytes(folder.grade_path(item), data + b"\n")
        return new


def record_checks(folder: RunFolder, item: str, grade: ChecksGrade) -> GradeFile:
    """Store one attempt's checks (replacing an earlier grade of the same attempt, e.g. a re-grade)."""
    return update_grade(
        folder, item, lambda g: g.model_copy(update={"checks": {**g.checks, str(grade.attempt): grade}})
    )


def record_verdict(folder: RunFolder, item: str, verdict: JudgeVerdict) -> GradeFile:
    """Store one judge verdict, replacing that judge's earlier verdict of the same attempt."""

    def change(g: GradeFile) -> GradeFile:
        keep = [
            v for v in g.judges if not (v.judge_model == verdict.judge_model and v.attempt == verdict.attempt)
        ]
        return g.model_copy(update={"judges": [*keep, verdict]})

    return update_grade(folder, item, change)


def grade_attempt(
    folder: RunFolder, item: str, attempt: int, task: Task, checkout: Path, baseline: Baseline
) -> ChecksGrade | None:
    """The runner's hook after a session: grade the checkout, save the diff, record the checks (before the
    environment is reset; stdout and transcript are in the run folder, where the session checks read them)."""
    rel = diff_rel(item, attempt)
    grade = grade_checkout(
        task,
        checkout,
        baseline,
        attempt=attempt,
        patch_path=folder.root / rel,
        patch_rel=rel,
        trace=attempt_trace(folder, item, attempt),
    )
    if grade is not None:
        record_checks(folder, item, grade)
    return grade


def attempt_trace(folder: RunFolder, item: str, attempt: int) -> SessionTrace:
    """The final answer and tool calls of an attempt, from its stdout and transcript in the run folder."""
    found = sorted(folder.transcript_dir(item, attempt).glob("*.jsonl"))
    stdout = folder.stdout_path(item, attempt)
    return read_trace(stdout, found[0] if found else None, found[0].stem if found else None)


def carry_grades(src: RunFolder, dest: RunFolder, item: str, renumber: Mapping[int, int]) -> None:
    """``ablate merge``'s carrier: the item's checks, diffs and verdicts into ``dest``, attempts renumbered."""
    grade = read_grade(src, item)
    if grade is None:
        return
    checks: dict[str, ChecksGrade] = {}
    for key, c in grade.checks.items():
        new = renumber.get(int(key))
        if new is None:
            continue
        diff = c.diff
        if c.diff is not None and (src.root / c.diff).is_file():
            diff = diff_rel(item, new)
            (dest.root / diff).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src.root / c.diff, dest.root / diff)
        checks[str(new)] = c.model_copy(update={"attempt": new, "diff": diff})
    judges = [
        v.model_copy(update={"attempt": renumber[v.attempt]}) for v in grade.judges if v.attempt in renumber
    ]
    if checks or judges:
        update_grade(
            dest,
            item,
            lambda g: g.model_copy(update={"checks": {**g.checks, **checks}, "judges": [*g.judges, *judges]}),
        )

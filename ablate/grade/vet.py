"""Graders checked before a cent is spent: every task's ``[[checks]]`` on the untouched checkout and on its
``reference`` solution; checks that all pass untouched, or fail on the reference, are weak
(docs/GUIDE.md#weak-checks). Nothing is written and nothing is run but ``git cat-file``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.checks.base import Reader, SessionTrace
from ablate.core.errors import SpecError
from ablate.core.gitutil import git_env
from ablate.grade.checkout import overlay_state, patched
from ablate.grade.evaluate import CheckResult, evaluate_check
from ablate.grade.patch import parse_patch
from ablate.setup.tasks import Task

if TYPE_CHECKING:
    from ablate.core.claude import ClaudeBinary
    from ablate.run.prepare import PreparedRun

#: What the checks see of a session that did nothing: no tool call and an empty final answer.
UNTOUCHED_TRACE = SessionTrace(last_message="", transcript_read=True)


def head_reader(repo: Path, head: str) -> Reader:
    """Reads a file of the commit ``head`` of ``repo`` (the checkout every cell starts from)."""

    def read(rel: str) -> tuple[bytes | None, str]:
        proc = subprocess.run(
            ["git", "cat-file", "blob", f"{head}:{rel}"],
            cwd=repo,
            env=git_env(),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        return (proc.stdout, "") if proc.returncode == 0 else (None, "absent")

    return read


def _seeded(task: Task, base: Reader) -> Reader:
    seeds = task.spec.files
    return lambda rel: (seeds[rel].encode("utf-8"), "") if rel in seeds else base(rel)


def _reference(task: Task, start: Reader) -> dict[str, tuple[bytes | None, str]]:
    """The files the reference changes, each with its content after it; a located error when it cannot apply."""
    path = task.reference
    assert path is not None
    where = (task.source, "reference")
    if path.is_dir():
        laid = {
            p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
        }
        return {rel: (data, "") for rel, data in laid.items() if start(rel)[0] != data}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError.single(
            *where,
            f"{path}: {getattr(exc, 'strerror', None) or exc}",
            hint="give a patch file (`git diff > fix.patch`) or a folder of files, relative to the task file",
        ) from exc
    if not parse_patch(text):
        raise SpecError.single(*where, f"{path}: no `diff --git` section: not a patch `git diff` writes")
    after: dict[str, tuple[bytes | None, str]] = {}
    for p, new, why in patched(text, start, f"{path}"):
        if new is None and why != "absent":
            raise SpecError.single(
                *where,
                why
                if "does not apply" in why
                else f"{path} changes {p.path}, which is {why} in the checkout",
                hint="make the patch against the repository's HEAD with the task's seed files (`git diff`)",
            )
        after[p.path] = (new, why)
    return after


def _results(
    task: Task, start: Reader, after: dict[str, tuple[bytes | None, str]], trace: SessionTrace | None
) -> list[CheckResult]:
    end = overlay_state(start, after, trace)
    return [evaluate_check(i, c, end) for i, c in enumerate(task.spec.checks)]


def _seen(results: Sequence[CheckResult]) -> str:
    """``#1 file_contains app.py passed, #2 regex last_message failed (pattern not found)``."""
    word = {True: "passed", False: "failed", None: "not evaluable"}
    return ", ".join(
        f"#{r.index + 1} {r.kind} {r.name or r.target} {word[r.passed]}"
        + (f" ({r.detail})" if r.detail else "")
        for r in results
    )


def vet_task(task: Task, base: Reader) -> dict[str, Any]:
    """One task's record: its checks untouched and on its reference, and why they are ``weak``."""
    start = _seeded(task, base)
    untouched = _results(task, start, {}, UNTOUCHED_TRACE)
    reference = _results(task, start, _reference(task, start), None) if task.reference is not None else None
    why = []
    if untouched and all(r.passed for r in untouched):
        why.append(f"every check passes on the untouched checkout ({_seen(untouched)})")
    if reference is not None and any(r.passed is False for r in reference):
        why.append(f"a check fails on its reference {task.spec.reference} ({_seen(reference)})")
    return {
        "id": task.id,
        "source": str(task.source),
        "sha256": task.sha256,
        "guard_only": task.spec.guard_only,
        "weak": f"task {task.id} ({task.source}): " + "; ".join(why)
        if why and not task.spec.guard_only
        else None,
        "untouched": [r.model_dump(mode="json") for r in untouched],
        "reference": None if reference is None else [r.model_dump(mode="json") for r in reference],
    }


def vet_tasks(tasks: Sequence[Task], repo: Path, head: str) -> dict[str, Any]:
    """probe.json's ``graders``: every task with checks vetted against ``repo`` at ``head``."""
    base = head_reader(repo, head)
    out, problems = [], []
    for t in tasks:
        if not t.spec.checks:
            continue
        try:
            out.append(vet_task(t, base))
        except SpecError as exc:
            problems.extend(exc.problems)
    if problems:
        raise SpecError(
            problems, hint="make the patch against the repository's HEAD with the task's seed files"
        )
    return {
        "head": head,
        "hashes": {t.id: t.sha256 for t in tasks},
        "weak": [t["id"] for t in out if t["weak"]],
        "tasks": out,
    }


def vet_and_probe(
    prep: PreparedRun,
    claude: ClaudeBinary,
    isolation: str,
    say: Callable[[str], None],
    *,
    probe: bool,
    work_dir: Path | None,
    jobs: int,
    allow_weak: bool,
) -> None:
    """:func:`ablate.run.probe_first.probe_or_skip` with the run's tasks vetted by :func:`vet_tasks`."""
    from ablate.run.probe_first import probe_or_skip

    probe_or_skip(
        prep,
        claude,
        enabled=probe,
        isolation=isolation,
        work_dir=work_dir,
        jobs=jobs,
        say=say,
        vet=lambda: vet_tasks(prep.tasks, prep.setup.repo, prep.setup.head),
        allow_weak=allow_weak,
    )

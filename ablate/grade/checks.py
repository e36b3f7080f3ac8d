"""Execution checks: seed a checkout before a session, grade the checkout it left, re-grade from a saved diff.

The runner calls :func:`apply_seed_files` on a cell's checkout after preparing it and before the session, and
:func:`grade_checkout` after the session and before the environment is reset. Nothing the model wrote is ever
executed: checks read files (``file_parses`` parses them with ``ast``/``json``/``tomllib``), and the diff is
taken by git running with a scratch git dir, index and object store of ablate's own (the checkout's
``.git/config``, hooks and attribute filters, which the session could have changed, are never consulted).

The diff of the session (the checkout against its seeded start) is saved as ``diffs/<item>.a<N>.patch`` so
``ablate judge`` can show it to the judge and re-run the checks with :func:`grade_from_diff`.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field

from ablate.core.errors import UsageError
from ablate.core.fsutil import atomic_write_bytes, sha256_bytes
from ablate.core.specs import Spec
from ablate.grade.patch import apply_file_patch, parse_patch
from ablate.grade.trace import SessionTrace, ToolCall
from ablate.isolate.viewpath import as_seen_inside, real_path, view_command
from ablate.setup.tasks import (
    Check,
    DiffTouchesOnly,
    FileContains,
    FileExists,
    FileNotContains,
    FileParses,
    FileUnchanged,
    RegexCheck,
    Task,
    ToolOrder,
    ToolRef,
    ToolUsed,
    regex_flags,
)

Reader = Callable[[str], tuple[bytes | None, str]]
"""Reads a checkout-relative file: (bytes, "") or (None, why)."""
UnchangedTest = Callable[[str], tuple[bool | None, str]]
"""Whether a checkout-relative file is as it was at the start: (verdict, why)."""

#: Files larger than this are not read by a check (the check cannot pass or fail: ``passed`` is None).
MAX_CHECK_BYTES = 8 << 20


class UnsafePath(UsageError):
    """A task path would leave the checkout (through a symlink) or name something that is not a plain file."""


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


@dataclass
class Baseline:
    """The seeded start of a checkout, snapshotted before the session (see :func:`apply_seed_files`)."""

    checkout: Path
    seeded: list[str]
    """The seed files written."""
    hashes: dict[str, str | None]
    """sha256 of every file a check names, at the start (None: absent or not a regular file)."""
    scratch: Path | None = None
    """ablate's scratch git dir, index and objects (None: no snapshot, the task has no checks)."""
    tree: str | None = None
    """The git tree of the seeded start, in the scratch object store."""
    error: str | None = None
    """Why the snapshot failed (the checks still run; the diff is then unavailable)."""
    extra_paths: list[str] = field(default_factory=list)

    def discard(self) -> None:
        """Remove the scratch snapshot (idempotent)."""
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


# ----------------------------------------------------------------------------------------------------------
# Paths inside the checkout


def _components(rel: str) -> list[str]:
    return [p for p in rel.rstrip("/").split("/")]


def _walk(checkout: Path, rel: str) -> Iterator[tuple[Path, bool]]:
    """Each prefix of ``rel`` under ``checkout``, with whether it is the last component."""
    parts = _components(rel)
    cur = checkout
    for i, part in enumerate(parts):
        cur = cur / part
        yield cur, i == len(parts) - 1


def seed_target(checkout: Path, rel: str) -> Path:
    """Where a seed file goes: refuse a path whose existing components include a symlink or a non-folder."""
    for path, last in _walk(checkout, rel):
        if path.is_symlink():
            raise UnsafePath(
                f"{rel}: {path.relative_to(checkout)} in the checkout is a symlink; seed files are never "
                "written through links",
                hint="seed a path of the repo that is a plain file in plain folders",
            )
        if not last and path.exists() and not path.is_dir():
            raise UnsafePath(f"{rel}: {path.relative_to(checkout)} in the checkout is not a folder")
        if last and path.exists() and not path.is_file():
            raise UnsafePath(f"{rel}: exists in the checkout and is not a regular file")
    return checkout / rel


def read_checkout_file(checkout: Path, rel: str) -> tuple[bytes | None, str]:
    """The bytes of ``rel`` in the checkout, or (None, why): absent, a link out of the checkout, not a regular
    file, too large. Links inside the checkout are followed; nothing outside it is ever read (an ordinary
    user's view, reached through ``/proc/<pid>/root``, is resolved inside that view)."""
    path = checkout / rel
    if not os.path.lexists(path):
        return None, "absent"
    root = real_path(checkout)
    real = real_path(path)
    if os.path.commonpath([root, real]) != root:
        return None, "a symlink out of the checkout (not followed)"
    try:
        st = os.stat(real)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file"
    if st.st_size > MAX_CHECK_BYTES:
        return None, f"larger than {MAX_CHECK_BYTES} bytes (not read)"
    try:
        with open(real, "rb") as fh:
            return fh.read(MAX_CHECK_BYTES + 1), ""
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"


def _check_files(task: Task) -> list[str]:
    return sorted(
        {
            c.file
            for c in task.spec.checks
            if isinstance(c, FileContains | FileNotContains | FileParses | FileUnchanged | RegexCheck)
            and c.file is not None
        }
    )


# ----------------------------------------------------------------------------------------------------------
# Scratch git: ablate's own git dir, index and objects; the checkout's .git is only read (objects)


def _git_env(scratch: Path, checkout: Path, index: Path) -> dict[str, str]:
    """Git's environment; the work tree as git sees it (an ordinary user's view: from inside it)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(scratch),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_DIR": str(scratch / "git"),
        "GIT_WORK_TREE": as_seen_inside(checkout),
        "GIT_INDEX_FILE": str(index),
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
    }


_GIT_SAFE = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.quotePath=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.safecrlf=false",
    "-c",
    "core.symlinks=true",
)


def _git(
    scratch: Path, checkout: Path, index: Path, *args: str, stdout: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = _git_env(scratch, checkout, index)
    # git resolves its work tree: through /proc/<pid>/root that is the host's empty mount point, so in an
    # ordinary user's view git runs inside the holder's namespaces (ablate.isolate.viewpath)
    argv, cwd = view_command(checkout, ["git", *_GIT_SAFE, *args])
    if stdout is None:
        proc = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=300
        )
    else:
        stdout.parent.mkdir(parents=True, exist_ok=True)
        with stdout.open("wb") as out:
            proc = subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                timeout=300,
            )
    if proc.returncode != 0:
        raise RuntimeError(f"git {args[0]}: {proc.stderr.decode('utf-8', 'replace').strip()[:300]}")
    return proc


def _stage(scratch: Path, checkout: Path, index: Path, force: Sequence[str]) -> str:
    """Stage the whole work tree (ignored files excepted, but ``force`` paths included) and return its tree."""
    _git(scratch, checkout, index, "add", "-A", "--", ".")
    present = [p for p in force if os.path.lexists(checkout / p)]
    if present:
        _git(scratch, checkout, index, "add", "-A", "-f", "--", *present)
    return _git(scratch, checkout, index, "write-tree").stdout.decode().strip()


def _snapshot(checkout: Path, force: Sequence[str]) -> tuple[Path, str]:
    scratch = Path(tempfile.mkdtemp(prefix="ablate-grade-"))
    try:
        index = scratch / "base.index"
        subprocess.run(
            ["git", "init", "-q", "--bare", str(scratch / "git")],
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(scratch),
                "LC_ALL": "C",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
            },
            capture_output=True,
            stdin=subprocess.DEVNULL,
            check=True,
        )
        objects = checkout / ".git" / "objects"
        if objects.is_dir() and not (checkout / ".git").is_symlink():
            alt = scratch / "git" / "objects" / "info" / "alternates"
            alt.parent.mkdir(parents=True, exist_ok=True)
            alt.write_text(as_seen_inside(real_path(objects)) + "\n", encoding="utf-8")  # read by git
            src_index = checkout / ".git" / "index"
            if src_index.is_file() and not src_index.is_symlink():
                shutil.copyfile(src_index, index)  # stat data: only changed files are hashed again
        try:
            tree = _stage(scratch, checkout, index, force)
        except RuntimeError:
            index.unlink(missing_ok=True)  # an index git cannot use as a start: hash everything instead
            tree = _stage(scratch, checkout, index, force)
        return scratch, tree
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


# ----------------------------------------------------------------------------------------------------------
# Before and after the session


def apply_seed_files(task: Task, checkout: Path) -> Baseline:
    """Write the task's seed files into ``checkout`` and snapshot the seeded start (when the task has checks).

    Call it on a prepared checkout, right before the session. Seed files replace the repo's file at that
    path; a path through a symlink raises :class:`UnsafePath` before anything is written. A task without
    files and checks costs nothing.
    """
    targets = [(rel, seed_target(checkout, rel)) for rel in task.spec.files]
    for rel, target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(target.stat().st_mode) if target.is_file() else 0o644  # keep a repo file's mode
        atomic_write_bytes(target, task.spec.files[rel].encode("utf-8"), mode=mode)
    baseline = Baseline(checkout=checkout, seeded=[rel for rel, _ in targets], hashes={})
    if not task.spec.checks:
        return baseline
    for rel in _check_files(task):
        data, _ = read_checkout_file(checkout, rel)
        baseline.hashes[rel] = sha256_bytes(data) if data is not None else None
    baseline.extra_paths = sorted(set(baseline.seeded) | set(_check_files(task)))
    try:
        baseline.scratch, baseline.tree = _snapshot(checkout, baseline.extra_paths)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        baseline.error = f"no snapshot of the seeded checkout: {exc}"
    return baseline


def _session_diff(
    baseline: Baseline, checkout: Path, patch_path: Path | None
) -> tuple[list[str] | None, str | None]:
    """(changed paths, error) between the seeded start and ``checkout`` now; writes the patch. ``checkout``
    is the path the grader reaches the tree by now, not the seeding's (an ordinary user's view is held by
    another process each time)."""
    if baseline.scratch is None or baseline.tree is None:
        return None, baseline.error or "no snapshot of the seeded checkout"
    scratch = baseline.scratch
    index = scratch / "after.index"
    try:
        shutil.copyfile(scratch / "base.index", index)
        after = _stage(scratch, checkout, index, baseline.extra_paths)
        names = _git(
            scratch,
            checkout,
            index,
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-only",
            baseline.tree,
            after,
        ).stdout.decode("utf-8", "surrogateescape")
        if patch_path is not None:
            _git(
                scratch,
                checkout,
                index,
                "diff-tree",
                "-p",
                "-r",
                "--no-renames",
                "--no-ext-diff",
                "--no-textconv",
                "--full-index",
                baseline.tree,
                after,
                stdout=patch_path,
            )
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return None, f"no diff: {exc}"
    return sorted(p for p in names.split("\0") if p), None


def grade_checkout(
    task: Task,
    checkout: Path,
    baseline: Baseline,
    *,
    attempt: int = 1,
    patch_path: Path | None = None,
    patch_rel: str | None = None,
    trace: SessionTrace | None = None,
) -> ChecksGrade | None:
    """Evaluate the task's checks on the checkout the session left (read-only), and save the session's diff.

    ``trace`` (the session's final answer and tool calls) is what the ``regex``, ``tool_used`` and
    ``tool_order`` checks read; without it they are not evaluable.

    Call it after the session and before the environment is reset. ``patch_path`` receives the diff of the
    checkout against its seeded start; ``patch_rel`` is how the grade names it (relative to the run folder).
    Returns None for a task without checks. The baseline's scratch snapshot is removed.
    """
    try:
        if not task.spec.checks:
            return None
        changed, diff_error = _session_diff(baseline, checkout, patch_path)
        if changed is not None:
            # files a check names but git does not see (ignored): their hash says whether they changed
            extra = set()
            for rel, before in baseline.hashes.items():
                data, _ = read_checkout_file(checkout, rel)
                if (sha256_bytes(data) if data is not None else None) != before:
                    extra.add(rel)
            changed = sorted(set(changed) | extra)

        def read(rel: str) -> tuple[bytes | None, str]:
            return read_checkout_file(checkout, rel)

        def unchanged(rel: str) -> tuple[bool | None, str]:
            data, why = read_checkout_file(checkout, rel)
            now = sha256_bytes(data) if data is not None else None
            before = baseline.hashes.get(rel)
            if now == before:
                return True, ""
            if data is None and before is not None:
                return False, f"was a file at the start, now {why}"
            return False, "changed during the session"

        results = [
            _evaluate(i, c, read, unchanged, changed, diff_error, trace)
            for i, c in enumerate(task.spec.checks)
        ]
        return _summarise(
            attempt, "checkout", results, changed, patch_rel if changed is not None else None, diff_error
        )
    finally:
        baseline.discard()


# ----------------------------------------------------------------------------------------------------------
# Evaluating checks


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


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A ``file_exists`` glob as ``claude plugin eval`` reads it: ``**/`` any folders (or none), ``**`` anything,
    ``*`` anything within a folder, ``?`` one character; the whole path must match."""
    out = "^"
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
            continue
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        out += "[^/]*" if ch == "*" else "." if ch == "?" else re.escape(ch)
        i += 1
    return re.compile(out + "$")


def _calls(trace: SessionTrace, ref: ToolRef | ToolUsed) -> list[int]:
    """Indexes of the calls of ``ref.tool`` whose input matches ``ref.input_match``."""
    rx = re.compile(ref.input_match) if ref.input_match else None
    return [
        i
        for i, c in enumerate(trace.tool_calls)
        if c.name == ref.tool and (rx is None or rx.search(c.input_text) is not None)
    ]


def _no_trace(trace: SessionTrace | None, needs_calls: bool) -> str:
    if trace is None:
        return "the session's transcript and answer are not available to this grading"
    if needs_calls and not trace.transcript_read:
        return "no transcript: the session's tool calls are unknown"
    return ""


def _regex_text(
    check: RegexCheck,
    read: Reader,
    changed: list[str] | None,
    diff_error: str | None,
    trace: SessionTrace | None,
) -> tuple[str | None, str]:
    if check.target == "file":
        assert check.file is not None
        data, why = read(check.file)
        if data is None:
            return None, f"{check.file}: {why}"
        return data.decode("utf-8", "replace"), ""
    if check.target == "files":
        return ("\n".join(changed), "") if changed is not None else (None, diff_error or "no diff")
    missing = _no_trace(trace, check.target == "trace")
    if missing:
        return None, missing
    assert trace is not None
    if check.target == "trace":
        return trace.trace_text(), ""
    if trace.last_message is None:
        return None, "the session has no final answer"
    return trace.last_message, ""


def _evaluate_session(
    check: RegexCheck | ToolUsed | ToolOrder | FileExists,
    read: Reader,
    changed: list[str] | None,
    diff_error: str | None,
    trace: SessionTrace | None,
) -> tuple[bool | None, str, str]:
    """(passed, detail, target) of a plugin-eval grader."""
    if isinstance(check, FileExists):
        if changed is None:
            return None, diff_error or "no diff", check.path
        rx = glob_regex(check.path)
        hits = [p for p in changed if rx.match(p)]
        ok = bool(hits) == check.exists
        detail = "" if ok else (f"changed: {', '.join(hits[:5])}" if hits else "no changed path matches")
        return ok, detail, check.path
    if isinstance(check, RegexCheck):
        target = check.file if check.target == "file" and check.file else check.target
        text, why = _regex_text(check, read, changed, diff_error, trace)
        if text is None:
            return None, why, target
        found = len(re.findall(check.pattern, text, regex_flags(check.flags)))
        if check.match == "contains":
            return found > 0, "" if found else "pattern not found", target
        if check.match == "not_contains":
            return found == 0, "" if not found else f"pattern found {found} time(s)", target
        want = int(check.match.removeprefix("count:"))
        return found == want, "" if found == want else f"found {found} matches (expected {want})", target
    missing = _no_trace(trace, True)
    if isinstance(check, ToolUsed):
        if missing:
            return None, missing, check.tool
        assert trace is not None
        n = len(_calls(trace, check))
        lo, hi = 1 if check.min is None else check.min, check.max
        ok = n >= lo and (hi is None or n <= hi)
        return ok, "" if ok else f"called {n}x (expected {lo}..{'∞' if hi is None else hi})", check.tool
    target = f"{check.before.tool} before {check.after.tool}"
    if missing:
        return None, missing, target
    assert trace is not None
    first, second = _calls(trace, check.before), _calls(trace, check.after)
    if not first or not second:
        never = check.before.tool if not first else check.after.tool
        return False, f"{never} never called", target
    ok = first[0] < second[0]
    return (
        ok,
        "" if ok else f"{check.before.tool}@{first[0]} does not precede {check.after.tool}@{second[0]}",
        target,
    )


def _evaluate(
    index: int,
    check: Check,
    read: Reader,
    unchanged: UnchangedTest,
    changed: list[str] | None,
    diff_error: str | None,
    trace: SessionTrace | None = None,
) -> CheckResult:
    if isinstance(check, RegexCheck | ToolUsed | ToolOrder | FileExists):
        passed, detail, target = _evaluate_session(check, read, changed, diff_error, trace)
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


def _summarise(
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


# ----------------------------------------------------------------------------------------------------------
# Re-grading from a saved diff


def grade_from_diff(
    task: Task,
    patch_text: str,
    *,
    attempt: int = 1,
    patch_rel: str | None = None,
    trace: SessionTrace | None = None,
) -> ChecksGrade | None:
    """Re-run the task's checks from a saved diff: start = the seed files, end = start + diff.

    A file that is neither seeded nor created by the diff has an unknown start: checks reading it are not
    evaluable (``passed`` None) unless the diff leaves it untouched and the check only asks whether it changed.
    """
    if not task.spec.checks:
        return None
    patches = {p.path: p for p in parse_patch(patch_text)}
    changed = sorted(patches)
    seeds = task.spec.files

    def read(rel: str) -> tuple[bytes | None, str]:
        p = patches.get(rel)
        if p is None:
            if rel in seeds:
                return seeds[rel].encode("utf-8"), ""
            return None, "not seeded and unchanged: its content is not in the run folder"
        if p.old_path is not None and rel not in seeds:
            return None, "not seeded: its start is not in the run folder"
        try:
            after = apply_file_patch(seeds.get(rel), p)
        except ValueError as exc:
            return None, f"the saved diff does not apply: {exc}"
        return (None, "absent") if after is None else (after.encode("utf-8"), "")

    def unchanged(rel: str) -> tuple[bool | None, str]:
        return (rel not in patches), ("" if rel not in patches else "changed during the session")

    results = [_evaluate(i, c, read, unchanged, changed, None, trace) for i, c in enumerate(task.spec.checks)]
    return _summarise(attempt, "diff", results, changed, patch_rel, None)


__all__ = [
    "Baseline",
    "CheckResult",
    "ChecksGrade",
    "SessionTrace",
    "ToolCall",
    "UnsafePath",
    "apply_seed_files",
    "glob_regex",
    "grade_checkout",
    "grade_from_diff",
    "read_checkout_file",
    "seed_target",
]

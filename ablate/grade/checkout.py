"""The checkout of a graded task: seed it (:func:`apply_seed_files`), grade what the session left
(:func:`grade_checkout`) or a saved diff (:func:`grade_from_diff`). Nothing the model wrote is executed; the
diff is taken by git with a scratch git dir, index and objects of ablate's own (README.md, "Graded outcomes")."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ablate.checks.base import EndState, Reader, SessionTrace
from ablate.core.errors import UsageError
from ablate.core.fsutil import atomic_write_bytes, sha256_bytes
from ablate.core.tempwork import make_work_dir, remove_tree
from ablate.grade.evaluate import ChecksGrade, evaluate_check, summarise
from ablate.grade.patch import FilePatch, apply_file_patch, parse_patch
from ablate.isolate.viewpath import as_seen_inside, real_path, view_command
from ablate.setup.tasks import Task

#: Files larger than this are not read by a check (the check cannot pass or fail: ``passed`` is None).
MAX_CHECK_BYTES = 8 << 20


class UnsafePath(UsageError):
    """A task path would leave the checkout (through a symlink) or name something that is not a plain file."""


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
            remove_tree(self.scratch)
            self.scratch = None


# ----------------------------------------------------------------------------------------------------------
# Paths inside the checkout


def _walk(checkout: Path, rel: str) -> Iterator[tuple[Path, bool]]:
    """Each prefix of ``rel`` under ``checkout``, with whether it is the last component."""
    parts = rel.rstrip("/").split("/")
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
    """The bytes of ``rel`` in the checkout, or (None, why); links inside it are followed, nothing outside it is
    read (an ordinary user's view, reached through ``/proc/<pid>/root``, is resolved inside that view)."""
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
    return sorted({rel for c in task.spec.checks for rel in c.files()})


# ----------------------------------------------------------------------------------------------------------
# Scratch git: ablate's own git dir, index and objects; the checkout's .git is only read (objects)


def _plain_env(scratch: Path) -> dict[str, str]:
    """Git's environment without a repository: no user or system config, ``scratch`` as its home."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    return {
        "PATH": path,
        "HOME": str(scratch),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }


#: Every git call: no hooks, no fsmonitor, no untracked cache, paths, line ends and links as they are.
_GIT_SETTINGS = ["core.hooksPath=/dev/null", "core.fsmonitor=false", "core.untrackedCache=false"]
_GIT_SETTINGS += ["core.quotePath=false", "core.autocrlf=false", "core.safecrlf=false", "core.symlinks=true"]
_GIT_SAFE = tuple(arg for setting in _GIT_SETTINGS for arg in ("-c", setting))


def _git(
    scratch: Path, checkout: Path, index: Path, *args: str, stdout: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = _plain_env(scratch) | {  # the work tree as git sees it (an ordinary user's view: from inside it)
        "GIT_DIR": str(scratch / "git"),
        "GIT_WORK_TREE": as_seen_inside(checkout),
        "GIT_INDEX_FILE": str(index),
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
    }
    # git resolves its work tree: through /proc/<pid>/root that is the host's empty mount point, so in an
    # ordinary user's view git runs inside the holder's namespaces (ablate.isolate.viewpath)
    argv, cwd = view_command(checkout, ["git", *_GIT_SAFE, *args])
    if stdout is not None:
        stdout.parent.mkdir(parents=True, exist_ok=True)
    with stdout.open("wb") if stdout is not None else contextlib.nullcontext(subprocess.PIPE) as out:
        proc = subprocess.run(
            argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=300
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
    scratch = make_work_dir("ablate-grade-")
    try:
        index = scratch / "base.index"
        init = ["git", "init", "-q", "--bare", str(scratch / "git")]
        subprocess.run(
            init, env=_plain_env(scratch), capture_output=True, stdin=subprocess.DEVNULL, check=True
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
        remove_tree(scratch)
        raise


# ----------------------------------------------------------------------------------------------------------
# Before and after the session


def apply_seed_files(task: Task, checkout: Path) -> Baseline:
    """Write the task's seed files into ``checkout`` right before the session and snapshot the seeded start when
    the task has checks; a path through a symlink raises :class:`UnsafePath` before anything is written."""
    targets = [(rel, seed_target(checkout, rel)) for rel in task.spec.files]
    for rel, target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(target.stat().st_mode) if target.is_file() else 0o644  # keep a repo file's mode
        atomic_write_bytes(target, task.spec.files[rel].encode("utf-8"), mode=mode)
    baseline = Baseline(checkout=checkout, seeded=[rel for rel, _ in targets], hashes={})
    if not task.spec.checks:
        return baseline
    baseline.hashes = {rel: _hash(checkout, rel) for rel in _check_files(task)}
    baseline.extra_paths = sorted(set(baseline.seeded) | set(_check_files(task)))
    try:
        baseline.scratch, baseline.tree = _snapshot(checkout, baseline.extra_paths)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        baseline.error = f"no snapshot of the seeded checkout: {exc}"
    return baseline


def _session_diff(
    baseline: Baseline, checkout: Path, patch_path: Path | None
) -> tuple[list[str] | None, str | None]:
    """(changed paths, error) between the seeded start and ``checkout`` as the grader reaches it now (an
    ordinary user's view is held by another process each time); writes the patch."""
    if baseline.scratch is None or baseline.tree is None:
        return None, baseline.error or "no snapshot of the seeded checkout"
    scratch = baseline.scratch
    index = scratch / "after.index"
    try:
        shutil.copyfile(scratch / "base.index", index)
        after = _stage(scratch, checkout, index, baseline.extra_paths)
        git = functools.partial(_git, scratch, checkout, index)
        names = git("diff-tree", "-r", "-z", "--no-renames", "--name-only", baseline.tree, after).stdout
        if patch_path is not None:
            flags = ("-p", "-r", "--no-renames", "--no-ext-diff", "--no-textconv", "--full-index")
            git("diff-tree", *flags, baseline.tree, after, stdout=patch_path)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return None, f"no diff: {exc}"
    return sorted(p for p in names.decode("utf-8", "surrogateescape").split("\0") if p), None


def _hash(checkout: Path, rel: str) -> str | None:
    data, _ = read_checkout_file(checkout, rel)
    return sha256_bytes(data) if data is not None else None


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
    """Evaluate the task's checks on the checkout the session left, before the environment is reset (None
    without checks); ``patch_path`` receives the diff, ``patch_rel`` names it in the grade."""
    try:
        if not task.spec.checks:
            return None
        changed, diff_error = _session_diff(baseline, checkout, patch_path)
        if changed is not None:
            # files a check names but git does not see (ignored): their hash says whether they changed
            extra = {rel for rel, before in baseline.hashes.items() if _hash(checkout, rel) != before}
            changed = sorted(set(changed) | extra)

        def unchanged(rel: str) -> tuple[bool | None, str]:
            data, why = read_checkout_file(checkout, rel)
            before = baseline.hashes.get(rel)
            if (sha256_bytes(data) if data is not None else None) == before:
                return True, ""
            if data is None and before is not None:
                return False, f"was a file at the start, now {why}"
            return False, "changed during the session"

        end = EndState(functools.partial(read_checkout_file, checkout), unchanged, changed, diff_error, trace)
        results = [evaluate_check(i, c, end) for i, c in enumerate(task.spec.checks)]
        return summarise(
            attempt, "checkout", results, changed, patch_rel if changed is not None else None, diff_error
        )
    finally:
        baseline.discard()


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
    """Re-run the task's checks from a saved diff: start = the seed files, end = start + diff; a file neither
    seeded nor created by the diff has an unknown start (checks reading it are not evaluable)."""
    if not task.spec.checks:
        return None
    seeds = task.spec.files

    def start(rel: str) -> tuple[bytes | None, str]:
        if rel in seeds:
            return seeds[rel].encode("utf-8"), ""
        return None, "not seeded and unchanged: its content is not in the run folder"

    def known(rel: str) -> tuple[bytes | None, str]:
        return start(rel) if rel in seeds else (None, "not seeded: its start is not in the run folder")

    after = {p.path: (new, why) for p, new, why in patched(patch_text, known, "the saved diff")}
    end = overlay_state(start, after, trace)
    results = [evaluate_check(i, c, end) for i, c in enumerate(task.spec.checks)]
    return summarise(attempt, "diff", results, sorted(after), patch_rel, None)


def patched(patch_text: str, start: Reader, what: str) -> Iterator[tuple[FilePatch, bytes | None, str]]:
    """Each file of the patch with its content after it: (bytes, ""), (None, "absent") when deleted, or (None,
    why) when its start cannot be read or the section does not apply."""
    for p in parse_patch(patch_text):
        before: bytes | None = None
        if p.old_path is not None:
            before, why = start(p.path)
            if before is None:
                yield p, None, why
                continue
        try:
            new = apply_file_patch(before.decode("utf-8", "replace") if before is not None else None, p)
        except ValueError as exc:
            yield p, None, f"{what} does not apply to {p.path}: {exc}"
            continue
        yield p, None if new is None else new.encode("utf-8"), "" if new is not None else "absent"


def overlay_state(
    start: Reader, after: Mapping[str, tuple[bytes | None, str]], trace: SessionTrace | None
) -> EndState:
    """The end state of ``start`` with the files of ``after`` replaced (each: its bytes, or None and why)."""

    def read(rel: str) -> tuple[bytes | None, str]:
        return after[rel] if rel in after else start(rel)

    def unchanged(rel: str) -> tuple[bool | None, str]:
        return (rel not in after), ("" if rel not in after else "changed during the session")

    return EndState(read, unchanged, sorted(after), None, trace)

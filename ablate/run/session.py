"""One `claude -p` session of an item: the pinned command line, the transcript copied out of the cell, the
result built from the mined session, and the statuses that pause or retry."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from ablate.core.claude import claude_argv
from ablate.core.proc import ExecResult, kill_tree
from ablate.folder.layout import Attempt, PlanItem, RunFolder
from ablate.folder.result import ExitInfo, ItemResult
from ablate.folder.session import SessionWrites
from ablate.folder.wire import WIRE_TOKENS, WireRecord, WireTotals, wire_check, wire_flags
from ablate.isolate.shadowfs import is_inside
from ablate.mine.cli_output import parse_cli_output
from ablate.mine.model import SessionResult

#: HTTP statuses that are the request's own fault: retrying cannot help.
PERMANENT_API_STATUSES = frozenset({400, 401, 403, 404, 413})
#: HTTP statuses that mean "slow down": they pause the pool like a 429.
PAUSE_API_STATUSES = frozenset({429, 529})
#: Runner outcomes of an attempt that never reached the CLI; their result's status is ``error``.
ERROR_OUTCOMES = frozenset({"env_error", "launch_error"})


def pinned_argv(claude: Path, model: str, extra_args: Sequence[str] = ()) -> list[str]:
    """The pinned command line (docs/ARCHITECTURE.md#run-folder) with ``{max_turns}``, ``{session_id}`` and ``{prompt}`` slots."""
    slots = {"prompt": "{prompt}", "session_id": "{session_id}", "max_turns": "{max_turns}"}
    return claude_argv(claude, model=model, extra=extra_args, **slots)


#: Namespace of the session ids ablate gives the CLI (uuid5 of the run's seed, the item and the attempt).
_SESSION_NS = uuid.UUID("5d1c63a4-8e0b-4b8e-9a52-2f1a8c7e0b61")


def session_uuid(seed: int, item: str, attempt: int) -> str:
    """The ``--session-id`` of an attempt, fixed by seed, item and attempt number: a model that draws per
    session (the simulated endpoint's ``seed_from = "session"``) gives the same numbers run after run."""
    return str(uuid.uuid5(_SESSION_NS, f"{seed}:{item}:{attempt}"))


def render_argv(
    template: Sequence[str],
    *,
    max_turns: int,
    session_id: str,
    prompt: str,
    task_args: Sequence[str] = (),
    model: str | None = None,
) -> list[str]:
    """The manifest's pinned line for one session, its slots filled and the task's own options
    (:func:`ablate.core.claude.task_args`) inserted before the ``--`` that ends the options."""
    values = {"{max_turns}": str(max_turns), "{session_id}": session_id, "{prompt}": prompt}
    values |= {"{model}": model} if model else {}
    argv = [values.get(a, a) for a in template]
    if task_args:
        end = len(template) - 1 - list(reversed(template)).index("--")
        argv[end:end] = task_args
    return argv


def kill_strays(root: Path) -> int:
    """Kill every process (tree) whose cwd is inside ``root``: sessions orphaned by a crashed runner."""
    try:
        top = os.stat(root)
    except FileNotFoundError:
        return 0
    root_s, me, killed = str(root.resolve()), os.getpid(), 0
    for pid in psutil.pids():
        if pid != me and _cwd_within(pid, root_s, (top.st_dev, top.st_ino)):
            kill_tree(pid, grace_s=2.0)
            killed += 1
    return killed


def _cwd_within(pid: int, root: str, root_id: tuple[int, int]) -> bool:
    """Whether the process's cwd is ``root`` or below it. A cwd longer than a path can be (a session that went
    deep, or any process on the machine) has no readable path: its folders are climbed instead."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError as exc:  # gone, not ours to read, or too long
        return exc.errno == errno.ENAMETOOLONG and _climbs_to(f"/proc/{pid}/cwd", root_id)
    return is_inside(cwd, root)


def _climbs_to(start: str, folder: tuple[int, int]) -> bool:
    """``start`` (a folder) is ``folder`` (device, inode) or below it, found by opening ``..`` up to ``/``."""
    try:
        fd = os.open(start, os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        here = os.fstat(fd)
        while (here.st_dev, here.st_ino) != folder:
            parent = os.open("..", os.O_PATH | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, below = parent, here
            here = os.fstat(fd)
            if os.path.samestat(here, below):  # / is its own parent
                return False
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def copy_transcript(config_dir: Path, session_id: str, dest: Path) -> Path | None:
    """Copy ``projects/*/<session_id>.jsonl`` and its sub-agents folder to ``dest``, found by session id, never
    by the project slug (docs/CLAUDE-CODE.md#slug); a transcript that is a link or not a regular file is None."""
    found = sorted(config_dir.glob(f"projects/*/{session_id}.jsonl"))
    if not found:
        return None
    src = found[0]
    try:  # never through a link the session left in its place (it would copy any file it names)
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        dest.mkdir(parents=True, exist_ok=True)
        out = dest / src.name
        try:
            with out.open("wb") as to:
                shutil.copyfileobj(fh, to, 1 << 20)
        except OSError as exc:  # a full disk names the file it could not write
            raise OSError(exc.errno, exc.strerror, exc.filename or str(out)) from exc
    side = src.with_suffix("")
    if side.is_dir():
        shutil.copytree(side, dest / side.name, symlinks=True, dirs_exist_ok=True)
    return out


def build_result(
    folder: RunFolder,
    it: PlanItem,
    attempt: Attempt,
    session: SessionResult | None,
    ex: ExecResult | None,
    status: str,
    transcript: Path | None,
    error: str | None = None,
    *,
    flags: Sequence[str] = (),
    writes: Mapping[str, Any] | None = None,
    wire: WireTotals | None = None,
) -> ItemResult:
    """The item's :class:`ItemResult` for one finished attempt; ``env_error``, ``launch_error`` and
    ``limit:<what>`` are recorded as ``error``, any other unknown ``status`` fails validation."""
    rel = folder.root
    metrics = None
    if session is not None:
        metrics = session.to_metrics()
        if transcript is not None:
            metrics = metrics.model_copy(update={"transcript": str(transcript.relative_to(rel))})
        if wire is not None and wire.differs:  # the wire's totals where the transcript disagrees
            total = metrics.total.model_copy(update={k: getattr(wire, k) for k in WIRE_TOKENS})
            metrics = metrics.model_copy(update={"total": total, "cost_usd": wire.cost_usd})
    return ItemResult.model_validate(
        {
            **it.model_dump(include={"item", "task", "cell", "repeat", "order"}),
            "attempt": attempt.n,
            "session_id": attempt.session_id,
            "status": "error" if status in ERROR_OUTCOMES or status.startswith("limit:") else status,
            "started_at": attempt.started_at,
            "finished_at": attempt.finished_at,
            "env": attempt.slot,
            "cost_usd": metrics.cost_usd if metrics else None,
            "turns": metrics.turns if metrics else None,
            "pitfall_hits": metrics.pitfall_hits if metrics else {},
            "exit": ExitInfo(
                returncode=ex.returncode if ex else None,
                duration_s=round(ex.duration_s, 3) if ex else None,
                timed_out=ex.timed_out if ex else False,
            ),
            "stdout": str(folder.stdout_path(it.item, attempt.n).relative_to(rel)),
            "transcript": str(transcript.relative_to(rel)) if transcript else None,
            "error": _first_line(error) if error else None,
            "session": metrics,
            "flags": [*flags, *wire_flags(wire)],
            "writes": SessionWrites.model_validate(dict(writes)) if writes is not None else None,
            "wire": wire,
        }
    )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def compare_wire(records: Sequence[WireRecord], mined: SessionResult, stdout: Path) -> WireTotals | None:
    """What the forwarder recorded for a session against its transcript and stdout (None: not sealed); a
    stdout with more than the CLI's one result document was written to by someone else (``/proc/<pid>/fd/1``)."""
    if not records:
        return None
    out = parse_cli_output(stdout)
    answer = out.data.get("result") if out.kind == "valid" and out.data is not None else None
    totals = wire_check(
        records, mined.to_json().get("total") or {}, answer if isinstance(answer, str) else None
    )
    if len(out.documents) > 1:
        totals.differs.append(f"stdout: {len(out.documents)} result documents, the CLI writes one")
    return totals

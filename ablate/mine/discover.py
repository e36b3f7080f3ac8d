"""Finding sessions under files, ``projects/`` trees and run folders, and mining many in parallel."""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ablate.core.workers import in_workers
from ablate.folder.names import PLAN, STDOUT, TRANSCRIPTS
from ablate.mine.derive import mine_session
from ablate.mine.model import SessionResult

if TYPE_CHECKING:  # the task model pulls in pydantic: the miner never needs it at run time
    from ablate.setup.tasks import PitfallPattern

T = TypeVar("T")
_UUID_NAME = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _is_session_file(path: str, name: str) -> bool:
    """A ``*.jsonl`` outside ``subagents/``, not a sub-agent's or a plan, named by a session id or holding one
    (``.jsonl`` alone has no suffix, as pathlib sees it)."""
    if len(name) <= len(".jsonl") or name.startswith("agent-") or name == PLAN:
        return False
    if _UUID_NAME.fullmatch(name, 0, len(name) - len(".jsonl")):
        return True  # Claude Code names every session file by its session id
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 12)
    except OSError:
        return False
    return not head.strip() or b'"sessionId"' in head


def _jsonl_under(root: str) -> Iterator[tuple[str, str]]:
    """Every ``*.jsonl`` (path, name) under ``root`` outside ``subagents/``, in ``sorted(Path)`` order as it is
    found: each folder's entries by name, links to folders not entered, unreadable folders passed over (as
    ``os.walk``). Strings: pathlib's parsing cost more than the mining of small sessions."""
    stack = [_entries(root)]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
        elif not _is_dir(entry):
            if entry.name.endswith(".jsonl"):
                yield entry.path, entry.name
        elif entry.name != "subagents" and not entry.is_symlink():
            stack.append(_entries(entry.path))


def _entries(folder: str) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return iter(sorted(it, key=lambda e: e.name))
    except OSError:
        return iter(())


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def iter_sessions(paths: Iterable[Path]) -> Iterator[Path]:
    """Session transcripts in ``paths``: files as given, folders (a ``projects/`` tree, a run folder)
    searched recursively in sorted order. Sub-agent files and non-transcript JSONL are skipped.
    A path that does not exist is skipped; the caller checks existence first if it matters."""
    for path in paths:
        if path.is_file():
            if path.suffix == ".jsonl" and not path.name.startswith("agent-"):
                yield path
            continue
        if not path.is_dir():
            continue
        root = path / TRANSCRIPTS if (path / PLAN).is_file() else path
        if "subagents" in root.parts:
            continue  # its files are folded into their session
        for candidate, name in _jsonl_under(str(root)):
            if _is_session_file(candidate, name):
                yield Path(candidate)


def stdout_for_transcript(transcript: Path) -> Path | None:
    """For a transcript inside a run folder (``transcripts/<item>.a<N>/<sid>.jsonl``), its stdout file."""
    attempt_dir = transcript.parent
    if attempt_dir.parent.name != TRANSCRIPTS:
        return None
    root = attempt_dir.parent.parent
    if not (root / PLAN).is_file():
        return None
    return root / STDOUT / f"{attempt_dir.name}.json"


def _mine_one(job: tuple[Path, tuple[PitfallPattern, ...], Callable[[SessionResult], T]]) -> T | OSError:
    transcript, pitfalls, view = job
    try:
        return view(mine_session(transcript, stdout=stdout_for_transcript(transcript), pitfalls=pitfalls))
    except OSError as exc:
        return exc


def mine_each(
    transcripts: Iterable[Path],
    view: Callable[[SessionResult], T],
    *,
    pitfalls: Sequence[PitfallPattern] = (),
    jobs: int = 1,
) -> Iterator[tuple[Path, T | OSError]]:
    """``view`` of each transcript's mined session, in order, with ``jobs`` worker processes (each streams
    its own files, so memory stays bounded, and applies ``view``, a module-level function, so that only
    its value crosses back); an unreadable file yields its error."""
    pits = tuple(pitfalls)
    taken: deque[Path] = deque()  # handed to the pool, results still to come

    def take() -> Iterator[tuple[Path, tuple[PitfallPattern, ...], Callable[[SessionResult], T]]]:
        for t in transcripts:
            taken.append(t)
            yield t, pits, view

    for result in in_workers(_mine_one, take(), jobs):
        yield taken.popleft(), result

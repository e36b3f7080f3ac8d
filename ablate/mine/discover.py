"""Finding sessions under files, ``projects/`` trees and run folders, and mining many in parallel."""

from __future__ import annotations

import os
import re
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
    """``path`` (a ``*.jsonl`` outside ``subagents/``, named ``name``) is a session transcript."""
    if name.startswith("agent-") or name == PLAN:
        return False
    if _UUID_NAME.fullmatch(name, 0, len(name) - 6):
        return True  # Claude Code names every session file by its session id
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 12)
    except OSError:
        return False
    return not head.strip() or b'"sessionId"' in head


def _sessions_under(folder: str) -> Iterator[str]:
    """The session files under ``folder`` outside ``subagents/`` folders, as they are found, in the order of
    ``sorted(Path)`` (part by part: each folder's entries by name, a subfolder's files where its name falls).
    Like ``os.walk``, a link to a folder is not entered and an unreadable folder is passed over."""
    try:
        with os.scandir(folder) as it:
            entries = sorted((e.name, e) for e in it)
    except OSError:
        return
    for name, entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if not is_dir:
            if name.endswith(".jsonl") and len(name) > 6 and _is_session_file(entry.path, name):
                yield entry.path
        elif name != "subagents" and not entry.is_symlink():
            yield from _sessions_under(entry.path)


def iter_sessions(paths: Iterable[Path]) -> Iterator[Path]:
    """Session transcripts in ``paths``, as they are found: files as given, folders (a ``projects/`` tree, a
    run folder) searched recursively in sorted order. Sub-agent files and non-transcript JSONL are skipped.
    A path that does not exist is skipped; the caller checks existence first if it matters."""
    for path in paths:
        if path.is_file():
            if path.suffix == ".jsonl" and not path.name.startswith("agent-"):
                yield path
            continue
        if not path.is_dir():
            continue
        root = path / TRANSCRIPTS if (path / PLAN).is_file() else path
        if "subagents" not in root.parts:
            yield from map(Path, _sessions_under(str(root)))


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
    found: list[Path] = []  # complete before the first result of a pool; in step without one

    def items() -> Iterator[tuple[Path, tuple[PitfallPattern, ...], Callable[[SessionResult], T]]]:
        for t in transcripts:
            found.append(t)
            yield t, pits, view

    for i, result in enumerate(in_workers(_mine_one, items(), jobs)):
        yield found[i], result

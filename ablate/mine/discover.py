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


def _is_session_file(path: Path) -> bool:
    if path.suffix != ".jsonl" or path.name.startswith("agent-") or "subagents" in path.parts:
        return False
    if path.name == PLAN:
        return False
    if _UUID_NAME.fullmatch(path.stem):
        return True  # Claude Code names every session file by its session id
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 12)
    except OSError:
        return False
    return not head.strip() or b'"sessionId"' in head


def _jsonl_under(root: Path) -> list[Path]:
    """Every ``*.jsonl`` under ``root`` outside ``subagents/`` folders, in ``sorted(Path)`` order (one
    ``os.walk``; pathlib's rglob and Path comparisons cost more than the mining of small sessions)."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "subagents"]
        found.extend(f"{dirpath}/{f}" for f in filenames if f.endswith(".jsonl"))
    found.sort(key=lambda s: s.split("/"))  # the order of sorted(Path) on POSIX: part by part
    return [Path(f) for f in found]


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
        for candidate in _jsonl_under(root):
            if _is_session_file(candidate):
                yield candidate


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
    items = [(t, pits, view) for t in transcripts]
    for job, result in zip(items, in_workers(_mine_one, items, jobs), strict=True):
        yield job[0], result

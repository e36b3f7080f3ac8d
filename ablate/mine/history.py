"""The user's own session history: finding it under a config dir and reading what each session shows.

Read-only (nothing created, touched or locked: the config dir's tree hash is unchanged). Each session is
streamed by :mod:`ablate.mine.parse`, sub-agents folded in, into a :class:`SessionFacts`; worker processes
read sessions in order."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ablate.mine.derive import subagent_files
from ablate.mine.parse import USAGE_SKIP_RE, _Session, _stream, _Thread

FileKind = Literal["session", "empty", "junk", "unreadable"]


@dataclass(frozen=True)
class HistoryFile:
    """One top-level ``.jsonl`` of a project folder, with its sub-agent transcripts."""

    path: Path
    project: str
    subagents: tuple[Path, ...] = ()


@dataclass
class SessionFacts:
    """What one history file shows: enough to attribute loads and uses to layers, nothing more."""

    path: Path
    project: str
    kind: FileKind
    session_id: str | None = None
    cwd: str | None = None
    version: str | None = None
    #: ISO time of the first prompt (else of the first conversation record, else the file's mtime)
    started: str | None = None
    first_prompt: str = ""
    instruction_files: list[str] = field(default_factory=list)
    skills_listed: list[str] = field(default_factory=list)
    agents_listed: list[str] = field(default_factory=list)
    hooks_fired: dict[str, int] = field(default_factory=dict)
    #: (skill, outcome) per Skill call, main thread and sub-agents
    skills_invoked: list[tuple[str, str]] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    #: (tool, input) of every call that may name a layer's file or agent, main thread and sub-agents
    tool_inputs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: calls of MCP tools (``mcp__<server>__<tool>``) by tool name
    mcp_calls: dict[str, int] = field(default_factory=dict)
    malformed_lines: int = 0
    truncated_lines: int = 0
    error: str | None = None


def history_files(config_dir: Path, projects: Iterable[str] | None = None) -> Iterator[HistoryFile]:
    """Every top-level ``projects/<project>/*.jsonl`` (sorted), or only those of ``projects``.

    Any ``.jsonl`` counts, whatever its name: a junk file is reported as junk, never skipped unseen."""
    root = config_dir / "projects"
    try:
        names = sorted(e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False))
    except OSError:
        return
    wanted = None if projects is None else set(projects)
    for project in names:
        if wanted is not None and project not in wanted:
            continue
        folder = root / project
        try:
            entries = sorted(
                e.name
                for e in os.scandir(folder)
                if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False)
            )
        except OSError:
            continue
        for name in entries:
            yield HistoryFile(folder / name, project, tuple(subagent_files(folder / name)))


def _mtime_iso(path: Path) -> str | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat().replace("+00:00", "Z")
    except OSError:
        return None


def scan(hf: HistoryFile) -> SessionFacts:
    """Read one history file (and its sub-agents); never raises for content, an I/O error is recorded."""
    facts = SessionFacts(hf.path, hf.project, "session")
    try:
        if hf.path.stat().st_size == 0:
            facts.kind = "empty"
            return facts
        main, side, sess = _Thread((), None), _Thread((), None), _Session()
        _stream(hf.path, main, side, sess, is_main_file=True, skip=USAGE_SKIP_RE)
        for sub in hf.subagents:
            _stream(sub, main, side, sess, is_main_file=False, skip=USAGE_SKIP_RE)
    except OSError as exc:
        facts.kind, facts.error = "unreadable", f"{type(exc).__name__}: {exc}"
        return facts
    facts.malformed_lines, facts.truncated_lines = sess.malformed, sess.truncated
    if main.m.records + side.m.records == 0:
        facts.kind = "junk"  # not one record a Claude Code transcript holds
        return facts
    facts.session_id = sess.session_id or hf.path.stem
    facts.cwd, facts.version = sess.cwd, sess.version
    facts.started = sess.first_prompt_ts or main.first_ts or _mtime_iso(hf.path)
    facts.first_prompt = sess.first_prompt or ""
    facts.instruction_files = list(sess.instruction_files)
    facts.skills_listed = list(sess.skills_listed)
    facts.agents_listed = list(sess.agents_listed)
    facts.hooks_fired = dict(sess.hooks_fired)
    facts.skills_invoked = [(c.skill, c.outcome) for t in (main, side) for c in t.m.skills_invoked]
    facts.commands = list(sess.commands)
    facts.tool_inputs = main.tool_inputs + side.tool_inputs
    for t in (main, side):
        for tool, n in t.m.tool_histogram.items():
            if tool.startswith("mcp__"):
                facts.mcp_calls[tool] = facts.mcp_calls.get(tool, 0) + n
    return facts

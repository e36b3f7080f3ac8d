"""Mining a Claude Code session transcript (DESIGN §5): the session JSONL is the ground truth.

One session = the main-thread file ``<session_id>.jsonl`` plus its sub-agents'
``<session_id>/subagents/agent-*.jsonl``. :func:`mine_session` streams them line by line and returns a
:class:`SessionResult` with metrics for the main thread, the sub-agents and both together.

Speed: most bytes of a modern transcript are request snapshots (``api-request-shape``, ``api-request-blob``,
``attachment:prompt_snapshot``) that carry nothing we count. Those lines are recognised from their first
bytes and never parsed; a line is skipped only when its prefix proves its type (the ``type`` key is the
first key, or the top-level ``attachment`` object, reached through scalar keys only, is a prompt snapshot).
Any other line, whatever its key order, is parsed with orjson.

Robustness: malformed lines, a torn last line (a file being appended while read), non-object records and
unknown record types are counted in the result, never fatal. Older transcripts (no attachments, no
``cost-state``, sub-agent records inline with ``isSidechain: true``) still mine.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from ablate.mine.cli_output import CliOutput, is_rate_limit_message, parse_cli_output, parse_reset_time
from ablate.mine.pricing import estimate_cost

__all__ = [
    "CliOutput",
    "PitfallPattern",
    "SessionResult",
    "SkillCall",
    "Status",
    "ThreadMetrics",
    "iter_sessions",
    "mine_paths",
    "mine_session",
    "parse_cli_output",
    "stdout_for_transcript",
]

SCHEMA_VERSION = 1

Status = Literal[
    "completed", "api_error", "max_turns", "prompt_too_long", "killed", "rate_limited", "no_transcript"
]
SkillOutcome = Literal["ok", "unknown", "denied", "error", "no_result"]

#: Record types Claude Code writes (2.1.x and older); anything else is counted as unknown.
KNOWN_RECORD_TYPES = frozenset(
    {
        "user",
        "assistant",
        "attachment",
        "system",
        "queue-operation",
        "atis-latch",
        "last-prompt",
        "api-request-shape",
        "api-request-blob",
        "api-request",
        "tools-used",
        "cost-state",
        "summary",
        "file-history-snapshot",
        "progress",
        "custom-title",
    }
)

# Lines whose type is proven by their first bytes and that carry nothing we mine.
_SKIP_PREFIXES: tuple[bytes, ...] = (
    b'{"type":"api-request-blob",',
    b'{"type":"api-request-shape",',
    b'{"type":"atis-latch",',
    b'{"type":"last-prompt",',
    b'{"type":"queue-operation",',
    b'{"type":"tools-used",',
)
_API_REQUEST_PREFIX = b'{"type":"api-request",'
# Attachment types that carry nothing we mine (prompt snapshots are the bulk of a transcript's bytes).
_IGNORED_ATTACHMENTS = (
    b"prompt_snapshot",
    b"environment",
    b"model",
    b"deferred_tools_delta",
    b"agent_listing_delta",
    b"total_tokens_reminder",
    b"session_context",
    b"date",
    b"remote_session_change",
    b"command_permissions",
)
# The top-level ``attachment`` object, reached through scalar-valued keys only, has one of those types.
# A quote inside a JSON string is escaped, so this byte pattern can only be structure, at depth 1.
_IGNORED_ATTACHMENT_RE = re.compile(
    rb'\{(?:"[A-Za-z_]+":(?:null|true|false|-?\d+|"[^"\\]*"),)*"attachment":\{"type":"(?:'
    + b"|".join(_IGNORED_ATTACHMENTS)
    + rb')"'
)
_SNAPSHOT_HEAD = 512


@dataclass(frozen=True)
class PitfallPattern:
    """A task's pitfall: a case-insensitive regex matched against the model's own words."""

    id: str
    pattern: str
    scope: Literal["text", "text+tools"] = "text"


@dataclass(frozen=True)
class SkillCall:
    """One ``Skill`` tool call and what came of it."""

    skill: str
    outcome: SkillOutcome

    def to_json(self) -> dict[str, str]:
        return {"skill": self.skill, "outcome": self.outcome}


@dataclass
class Usage:
    """Token counts of one or more API calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_1h_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_creation_tokens += other.cache_creation_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_1h_tokens += other.cache_write_1h_tokens

    def merge_max(self, other: Usage) -> None:
        """Keep the larger value per field (a message's records repeat, or grow, the same usage)."""
        self.input_tokens = max(self.input_tokens, other.input_tokens)
        self.output_tokens = max(self.output_tokens, other.output_tokens)
        self.cache_creation_tokens = max(self.cache_creation_tokens, other.cache_creation_tokens)
        self.cache_read_tokens = max(self.cache_read_tokens, other.cache_read_tokens)
        self.cache_write_1h_tokens = max(self.cache_write_1h_tokens, other.cache_write_1h_tokens)


@dataclass
class ThreadMetrics:
    """Metrics of one thread group: the main thread, the sub-agents, or both (``total``)."""

    api_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    tool_calls: int = 0
    tool_histogram: dict[str, int] = field(default_factory=dict)
    #: Files read with the Read tool -> number of reads, first read first; relative to the cwd when inside it.
    file_reads: dict[str, int] = field(default_factory=dict)
    skills_invoked: list[SkillCall] = field(default_factory=list)
    tool_results: int = 0
    tool_errors: int = 0
    #: Calls that finally failed (synthetic ``isApiErrorMessage`` records).
    failed_calls: int = 0
    #: ``system/api_error`` records: one per retried HTTP attempt, recovered or not.
    retry_records: int = 0
    retry_statuses: dict[str, int] = field(default_factory=dict)
    #: ``api-request`` records: one per HTTP attempt, retries included (absent in older transcripts).
    http_attempts: int = 0
    pitfall_hits: dict[str, int] = field(default_factory=dict)
    #: Per-model usage, for cost estimates.
    model_usage: dict[str, Usage] = field(default_factory=dict)
    duration_s: float | None = None
    records: int = 0

    @property
    def files_read(self) -> list[str]:
        return list(self.file_reads)

    def merged(self, other: ThreadMetrics) -> ThreadMetrics:
        out = ThreadMetrics()
        for part in (self, other):
            out.api_calls += part.api_calls
            out.input_tokens += part.input_tokens
            out.output_tokens += part.output_tokens
            out.cache_creation_tokens += part.cache_creation_tokens
            out.cache_read_tokens += part.cache_read_tokens
            out.tool_calls += part.tool_calls
            _add_counts(out.tool_histogram, part.tool_histogram)
            _add_counts(out.file_reads, part.file_reads)
            out.skills_invoked.extend(part.skills_invoked)
            out.tool_results += part.tool_results
            out.tool_errors += part.tool_errors
            out.failed_calls += part.failed_calls
            out.retry_records += part.retry_records
            _add_counts(out.retry_statuses, part.retry_statuses)
            out.http_attempts += part.http_attempts
            _add_counts(out.pitfall_hits, part.pitfall_hits)
            for model, usage in part.model_usage.items():
                out.model_usage.setdefault(model, Usage()).add(usage)
            out.records += part.records
        durations = [d for d in (self.duration_s, other.duration_s) if d is not None]
        out.duration_s = max(durations) if durations else None
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "api_calls": self.api_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_tokens": self.cache_creation_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "tool_calls": self.tool_calls,
            "tool_histogram": dict(self.tool_histogram),
            "files_read": self.files_read,
            "file_reads": dict(self.file_reads),
            "skills_invoked": [s.to_json() for s in self.skills_invoked],
            "tool_results": self.tool_results,
            "tool_errors": self.tool_errors,
            "failed_calls": self.failed_calls,
            "retry_records": self.retry_records,
            "retry_statuses": dict(self.retry_statuses),
            "http_attempts": self.http_attempts,
            "pitfall_hits": dict(self.pitfall_hits),
            "models": sorted(self.model_usage),
            "duration_s": self.duration_s,
            "records": self.records,
        }


def _add_counts(into: dict[str, int], other: dict[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


@dataclass
class SessionResult:
    """Everything mined from one session (its main thread, its sub-agents, and the CLI's stdout if given)."""

    transcript: Path
    session_id: str | None
    status: Status
    main: ThreadMetrics
    subagents: ThreadMetrics
    total: ThreadMetrics
    #: HTTP status of the final API error (api_error, rate_limited, prompt_too_long), when known.
    api_error_status: int | None = None
    rate_limit_reset: datetime | None = None
    rate_limit_message: str | None = None
    #: Turns: the CLI's ``num_turns`` when it covers the whole session, else the calibrated rule summed
    #: over every prompt (FACTS §7).
    turns: int | None = None
    turns_source: Literal["cli", "rule"] | None = None
    #: The calibrated rule for the last prompt only: what the CLI's ``num_turns`` reports.
    turns_last_prompt: int | None = None
    num_turns_cli: int | None = None
    prompts: int = 0
    cost_usd: float | None = None
    cost_source: Literal["cost-state", "cli", "estimated"] | None = None
    unknown_models: list[str] = field(default_factory=list)
    duration_s: float | None = None
    duration_source: Literal["cli", "cost-state", "timestamps"] | None = None
    cwd: str | None = None
    claude_version: str | None = None
    models: list[str] = field(default_factory=list)
    instruction_files: list[dict[str, str]] = field(default_factory=list)
    skills_listed: list[str] = field(default_factory=list)
    hooks_fired: dict[str, int] = field(default_factory=dict)
    agents: list[dict[str, Any]] = field(default_factory=list)
    stdout_kind: str | None = None
    #: Differences between the transcript's figures and the CLI's, wherever both exist.
    reconciliation: dict[str, dict[str, Any]] = field(default_factory=dict)
    malformed_lines: int = 0
    truncated_lines: int = 0
    unknown_record_types: dict[str, int] = field(default_factory=dict)
    pitfall_hits: dict[str, int] = field(default_factory=dict)

    @property
    def cost_estimated(self) -> bool:
        return self.cost_source != "cost-state" and self.cost_source != "cli"

    @property
    def estimated_fields(self) -> list[str]:
        """Fields computed by a rule or a price table rather than read from a record or the CLI."""
        out = []
        if self.cost_estimated:
            out.append("cost_usd")
        if self.turns_source == "rule":
            out.append("turns")
        if self.duration_source == "timestamps":
            out.append("duration_s")
        return out

    def to_json(self) -> dict[str, Any]:
        """The ``ablate mine --json`` contract (one object per session; see README "Mining transcripts")."""
        return {
            "schema_version": SCHEMA_VERSION,
            "session_id": self.session_id,
            "transcript": str(self.transcript),
            "status": self.status,
            "api_error_status": self.api_error_status,
            "rate_limit_reset": self.rate_limit_reset.isoformat() if self.rate_limit_reset else None,
            "rate_limit_message": self.rate_limit_message,
            "turns": self.turns,
            "turns_source": self.turns_source,
            "turns_last_prompt": self.turns_last_prompt,
            "num_turns_cli": self.num_turns_cli,
            "prompts": self.prompts,
            "cost_usd": self.cost_usd,
            "cost_estimated": self.cost_estimated,
            "cost_source": self.cost_source,
            "unknown_models": list(self.unknown_models),
            "duration_s": self.duration_s,
            "duration_source": self.duration_source,
            "estimated_fields": self.estimated_fields,
            "cwd": self.cwd,
            "claude_version": self.claude_version,
            "models": list(self.models),
            "instruction_files": [dict(f) for f in self.instruction_files],
            "skills_listed": list(self.skills_listed),
            "hooks_fired": dict(self.hooks_fired),
            "agents": [dict(a) for a in self.agents],
            "pitfall_hits": dict(self.pitfall_hits),
            "stdout": self.stdout_kind,
            "reconciliation": {k: dict(v) for k, v in self.reconciliation.items()},
            "retries": self.total.retry_records,
            "malformed_lines": self.malformed_lines,
            "truncated_lines": self.truncated_lines,
            "unknown_record_types": dict(self.unknown_record_types),
            "main": self.main.to_json(),
            "subagents": self.subagents.to_json(),
            "total": self.total.to_json(),
        }


# ----------------------------------------------------------------------------------------------------------
# Streaming


def _int(value: Any) -> int:
    """A token count from a record: ints only (bools and garbage count as 0)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return max(value, 0)
    if isinstance(value, float) and value == value and 0 <= value < 1e18:
        return int(value)
    return 0


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    creation = _int(raw.get("cache_creation_input_tokens"))
    split = raw.get("cache_creation")
    one_hour = _int(split.get("ephemeral_1h_input_tokens")) if isinstance(split, dict) else 0
    return Usage(
        input_tokens=_int(raw.get("input_tokens")),
        output_tokens=_int(raw.get("output_tokens")),
        cache_creation_tokens=creation,
        cache_read_tokens=_int(raw.get("cache_read_input_tokens")),
        cache_write_1h_tokens=min(one_hour, creation),
    )


def _text_of(content: Any) -> str:
    """The text of a tool_result / message content (a string or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _strings_in(value: Any, out: list[str], depth: int = 0) -> None:
    if depth > 50:
        return
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings_in(v, out, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _strings_in(v, out, depth + 1)


class _Thread:
    """Accumulates one group of records (main or sub-agents) while streaming."""

    def __init__(self, pitfalls: Sequence[tuple[PitfallPattern, re.Pattern[str]]], cwd: str | None) -> None:
        self.m = ThreadMetrics()
        self.pitfalls = pitfalls
        self.cwd = cwd
        self.usage_by_message: dict[str, tuple[str, Usage]] = {}
        self.seen_tool_uses: set[str] = set()
        self.tool_names: dict[str, str] = {}
        self.skill_calls: dict[str, int] = {}  # tool_use id -> index in m.skills_invoked
        self.first_ts: str | None = None
        self.last_ts: str | None = None

    # -- per record kinds

    def assistant(self, rec: dict[str, Any], msg: dict[str, Any]) -> None:
        mid = msg.get("id")
        model = msg.get("model")
        model = model if isinstance(model, str) else "unknown"
        usage = _usage(msg.get("usage"))
        key = mid if isinstance(mid, str) else f"uuid:{rec.get('uuid')}"
        prev = self.usage_by_message.get(key)
        if prev is None:
            self.usage_by_message[key] = (model, usage)
        else:
            prev[1].merge_max(usage)
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                text = block.get("text")
                if isinstance(text, str):
                    self._scan(text, tools=False)
            elif btype == "tool_use":
                self._tool_use(block)

    def _tool_use(self, block: dict[str, Any]) -> None:
        tid = block.get("id")
        if isinstance(tid, str):
            if tid in self.seen_tool_uses:
                return
            self.seen_tool_uses.add(tid)
        name = block.get("name")
        name = name if isinstance(name, str) else "?"
        m = self.m
        m.tool_calls += 1
        m.tool_histogram[name] = m.tool_histogram.get(name, 0) + 1
        if isinstance(tid, str):
            self.tool_names[tid] = name
        inp = block.get("input")
        if not isinstance(inp, dict):
            inp = {}
        if name == "Read":
            path = inp.get("file_path")
            if isinstance(path, str):
                rel = _relative(path, self.cwd)
                m.file_reads[rel] = m.file_reads.get(rel, 0) + 1
        elif name == "Skill":
            skill = inp.get("skill") or inp.get("command")
            if isinstance(skill, str):
                if isinstance(tid, str):
                    self.skill_calls[tid] = len(m.skills_invoked)
                m.skills_invoked.append(SkillCall(skill.lstrip("/"), "no_result"))
        if any(p.scope == "text+tools" for p, _ in self.pitfalls):
            strings: list[str] = []
            _strings_in(inp, strings)
            self._scan("\n".join(strings), tools=True)

    def _scan(self, text: str, *, tools: bool) -> None:
        for p, rx in self.pitfalls:
            if tools and p.scope != "text+tools":
                continue
            n = len(rx.findall(text))
            if n:
                self.m.pitfall_hits[p.id] = self.m.pitfall_hits.get(p.id, 0) + n

    def tool_result(self, rec: dict[str, Any], block: dict[str, Any]) -> None:
        m = self.m
        m.tool_results += 1
        is_error = block.get("is_error") is True
        if is_error:
            m.tool_errors += 1
        tid = block.get("tool_use_id")
        if not isinstance(tid, str) or tid not in self.skill_calls:
            return
        idx = self.skill_calls[tid]
        text = _text_of(block.get("content"))
        decision = rec.get("permissionDecision")
        denied = isinstance(decision, dict) and decision.get("decision") in ("deny", "reject", "denied")
        outcome: SkillOutcome
        if denied or (is_error and re.search(r"permission|denied|not allowed", text, re.IGNORECASE)):
            outcome = "denied"
        elif is_error and "unknown skill" in text.lower():
            outcome = "unknown"
        elif is_error:
            outcome = "error"
        else:
            outcome = "ok"
        m.skills_invoked[idx] = SkillCall(m.skills_invoked[idx].skill, outcome)

    def finish(self) -> ThreadMetrics:
        m = self.m
        for model, usage in self.usage_by_message.values():
            m.api_calls += 1
            m.input_tokens += usage.input_tokens
            m.output_tokens += usage.output_tokens
            m.cache_creation_tokens += usage.cache_creation_tokens
            m.cache_read_tokens += usage.cache_read_tokens
            m.model_usage.setdefault(model, Usage()).add(usage)
        m.duration_s = _span(self.first_ts, self.last_ts)
        return m


def _span(first: str | None, last: str | None) -> float | None:
    if not first or not last:
        return None
    try:
        a = datetime.fromisoformat(first.replace("Z", "+00:00"))
        b = datetime.fromisoformat(last.replace("Z", "+00:00"))
        return max((b - a).total_seconds(), 0.0)
    except (ValueError, TypeError):
        return None


def _relative(path: str, cwd: str | None) -> str:
    if cwd:
        base = cwd.rstrip("/") + "/"
        if path.startswith(base):
            return path[len(base) :]
    return path


@dataclass
class _Session:
    """Session-level state gathered from every record of the main file and the sub-agent files."""

    session_id: str | None = None
    cwd: str | None = None
    version: str | None = None
    cost_state: dict[str, Any] | None = None
    instruction_files: dict[str, str] = field(default_factory=dict)
    skills_listed: dict[str, None] = field(default_factory=dict)
    hooks_fired: dict[str, int] = field(default_factory=dict)
    malformed: int = 0
    truncated: int = 0
    unknown_types: Counter[str] = field(default_factory=Counter)
    # main-thread prompt/turn bookkeeping (FACTS §7)
    prompts: int = 0
    turns_by_prompt: list[int] = field(default_factory=list)
    # what the main thread ended on: final, tool_use, tool_result, retry, error, max_turns
    last_event: str | None = None
    last_error: dict[str, Any] | None = None


_HOOK_ATTACHMENTS = ("hook_",)


_CHUNK = 8 << 20
_CLOSE_BRACE = ord("}")
_CR = ord("\r")


def _stream(
    path: Path,
    main: _Thread,
    side: _Thread,
    sess: _Session,
    *,
    is_main_file: bool,
) -> None:
    """Stream one JSONL file into the accumulators, in blocks of ``_CHUNK`` bytes (memory stays bounded by
    the block size and the longest line). I/O errors propagate; content never raises."""
    pending: list[bytes] = []  # a line longer than one block, in pieces
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            last_nl = block.rfind(b"\n")
            if last_nl < 0:
                pending.append(block)
                continue
            if pending:
                pending.append(block)
                block = b"".join(pending)
                pending.clear()
                last_nl = block.rfind(b"\n")
            _lines(block, last_nl + 1, main, side, sess, is_main_file)
            if last_nl + 1 < len(block):
                pending.append(block[last_nl + 1 :])
    if pending:
        # The last line of a file still being written (or cut by a kill): a torn record is counted as
        # truncated; a complete record merely missing its newline is mined.
        tail = b"".join(pending)
        if tail.strip():
            try:
                orjson.loads(tail)
            except orjson.JSONDecodeError:
                sess.truncated += 1
                return
            _lines(tail + b"\n", len(tail) + 1, main, side, sess, is_main_file)


def _lines(buf: bytes, end: int, main: _Thread, side: _Thread, sess: _Session, is_main_file: bool) -> None:
    """Process the complete lines of ``buf[:end]`` (``end`` is just past a newline)."""
    view = memoryview(buf)
    find, startswith, match = buf.find, buf.startswith, _IGNORED_ATTACHMENT_RE.match
    own = main if is_main_file else side
    pos = 0
    while pos < end:
        nl = find(b"\n", pos, end)
        if startswith(b'{"type":"', pos):
            is_request = startswith(_API_REQUEST_PREFIX, pos)
            if is_request or startswith(_SKIP_PREFIXES, pos):
                _skipped(buf, nl, own, sess, request=is_request)
                pos = nl + 1
                continue
        elif match(buf, pos, min(nl, pos + _SNAPSHOT_HEAD)):
            _skipped(buf, nl, own, sess, request=False)
            pos = nl + 1
            continue
        line = view[pos:nl]
        pos = nl + 1
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            if bytes(line).strip():
                sess.malformed += 1
            continue
        if not isinstance(rec, dict):
            sess.malformed += 1
            continue
        try:
            _record(rec, main, side, sess, is_main_file)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError):
            # A record with an unexpected shape (a field of the wrong type deep inside): count, go on.
            sess.malformed += 1


def _skipped(buf: bytes, nl: int, thread: _Thread, sess: _Session, *, request: bool) -> None:
    """Account for a line recognised by its prefix without parsing it; a torn one is malformed."""
    last = buf[nl - 1] if nl > 0 else 0
    if last == _CR and nl > 1:
        last = buf[nl - 2]
    if last != _CLOSE_BRACE:
        sess.malformed += 1
        return
    thread.m.records += 1
    if request:
        thread.m.http_attempts += 1


def _record(rec: dict[str, Any], main: _Thread, side: _Thread, sess: _Session, is_main_file: bool) -> None:
    rtype = rec.get("type")
    if not isinstance(rtype, str):
        sess.malformed += 1
        return
    sidechain = rec.get("isSidechain") is True or not is_main_file
    thread = side if sidechain else main
    thread.m.records += 1
    ts = rec.get("timestamp")
    # Thread duration spans the conversation records (never the skipped bookkeeping ones, so the figure
    # does not depend on which lines the fast path skipped).
    if isinstance(ts, str) and rtype in ("user", "assistant", "system"):
        if thread.first_ts is None or ts < thread.first_ts:
            thread.first_ts = ts
        if thread.last_ts is None or ts > thread.last_ts:
            thread.last_ts = ts
    if sess.session_id is None and isinstance(rec.get("sessionId"), str):
        sess.session_id = rec["sessionId"]
    if sess.cwd is None and isinstance(rec.get("cwd"), str):
        sess.cwd = rec["cwd"]
        main.cwd = main.cwd or sess.cwd
        side.cwd = side.cwd or sess.cwd
    if sess.version is None and isinstance(rec.get("version"), str):
        sess.version = rec["version"]

    if rtype == "assistant":
        msg = rec.get("message")
        if not isinstance(msg, dict):
            sess.malformed += 1
            return
        if rec.get("isApiErrorMessage") is True or msg.get("model") == "<synthetic>":
            thread.m.failed_calls += 1
            if not sidechain:
                sess.last_event = "error"
                sess.last_error = {
                    "error": rec.get("error"),
                    "status": rec.get("apiErrorStatus"),
                    "text": _text_of(msg.get("content")),
                    "timestamp": ts if isinstance(ts, str) else None,
                }
            return
        thread.assistant(rec, msg)
        if not sidechain:
            content = msg.get("content")
            has_tool = isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_use" for b in content
            )
            final = not has_tool and msg.get("stop_reason") != "tool_use"
            sess.last_event = "final" if final else "tool_use"
    elif rtype == "user":
        msg = rec.get("message")
        if not isinstance(msg, dict):
            return
        content = msg.get("content")
        results = (
            [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if isinstance(content, list)
            else []
        )
        for block in results:
            thread.tool_result(rec, block)
        if sidechain:
            return
        if results:
            sess.last_event = "tool_result"
            if sess.turns_by_prompt:
                sess.turns_by_prompt[-1] += len(results)
        elif rec.get("isMeta") is True:
            src = rec.get("sourceToolUseID")
            if isinstance(src, str) and main.tool_names.get(src) == "Skill" and sess.turns_by_prompt:
                sess.turns_by_prompt[-1] += 1
        else:
            sess.prompts += 1
            sess.turns_by_prompt.append(1)
    elif rtype == "system":
        if rec.get("subtype") == "api_error":
            err = rec.get("error")
            status = err.get("status") if isinstance(err, dict) else None
            thread.m.retry_records += 1
            key = str(status) if isinstance(status, int) and not isinstance(status, bool) else "unknown"
            thread.m.retry_statuses[key] = thread.m.retry_statuses.get(key, 0) + 1
            if not sidechain:
                sess.last_event = "retry"
    elif rtype == "attachment":
        _attachment(rec.get("attachment"), sess, sidechain)
    elif rtype == "cost-state":
        if is_main_file:
            sess.cost_state = rec
    elif rtype == "api-request":
        thread.m.http_attempts += 1
    elif rtype not in KNOWN_RECORD_TYPES:
        sess.unknown_types[rtype] += 1


def _attachment(att: Any, sess: _Session, sidechain: bool) -> None:
    if not isinstance(att, dict):
        return
    atype = att.get("type")
    if not isinstance(atype, str):
        return
    if atype == "instructions":
        files = att.get("files")
        if isinstance(files, list):
            for f in files:
                if isinstance(f, dict) and isinstance(f.get("path"), str):
                    ftype = f.get("type")
                    sess.instruction_files.setdefault(f["path"], ftype if isinstance(ftype, str) else "?")
    elif atype == "nested_memory":
        path = att.get("path") or att.get("filePath")
        if isinstance(path, str):
            sess.instruction_files.setdefault(path, "Nested")
    elif atype == "skill_listing":
        names = att.get("names")
        if isinstance(names, list):
            for n in names:
                if isinstance(n, str):
                    sess.skills_listed[n] = None
    elif atype.startswith(_HOOK_ATTACHMENTS):
        name = att.get("hookName") or att.get("hookEvent") or "?"
        key = str(name) if atype == "hook_success" else f"{name} ({atype.removeprefix('hook_')})"
        sess.hooks_fired[key] = sess.hooks_fired.get(key, 0) + 1
    elif atype == "max_turns_reached" and not sidechain:
        sess.last_event = "max_turns"


# ----------------------------------------------------------------------------------------------------------
# Public API


def subagent_files(transcript: Path) -> list[Path]:
    """The sub-agent transcripts of a session: ``<stem>/subagents/agent-*.jsonl`` next to it, sorted."""
    folder = transcript.with_suffix("") / "subagents"
    try:
        with os.scandir(folder) as entries:
            return sorted(
                Path(e.path)
                for e in entries
                if e.name.startswith("agent-") and e.name.endswith(".jsonl") and e.is_file()
            )
    except OSError:  # no sub-agents (the usual case), or an unreadable folder
        return []


def _agent_meta(sub: Path) -> dict[str, Any]:
    meta: dict[str, Any] = {"agent_id": sub.stem.removeprefix("agent-")}
    try:
        raw = orjson.loads(sub.with_suffix(".meta.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return meta
    if isinstance(raw, dict):
        for src, dst in (("agentType", "type"), ("requestShape", "request_shape"), ("finished", "finished")):
            if src in raw:
                meta[dst] = raw[src]
    return meta


def _compile(pitfalls: Sequence[PitfallPattern]) -> list[tuple[PitfallPattern, re.Pattern[str]]]:
    return [(p, re.compile(p.pattern, re.IGNORECASE)) for p in pitfalls]


def mine_session(
    transcript: Path,
    *,
    stdout: Path | None = None,
    pitfalls: Sequence[PitfallPattern] = (),
    cwd: Path | None = None,
) -> SessionResult:
    """Mine one session: ``transcript`` plus its ``<stem>/subagents/agent-*.jsonl``, and ``stdout`` if given.

    ``cwd`` overrides the session's cwd (from its records) for making read paths relative. A missing
    transcript gives status ``no_transcript``. Malformed content is counted, never raised; an unreadable
    file raises ``OSError``. An invalid pitfall regex raises ``re.error``.
    """
    compiled = _compile(pitfalls)
    base = str(cwd) if cwd is not None else None
    main, side, sess = _Thread(compiled, base), _Thread(compiled, base), _Session()
    cli = parse_cli_output(stdout) if stdout is not None else None
    agents: list[dict[str, Any]] = []
    exists = transcript.is_file()
    if exists:
        _stream(transcript, main, side, sess, is_main_file=True)
        for sub in subagent_files(transcript):
            _stream(sub, main, side, sess, is_main_file=False)
            agents.append(_agent_meta(sub))
    m_main, m_side = main.finish(), side.finish()
    # Pitfall hits of the sub-agent thread need the same ids in total.
    res = SessionResult(
        transcript=transcript,
        session_id=sess.session_id or (transcript.stem if exists else None),
        status="no_transcript",
        main=m_main,
        subagents=m_side,
        total=m_main.merged(m_side),
        cwd=sess.cwd,
        claude_version=sess.version,
        instruction_files=[{"path": p, "type": t} for p, t in sess.instruction_files.items()],
        skills_listed=list(sess.skills_listed),
        hooks_fired=dict(sess.hooks_fired),
        agents=agents,
        malformed_lines=sess.malformed,
        truncated_lines=sess.truncated,
        unknown_record_types=dict(sess.unknown_types),
        prompts=sess.prompts,
        stdout_kind=cli.kind if cli is not None else None,
    )
    res.models = sorted(m for m in res.total.model_usage if m != "unknown")
    res.pitfall_hits = {p.id: res.total.pitfall_hits.get(p.id, 0) for p in pitfalls}
    if cli is not None and res.session_id is None:
        doc = cli.for_session(None)
        res.session_id = doc.get("session_id") if doc else None
    doc = cli.for_session(res.session_id) if cli is not None else None
    if exists:
        # Without a transcript the run is not evidence, whatever the CLI printed (FACTS §3.7: an invalid
        # config dir exits 0 with a normal result and writes no transcript).
        _status_from_transcript(res, sess)
        _apply_cli(res, cli, doc)
    _turns(res, sess, doc)
    _cost(res, sess, doc)
    _duration(res, sess, doc)
    return res


def _status_from_transcript(res: SessionResult, sess: _Session) -> None:
    ev = sess.last_event
    if ev == "final":
        res.status = "completed"
    elif ev == "max_turns":
        res.status = "max_turns"
    elif ev == "error" and sess.last_error is not None:
        err = sess.last_error
        status = err.get("status")
        res.api_error_status = status if isinstance(status, int) and not isinstance(status, bool) else None
        text = err.get("text") or ""
        if is_rate_limit_message(text) or err.get("error") == "rate_limit" or res.api_error_status == 429:
            res.status = "rate_limited"
            _set_limit(res, text, err.get("timestamp"))
        elif "prompt is too long" in text.lower():
            res.status = "prompt_too_long"
        else:
            res.status = "api_error"
    else:
        # Ends mid-turn (a pending tool call, retries in progress) or has no answer at all.
        res.status = "killed"


def _set_limit(res: SessionResult, text: str, when: Any) -> None:
    if not is_rate_limit_message(text):
        return
    res.rate_limit_message = text
    now = None
    if isinstance(when, str):
        try:
            now = datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            now = None
    res.rate_limit_reset = parse_reset_time(text, now=now)


def _apply_cli(res: SessionResult, cli: CliOutput | None, doc: dict[str, Any] | None) -> None:
    if cli is not None and cli.kind == "rate_limit_stub":
        res.status = "rate_limited"
        res.rate_limit_message = cli.rate_limit_message
        res.rate_limit_reset = cli.rate_limit_reset
        return
    if doc is None or cli is None or cli.kind != "valid":
        return
    reason = doc.get("terminal_reason")
    status = doc.get("api_error_status")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    text = doc.get("result") if isinstance(doc.get("result"), str) else ""
    assert isinstance(text, str)
    if reason == "max_turns" or doc.get("subtype") == "error_max_turns":
        res.status = "max_turns"
    elif reason == "prompt_too_long":
        res.status, res.api_error_status = "prompt_too_long", status
    elif reason == "api_error" or (doc.get("is_error") is True and status is not None):
        res.api_error_status = status
        if status == 429 or is_rate_limit_message(text):
            res.status = "rate_limited"
            _set_limit(res, text, None)
        else:
            res.status = "api_error"
    elif reason == "completed" and doc.get("is_error") is not True:
        res.status = "completed"
    elif doc.get("is_error") is True and is_rate_limit_message(text):
        res.status = "rate_limited"
        _set_limit(res, text, None)


def _num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


def _turns(res: SessionResult, sess: _Session, doc: dict[str, Any] | None) -> None:
    if sess.turns_by_prompt:
        res.turns_last_prompt = sess.turns_by_prompt[-1]
    rule_total = sum(sess.turns_by_prompt) if sess.turns_by_prompt else None
    cli_turns = doc.get("num_turns") if doc else None
    if isinstance(cli_turns, int) and not isinstance(cli_turns, bool):
        res.num_turns_cli = cli_turns
    # The CLI's figure covers only the last prompt of the session (a background agent's task-notification
    # starts a second result, FACTS §5.4): use it only when the session had a single prompt.
    result_index = doc.get("result_index") if doc else None
    covers_all = sess.prompts <= 1 and not (isinstance(result_index, int) and result_index > 0)
    if res.num_turns_cli is not None and covers_all:
        res.turns, res.turns_source = res.num_turns_cli, "cli"
    elif rule_total is not None:
        res.turns, res.turns_source = rule_total, "rule"
    if res.num_turns_cli is not None and res.turns_last_prompt is not None:
        res.reconciliation["turns"] = {
            "transcript": res.turns_last_prompt,
            "cli": res.num_turns_cli,
            "difference": res.turns_last_prompt - res.num_turns_cli,
            "note": "calibrated rule over the last prompt vs the CLI's num_turns",
        }


def _estimate(total: ThreadMetrics) -> tuple[float | None, list[str]]:
    cost, unknown = 0.0, []
    for model, u in total.model_usage.items():
        if not (u.input_tokens or u.output_tokens or u.cache_creation_tokens or u.cache_read_tokens):
            continue
        c = estimate_cost(
            model,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_write_5m_tokens=u.cache_creation_tokens - u.cache_write_1h_tokens,
            cache_write_1h_tokens=u.cache_write_1h_tokens,
            cache_read_tokens=u.cache_read_tokens,
        )
        if c is None:
            unknown.append(model)
        else:
            cost += c
    return (None if unknown else cost), sorted(unknown)


def _cost(res: SessionResult, sess: _Session, doc: dict[str, Any] | None) -> None:
    estimate, unknown = _estimate(res.total)
    state_cost = _num(sess.cost_state.get("totalCostUSD")) if sess.cost_state else None
    cli_cost = _num(doc.get("total_cost_usd")) if doc else None
    if state_cost is not None:
        res.cost_usd, res.cost_source = state_cost, "cost-state"
    elif cli_cost is not None:
        res.cost_usd, res.cost_source = cli_cost, "cli"
    elif res.total.api_calls or estimate:
        res.cost_usd, res.cost_source, res.unknown_models = estimate, "estimated", unknown
    if state_cost is not None and cli_cost is not None:
        res.reconciliation["cost_usd"] = {
            "transcript": state_cost,
            "cli": cli_cost,
            "difference": round(state_cost - cli_cost, 9) + 0.0,
        }
    if estimate is not None and res.cost_source in ("cost-state", "cli") and res.cost_usd is not None:
        res.reconciliation["cost_estimate"] = {
            "estimate": round(estimate, 9),
            res.cost_source: res.cost_usd,
            "difference": round(estimate - res.cost_usd, 9) + 0.0,
        }


def _duration(res: SessionResult, sess: _Session, doc: dict[str, Any] | None) -> None:
    cli_ms = _num(doc.get("duration_ms")) if doc else None
    state_ms = _num(sess.cost_state.get("totalDuration")) if sess.cost_state else None
    if cli_ms is not None and (res.prompts <= 1):
        res.duration_s, res.duration_source = cli_ms / 1000, "cli"
    elif state_ms is not None:
        res.duration_s, res.duration_source = state_ms / 1000, "cost-state"
    elif res.total.duration_s is not None:
        res.duration_s, res.duration_source = res.total.duration_s, "timestamps"


# ----------------------------------------------------------------------------------------------------------
# Finding sessions


_UUID_NAME = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _is_session_file(path: Path) -> bool:
    if path.suffix != ".jsonl" or path.name.startswith("agent-") or "subagents" in path.parts:
        return False
    if path.name == "plan.jsonl":
        return False
    if _UUID_NAME.fullmatch(path.stem):
        return True  # Claude Code names every session file by its session id
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 12)
    except OSError:
        return False
    return not head.strip() or b'"sessionId"' in head


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
        root = path / "transcripts" if (path / "plan.jsonl").is_file() else path
        for candidate in sorted(root.rglob("*.jsonl")):
            if _is_session_file(candidate):
                yield candidate


def stdout_for_transcript(transcript: Path) -> Path | None:
    """For a transcript inside a run folder (``transcripts/<item>.a<N>/<sid>.jsonl``), its stdout file."""
    attempt_dir = transcript.parent
    if attempt_dir.parent.name != "transcripts":
        return None
    root = attempt_dir.parent.parent
    if not (root / "plan.jsonl").is_file():
        return None
    return root / "stdout" / f"{attempt_dir.name}.json"


def mine_paths(paths: Iterable[Path], *, pitfalls: Sequence[PitfallPattern] = ()) -> Iterator[SessionResult]:
    """Mine every session under ``paths`` (see :func:`iter_sessions`), pairing run-folder transcripts
    with their stdout file."""
    for transcript in iter_sessions(paths):
        yield mine_session(transcript, stdout=stdout_for_transcript(transcript), pitfalls=pitfalls)


def _mine_one(job: tuple[Path, tuple[PitfallPattern, ...]]) -> SessionResult | OSError:
    transcript, pitfalls = job
    try:
        return mine_session(transcript, stdout=stdout_for_transcript(transcript), pitfalls=pitfalls)
    except OSError as exc:
        return exc


def mine_each(
    transcripts: Iterable[Path], *, pitfalls: Sequence[PitfallPattern] = (), jobs: int = 1
) -> Iterator[tuple[Path, SessionResult | OSError]]:
    """Mine each transcript, in order, with ``jobs`` worker processes; an unreadable file yields its error.

    Each worker streams its own file, so memory stays bounded whatever the corpus size.
    """
    pits = tuple(pitfalls)
    items = ((t, pits) for t in transcripts)
    if jobs <= 1:
        for job in items:
            yield job[0], _mine_one(job)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        pending = list(items)
        for job, result in zip(pending, pool.map(_mine_one, pending, chunksize=16), strict=True):
            yield job[0], result

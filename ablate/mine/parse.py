"""Streaming a transcript (docs/ARCHITECTURE.md#mining): records into per-thread counters, snapshot lines never parsed.

Request snapshots (``api-request-shape``, ``api-request-blob``, ``attachment:prompt_snapshot``) are most of a
transcript's bytes and carry nothing counted: a line is skipped unparsed only when its prefix proves its type
(the ``type`` key first, or the top-level ``attachment`` object, reached through scalar keys only, a prompt
snapshot). Any other line, whatever its key order, is parsed with orjson. Damage is counted, never fatal."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ablate.core.jsonl import json_strings
from ablate.mine.attachments import hook_commands_in, instruction_files_in, listed_names_in
from ablate.mine.model import KNOWN_RECORD_TYPES, SkillCall, ThreadMetrics, Usage

if TYPE_CHECKING:  # the task model pulls in pydantic: the miner never needs it at run time
    from ablate.folder.session import SkillOutcome
    from ablate.setup.tasks import PitfallPattern

# Lines whose type is proven by their first bytes and that carry nothing we mine.
_SKIP_PREFIXES: tuple[bytes, ...] = (
    b'{"type":"api-request",',
    b'{"type":"api-request-blob",',
    b'{"type":"api-request-shape",',
    b'{"type":"atis-latch",',
    b'{"type":"last-prompt",',
    b'{"type":"queue-operation",',
    b'{"type":"tools-used",',
)
# Among those, ``{"type":"api-request",`` (one per HTTP attempt) is the one starting with "a" whose type
# ends where the others go on ("-blob", "-shape"; "last-prompt" has the same length but starts with "l").
_REQUEST_QUOTE = len(b'{"type":"api-request')
_QUOTE, _A = ord('"'), ord("a")
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


def attachment_skip_re(ignored: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """The prefix pattern of a line whose top-level ``attachment`` object, reached through scalar-valued
    keys only, has one of the ``ignored`` types. A quote inside a JSON string is escaped, so this byte
    pattern can only be structure, at depth 1."""
    return re.compile(
        rb'\{(?:"[A-Za-z_]+":(?:null|true|false|-?\d+|"[^"\\]*"),)*"attachment":\{"type":"(?:'
        + b"|".join(ignored)
        + rb')"'
    )


_IGNORED_ATTACHMENT_RE = attachment_skip_re(_IGNORED_ATTACHMENTS)
#: ``ablate usage`` also reads the agent listing (which agents a session offered the model).
USAGE_SKIP_RE = attachment_skip_re(tuple(a for a in _IGNORED_ATTACHMENTS if a != b"agent_listing_delta"))
_SNAPSHOT_HEAD = 512
# Every line the attachment pattern matches holds this within its head; finding it is several times cheaper
# than trying the pattern, which most conversation records (user, assistant, system) fail.
_ATTACHMENT_KEY = b'"attachment":{"type":"'


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


class _Thread:
    """Accumulates one group of records (main or sub-agents) while streaming."""

    def __init__(self, pitfalls: Sequence[tuple[PitfallPattern, re.Pattern[str]]], cwd: str | None) -> None:
        self.m = ThreadMetrics()
        self.pitfalls = pitfalls
        self.tool_pitfalls = any(p.scope == "text+tools" for p, _ in pitfalls)
        self.cwd = cwd
        self.usage_by_message: dict[str, tuple[str, Usage]] = {}
        self.raw_usage: dict[str, Any] = {}  # message id -> the last raw usage seen (records repeat it)
        self.seen_tool_uses: set[str] = set()
        self.tool_names: dict[str, str] = {}
        self.skill_calls: dict[str, int] = {}  # tool_use id -> index in m.skills_invoked
        self.first_ts: str | None = None
        self.last_ts: str | None = None
        #: (tool name, input) of the tools whose inputs name files, agents or skills (for ``ablate usage``)
        self.tool_inputs: list[tuple[str, dict[str, Any]]] = []

    # -- per record kinds

    def assistant(self, rec: dict[str, Any], msg: dict[str, Any]) -> bool:
        """Count one assistant record; whether its content holds a ``tool_use`` block."""
        mid = msg.get("id")
        model = msg.get("model")
        model = model if isinstance(model, str) else "unknown"
        raw = msg.get("usage")
        key = mid if isinstance(mid, str) else f"uuid:{rec.get('uuid')}"
        prev = self.usage_by_message.get(key)
        if prev is None:
            self.usage_by_message[key] = (model, _usage(raw))
            self.raw_usage[key] = raw
        elif raw != self.raw_usage[key]:  # the same message's next block usually repeats the same usage
            prev[1].merge_max(_usage(raw))
            self.raw_usage[key] = raw
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return False
        has_tool = False
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                text = block.get("text")
                if self.pitfalls and isinstance(text, str):
                    self._scan(text, tools=False)
            elif btype == "tool_use":
                has_tool = True
                self._tool_use(block)
        return has_tool

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
        if name in PATH_TOOLS:
            self.tool_inputs.append((name, inp))
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
        if self.tool_pitfalls:
            self._scan("\n".join(json_strings(inp)), tools=True)

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
    unknown_types: dict[str, int] = field(default_factory=dict)
    # main-thread prompt/turn bookkeeping (docs/CLAUDE-CODE.md#turns)
    prompts: int = 0
    turns_by_prompt: list[int] = field(default_factory=list)
    # what the main thread ended on: final, tool_use, tool_result, retry, error, max_turns
    last_event: str | None = None
    last_error: dict[str, Any] | None = None
    # for ``ablate usage``: the first prompt (text, timestamp), slash commands typed, agent types offered
    first_prompt: str | None = None
    first_prompt_ts: str | None = None
    commands: list[str] = field(default_factory=list)
    agents_listed: dict[str, None] = field(default_factory=dict)


_HOOK_ATTACHMENTS = ("hook_",)
#: Tools whose inputs can name a layer's file, agent or skill (kept per thread for ``ablate usage``).
PATH_TOOLS = frozenset({"Read", "Grep", "Glob", "Bash", "Agent", "Task", "Skill", "NotebookRead"})
_COMMAND_NAME = re.compile(r"<command-name>/?([^<\s]+)</command-name>")


_CHUNK = 8 << 20
_CLOSE_BRACE = ord("}")
_CR = ord("\r")


def _blocks(path: Path, sess: _Session) -> Iterator[tuple[bytes, int]]:
    """Blocks of about ``_CHUNK`` bytes of one JSONL file, each with the end of its last complete line (memory
    stays bounded by the block size and the longest line). A torn last line is counted in ``sess``."""
    pending: list[bytes] = []  # a line longer than one block, in pieces
    with open(path, "rb", buffering=0) as fh:  # unbuffered: each read is one read(2) into the block
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
            yield block, last_nl + 1
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
            yield tail + b"\n", len(tail) + 1


def _stream(
    path: Path,
    main: _Thread,
    side: _Thread,
    sess: _Session,
    *,
    is_main_file: bool,
    skip: re.Pattern[bytes] = _IGNORED_ATTACHMENT_RE,
) -> None:
    """Stream one JSONL file into the accumulators, block by block. I/O errors propagate; content never raises.

    The line loop is the miner's hot path (most lines are skipped by their prefix): a skipped line costs one
    ``find``, one ``startswith`` and two byte reads, with no call. A line starting ``{"type":"`` that is
    not skipped is parsed without trying the attachment pattern (it is only a shortcut: parsing is
    always correct), and so is a line whose head lacks ``"attachment":{"type":"``."""
    skipped = attempts = torn = 0  # the skipped lines' counts, added once at the end
    for buf, end in _blocks(path, sess):
        view = memoryview(buf)
        find, startswith, match = buf.find, buf.startswith, skip.match
        pos = 0
        while pos < end:
            nl = find(b"\n", pos, end)
            if startswith(_SKIP_PREFIXES, pos) or (
                not startswith(b'{"t', pos)
                and find(_ATTACHMENT_KEY, pos, head := min(nl, pos + _SNAPSHOT_HEAD)) >= 0
                and match(buf, pos, head)
            ):
                # recognised by its prefix, never parsed: a torn one (no closing brace) is malformed
                last = buf[nl - 1]
                if last == _CLOSE_BRACE or (last == _CR and buf[nl - 2] == _CLOSE_BRACE):
                    skipped += 1
                    # ``{"type":"api-request",``
                    if buf[pos + _REQUEST_QUOTE] == _QUOTE and buf[pos + 9] == _A:
                        attempts += 1
                else:
                    torn += 1
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
    own = (main if is_main_file else side).m
    own.records += skipped
    own.http_attempts += attempts
    sess.malformed += torn


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
        has_tool = thread.assistant(rec, msg)
        if not sidechain:
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
            _prompt(rec, msg, sess)
    elif rtype == "system":
        if rec.get("subtype") == "api_error":
            err = rec.get("error")
            status = err.get("status") if isinstance(err, dict) else None
            thread.m.retry_records += 1
            key = str(status) if isinstance(status, int) and not isinstance(status, bool) else "unknown"
            thread.m.retry_statuses[key] = thread.m.retry_statuses.get(key, 0) + 1
            if not sidechain:
                sess.last_event = "retry"
        else:
            # hooks the CLI reports in system records: every Stop hook that ran, and hooks that blocked
            commands = hook_commands_in(rec)
            if commands:
                key = "Stop" if rec.get("subtype") == "stop_hook_summary" else "hook (blocked)"
                sess.hooks_fired[key] = sess.hooks_fired.get(key, 0) + len(commands)
    elif rtype == "attachment":
        _attachment(rec.get("attachment"), sess, sidechain)
    elif rtype == "cost-state":
        if is_main_file:
            sess.cost_state = rec
    elif rtype == "api-request":
        thread.m.http_attempts += 1
    elif rtype not in KNOWN_RECORD_TYPES:
        sess.unknown_types[rtype] = sess.unknown_types.get(rtype, 0) + 1


def _prompt(rec: dict[str, Any], msg: dict[str, Any], sess: _Session) -> None:
    """A main-thread prompt: the first one's text and time, and any ``/command`` it expanded from."""
    text = _text_of(msg.get("content"))
    if "<command-name>" in text:
        sess.commands.extend(_COMMAND_NAME.findall(text))
    if sess.first_prompt is None:
        sess.first_prompt = text
        ts = rec.get("timestamp")
        sess.first_prompt_ts = ts if isinstance(ts, str) else None


def _attachment(att: Any, sess: _Session, sidechain: bool) -> None:
    if not isinstance(att, dict):
        return
    atype = att.get("type")
    if not isinstance(atype, str):
        return
    if atype in ("instructions", "nested_memory"):
        for f in instruction_files_in(att):
            sess.instruction_files.setdefault(f["path"], f["type"])
    elif atype == "skill_listing":
        for n in listed_names_in(att):
            sess.skills_listed[n] = None
    elif atype == "agent_listing_delta":  # skipped by the miner's prefix filter; parsed for ``ablate usage``
        for n in listed_names_in(att):
            sess.agents_listed[n] = None
    elif atype.startswith(_HOOK_ATTACHMENTS):
        name = att.get("hookName") or att.get("hookEvent") or "?"
        key = str(name) if atype == "hook_success" else f"{name} ({atype.removeprefix('hook_')})"
        sess.hooks_fired[key] = sess.hooks_fired.get(key, 0) + 1
    elif atype == "max_turns_reached" and not sidechain:
        sess.last_event = "max_turns"


def main_thread_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every record of a transcript's main thread as a dict, in order (malformed lines, non-objects and
    ``isSidechain`` records skipped). An unreadable file raises ``OSError``."""
    with path.open("rb") as fh:
        for line in fh:
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict) and not rec.get("isSidechain"):
                yield rec

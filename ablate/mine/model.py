"""The mined session: :class:`SessionResult` and its parts (the ``ablate mine --json`` contract)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the typed models pull in pydantic: mining never needs them, only their callers do
    from ablate.folder.session import MinedStatus as Status, SessionMetrics, SkillOutcome, ThreadSummary

#: Version of the mined-session object: ``ablate.folder.session.SESSION_SCHEMA_VERSION``, repeated here so
#: that mining does not import the typed models (tests/test_startup.py holds the two equal).
SCHEMA_VERSION: Literal[1] = 1

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
        for name in _USAGE_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def merge_max(self, other: Usage) -> None:
        """Keep the larger value per field (a message's records repeat, or grow, the same usage)."""
        for name in _USAGE_FIELDS:
            setattr(self, name, max(getattr(self, name), getattr(other, name)))


#: ``Usage``'s field names, taken once: ``fields()`` on every call was half of the cost of adding.
_USAGE_FIELDS = tuple(f.name for f in fields(Usage))


@dataclass
class ThreadMetrics:
    """Metrics of one thread group: the main thread, the sub-agents, or both (``total``); the fields mean what
    :class:`ablate.folder.session.ThreadSummary`'s say."""

    api_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    tool_calls: int = 0
    tool_histogram: dict[str, int] = field(default_factory=dict)
    file_reads: dict[str, int] = field(default_factory=dict)
    skills_invoked: list[SkillCall] = field(default_factory=list)
    tool_results: int = 0
    tool_errors: int = 0
    failed_calls: int = 0
    retry_records: int = 0
    retry_statuses: dict[str, int] = field(default_factory=dict)
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
        """Both groups as one: counts add, count tables add per key, lists join, the longer duration counts.

        Field by field from the dataclass, so a new count needs no line here."""
        out = ThreadMetrics()
        for name, kind in _MERGE:
            mine, theirs = getattr(self, name), getattr(other, name)
            if kind is int:
                setattr(out, name, mine + theirs)
            elif kind is list:
                setattr(out, name, [*mine, *theirs])
            elif name == "model_usage":
                for part in (mine, theirs):
                    for model, usage in part.items():
                        out.model_usage.setdefault(model, Usage()).add(usage)
            else:
                counts = dict(mine)
                for k, v in theirs.items():
                    counts[k] = counts.get(k, 0) + v
                setattr(out, name, counts)
        durations = [d for d in (self.duration_s, other.duration_s) if d is not None]
        out.duration_s = max(durations) if durations else None
        return out

    def summary(self) -> ThreadSummary:
        """The typed form written into results and ``ablate mine --json``."""
        from ablate.folder.session import ThreadSummary

        return ThreadSummary.model_validate(self._fields())

    def _fields(self) -> dict[str, Any]:
        """The fields of :class:`ThreadSummary`, in its order, from the dataclass's (copied, JSON-ready)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "file_reads":
                out["files_read"] = self.files_read
            if f.name == "model_usage":
                out["models"] = sorted(value)
            elif f.name == "skills_invoked":
                out[f.name] = [s.to_json() for s in value]
            else:
                out[f.name] = dict(value) if isinstance(value, dict) else value
        return out


#: (field, int | dict | list) of every field :meth:`ThreadMetrics.merged` combines (all but ``duration_s``).
_MERGE = tuple(
    (f.name, type(getattr(ThreadMetrics(), f.name))) for f in fields(ThreadMetrics) if f.name != "duration_s"
)


@dataclass
class SessionResult:
    """Everything mined from one session (its main thread, its sub-agents, and the CLI's stdout if given); the
    fields mean what :class:`ablate.folder.session.SessionMetrics`'s say."""

    transcript: Path
    session_id: str | None
    status: Status
    main: ThreadMetrics
    subagents: ThreadMetrics
    total: ThreadMetrics
    api_error_status: int | None = None
    rate_limit_reset: datetime | None = None
    rate_limit_message: str | None = None
    turns: int | None = None
    turns_source: Literal["cli", "rule"] | None = None
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

    def to_metrics(self) -> SessionMetrics:
        """The typed ``ablate mine --json`` object, also the ``session`` field of every run-folder result."""
        from ablate.folder.session import SessionMetrics

        return SessionMetrics.model_validate(self.to_json())

    @property
    def retries(self) -> int:
        return self.total.retry_records

    def to_json(self) -> dict[str, Any]:
        """The fields of :class:`SessionMetrics`, JSON-ready: what ``ablate mine --json`` prints (see docs/GUIDE.md,
        "Mining transcripts"). Every result validates it through :meth:`to_metrics`; printing it directly
        keeps mining as fast as it was."""
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for key in _KEYS:
            value = getattr(self, "stdout_kind" if key == "stdout" else key)
            out[key] = value._fields() if isinstance(value, ThreadMetrics) else copy.deepcopy(value)
        out["transcript"] = str(self.transcript)
        out["rate_limit_reset"] = self.rate_limit_reset.isoformat() if self.rate_limit_reset else None
        return out


#: The keys of :class:`SessionMetrics` after ``schema_version``, in its order (``stdout`` is ``stdout_kind``).
_KEYS = (
    "session_id", "transcript", "status", "api_error_status", "rate_limit_reset", "rate_limit_message", "turns",
    "turns_source", "turns_last_prompt", "num_turns_cli", "prompts", "cost_usd", "cost_estimated", "cost_source",
    "unknown_models", "duration_s", "duration_source", "estimated_fields", "cwd", "claude_version", "models",
    "instruction_files", "skills_listed", "hooks_fired", "agents", "pitfall_hits", "stdout", "reconciliation",
    "retries", "malformed_lines", "truncated_lines", "unknown_record_types", "main", "subagents", "total",
)  # fmt: skip

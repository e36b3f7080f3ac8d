"""The typed parts of a result: :class:`SessionMetrics` (the ``ablate mine --json`` object, a result's
``session``) and :class:`SessionWrites` (its ``writes``: what the session wrote outside its cell). The JSON
keys are those written before these models existed, so older files read unchanged."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ablate.core.specs import Spec

#: Version of the mined-session object (its own ``schema_version``, independent of the result's).
SESSION_SCHEMA_VERSION: Literal[1] = 1

#: How the miner classifies a session.
MinedStatus = Literal[
    "completed", "api_error", "max_turns", "prompt_too_long", "killed", "rate_limited", "no_transcript"
]
SkillOutcome = Literal["ok", "unknown", "denied", "error", "no_result"]


class SkillInvocation(Spec):
    """One ``Skill`` tool call and what came of it."""

    skill: str
    outcome: SkillOutcome


class InstructionFile(Spec):
    """An instruction file (CLAUDE.md, a rule, an import) the CLI loaded into the session."""

    path: str
    type: str
    """The CLI's own label for the file (``User``, ``Project``, ``Local``, ...)."""


class ThreadSummary(Spec):
    """Metrics of one thread group: the main thread, the sub-agents, or both (``total``)."""

    api_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    tool_calls: int = 0
    tool_histogram: dict[str, int] = Field(default_factory=dict)
    files_read: list[str] = Field(default_factory=list)
    """Files read with the Read tool, first read first (relative to the cwd when inside it)."""
    file_reads: dict[str, int] = Field(default_factory=dict)
    """The same files -> number of reads."""
    skills_invoked: list[SkillInvocation] = Field(default_factory=list)
    tool_results: int = 0
    tool_errors: int = 0
    failed_calls: int = 0
    """Calls that finally failed (synthetic ``isApiErrorMessage`` records)."""
    retry_records: int = 0
    """``system/api_error`` records: one per retried HTTP attempt, recovered or not."""
    retry_statuses: dict[str, int] = Field(default_factory=dict)
    http_attempts: int = 0
    """``api-request`` records: one per HTTP attempt, retries included (absent in older transcripts)."""
    pitfall_hits: dict[str, int] = Field(default_factory=dict)
    models: list[str] = Field(default_factory=list)
    duration_s: float | None = None
    records: int = 0


class SessionMetrics(Spec):
    """Everything mined from one session: the ``ablate mine --json`` object (docs/GUIDE.md)."""

    schema_version: Literal[1] = SESSION_SCHEMA_VERSION
    session_id: str | None = None
    transcript: str
    """The transcript's path (relative to the run folder inside a result)."""
    status: MinedStatus
    api_error_status: int | None = None
    """HTTP status of the final API error (api_error, rate_limited, prompt_too_long), when known."""
    rate_limit_reset: str | None = None
    """ISO-8601 time the rate limit resets, when the CLI said."""
    rate_limit_message: str | None = None
    turns: int | None = None
    """The CLI's ``num_turns`` when it covers the whole session, else the calibrated rule summed over every
    prompt (docs/CLAUDE-CODE.md#turns)."""
    turns_source: Literal["cli", "rule"] | None = None
    turns_last_prompt: int | None = None
    """The calibrated rule for the last prompt only: what the CLI's ``num_turns`` reports."""
    num_turns_cli: int | None = None
    prompts: int = 0
    cost_usd: float | None = None
    cost_estimated: bool = True
    cost_source: Literal["cost-state", "cli", "estimated"] | None = None
    unknown_models: list[str] = Field(default_factory=list)
    duration_s: float | None = None
    duration_source: Literal["cli", "cost-state", "timestamps"] | None = None
    estimated_fields: list[str] = Field(default_factory=list)
    """Fields computed by a rule or a price table rather than read from a record or the CLI."""
    cwd: str | None = None
    claude_version: str | None = None
    models: list[str] = Field(default_factory=list)
    instruction_files: list[InstructionFile] = Field(default_factory=list)
    skills_listed: list[str] = Field(default_factory=list)
    hooks_fired: dict[str, int] = Field(default_factory=dict)
    agents: list[dict[str, Any]] = Field(default_factory=list)
    """One entry per sub-agent transcript (its ``.meta.json``, when there is one)."""
    pitfall_hits: dict[str, int] = Field(default_factory=dict)
    stdout: str | None = None
    """What the CLI's stdout was (valid, missing, empty, corrupt, rate_limit_stub); None when not given."""
    reconciliation: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Differences between the transcript's figures and the CLI's, wherever both exist."""
    retries: int = 0
    malformed_lines: int = 0
    truncated_lines: int = 0
    unknown_record_types: dict[str, int] = Field(default_factory=dict)
    main: ThreadSummary = Field(default_factory=ThreadSummary)
    subagents: ThreadSummary = Field(default_factory=ThreadSummary)
    total: ThreadSummary = Field(default_factory=ThreadSummary)


class AreaWrites(Spec):
    """Writes under one real path of the session's view."""

    path: str
    files: int = 0
    bytes: int = 0
    deleted: int = 0
    by_folder: dict[str, int] = Field(default_factory=dict)
    """Top folder (``~/.pyenv``) -> files written or deleted under it."""


class DeniedWrite(Spec):
    """A write the ``links`` fence refused (the session's tool saw ``Read-only file system``)."""

    path: str
    """The path as the session named it, its home shown as ``~``."""
    count: int = 1
    """How many of the session's tool results reported it."""


class CredentialsCopy(Spec):
    """What became of the session's ``.credentials.json`` (docs/ARCHITECTURE.md#credentials)."""

    copied: bool = False
    """True: a refreshed login of the same account, copied back to the real file."""
    discarded: str | None = None
    """Why the session's file was not copied back (never written anywhere); None when it was not changed."""


class SessionWrites(Spec):
    """What a session wrote outside its cell: ``namespace``: read from its upper folders, then discarded;
    ``links`` under a write fence: what the fence refused (nothing outside the cell was written)."""

    schema_version: Literal[1] = 1
    discarded: bool = True
    """True: the writes never reached the user's machine."""
    areas: dict[str, AreaWrites] = Field(default_factory=dict)
    """Every area of the view (home, config, repo, tmp)."""
    outside_cell: dict[str, AreaWrites] = Field(default_factory=dict)
    """The areas outside the cell that were touched."""
    fence: str | None = None
    """``links``: the write fence the session ran under (``bubblewrap``, ``sandbox-exec``); None without."""
    denied: list[DeniedWrite] = Field(default_factory=list)
    """``links`` under a fence: the writes it refused, most frequent first (the session saw them fail)."""
    error: str | None = None
    """Set when the writes could not be inspected (then the other fields are empty)."""
    credentials: CredentialsCopy | None = None
    """The session's credentials file: copied back, discarded (why), or unchanged."""

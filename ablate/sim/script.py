"""The sim script: rules that decide how the simulated endpoint answers each request.

A script is a TOML or JSON file validated with pydantic (see :mod:`ablate.core.specs`); a malformed script is
a located :class:`~ablate.core.errors.SpecError` (``file: rules.2.turn: ...``). The first matching rule
answers; a request no rule matches gets ``default``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ablate.core.jsonl import json_strings
from ablate.core.specs import Spec, load_spec, validate

#: Placeholders allowed in answer strings (text and every string inside a tool input).
PLACEHOLDERS = ("cwd", "session_id", "turn", "rule", "model")
_PLACEHOLDER_RE = re.compile(r"\$\{([^}]*)\}")

Where = Literal["request", "system", "messages", "tools", "first_user", "prompt", "last_user"]
"""Which part of a request a rule's text conditions look at."""

ErrorStatus = Literal[400, 401, 403, 404, 413, 429, 500, 529]


class Usage(Spec):
    """Token usage an answer reports. ``"auto"`` estimates from text length (4 characters per token)."""

    input_tokens: int | Literal["auto"] = "auto"
    """Uncached input tokens; ``"auto"`` = length of the whole request text / 4."""
    output_tokens: int | Literal["auto"] = "auto"
    """Output tokens; ``"auto"`` = length of the answer's text and tool inputs / 4 (at least 1)."""
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    """Input tokens reported as written to the prompt cache."""
    cache_read_input_tokens: int = Field(default=0, ge=0)
    """Input tokens reported as read from the prompt cache."""

    @field_validator("input_tokens", "output_tokens")
    @classmethod
    def _non_negative(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 0:
            raise ValueError('must be >= 0 or "auto"')
        return v


class ToolCall(Spec):
    """One ``tool_use`` block of an answer."""

    name: str = Field(min_length=1)
    """The tool name as the CLI knows it: Read, Bash, Edit, Write, Skill, Agent, Grep, … (any name)."""
    input: dict[str, Any] = Field(default_factory=dict)
    """The tool input; strings may use the placeholders ``${cwd}``, ``${session_id}``, ``${turn}``…"""


#: Status → the real API's ``error.type`` and ``error.message`` for it.
_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per minute. "
        "For details, refer to: https://docs.claude.com/en/api/rate-limits.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


class ErrorAnswer(Spec):
    """An HTTP error instead of a message, with the real API's JSON error body."""

    status: ErrorStatus
    """HTTP status: 400 (prompt too long by default), 401, 403, 404, 413, 429, 500 or 529."""
    type: str | None = None
    """The ``error.type``; default from the status (429 → rate_limit_error, 529 → overloaded_error…)."""
    message: str | None = None
    """The ``error.message``; default the real API's wording for the status."""
    retry_after: int | None = Field(default=0, ge=0)
    """``retry-after`` header in seconds for 429/529 (None: no header). Claude Code 2.1.332 ignores 0."""

    @property
    def error_type(self) -> str:
        return self.type or _ERRORS[self.status][0]

    @property
    def error_message(self) -> str:
        return self.message if self.message is not None else _ERRORS[self.status][1]


class Answer(Spec):
    """What the endpoint sends back: text and/or tool_use blocks, or an error; optionally slowly."""

    text: str | None = None
    """A text block (before any tool_use block). Placeholders allowed."""
    tool_use: list[ToolCall] = Field(default_factory=list)
    """tool_use blocks, in order (several = parallel tool calls in one response)."""
    stop_reason: Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal"] | None = None
    """Default: ``tool_use`` when there are tool_use blocks, else ``end_turn``."""
    usage: Usage | None = None
    """Reported usage; fields not set here come from the script's top-level ``usage``."""
    error: ErrorAnswer | None = None
    """Answer with an HTTP error instead (excludes text and tool_use)."""
    delay_s: float = Field(default=0.0, ge=0, le=600)
    """Seconds to wait before answering (time to first byte)."""
    chunk_delay_s: float = Field(default=0.0, ge=0, le=60)
    """Seconds to wait between streamed events."""

    @model_validator(mode="after")
    def _consistent(self) -> Answer:
        if self.error is not None and (self.text is not None or self.tool_use):
            raise ValueError("an answer with `error` cannot also have `text` or `tool_use`")
        if self.error is None and self.text is None and not self.tool_use:
            raise ValueError("an answer needs `text`, `tool_use` or `error`")
        for s in json_strings(self.text, [c.input for c in self.tool_use]):
            for name in _PLACEHOLDER_RE.findall(s):
                if name not in PLACEHOLDERS:
                    known = ", ".join("${" + p + "}" for p in PLACEHOLDERS)
                    raise ValueError(f"unknown placeholder ${{{name}}} (known: {known})")
        return self


class TurnRange(Spec):
    """A range of assistant-turn counts, both ends inclusive."""

    min: int | None = Field(default=None, ge=0)
    """At least this many assistant messages already in the request."""
    max: int | None = Field(default=None, ge=0)
    """At most this many assistant messages already in the request."""

    @model_validator(mode="after")
    def _ordered(self) -> TurnRange:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self


def _parse_turn(v: Any) -> Any:
    """``turn = 2`` or ``turn = {min = 1, max = 3}``, with one clear message for anything else."""
    if v is None or isinstance(v, TurnRange):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 0:
            raise ValueError("must be >= 0")
        return v
    if isinstance(v, dict):
        unknown = sorted(set(v) - {"min", "max"})
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)}; a range has only `min` and `max`")
        for key, bound in v.items():
            if not isinstance(bound, int) or isinstance(bound, bool) or bound < 0:
                raise ValueError(f"`{key}` must be an integer >= 0, got {bound!r}")
        lo, hi = v.get("min"), v.get("max")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min ({lo}) is greater than max ({hi})")
        return TurnRange(min=lo, max=hi)
    raise ValueError("expected a turn count (`turn = 0`) or a range (`turn = {min = 1, max = 3}`)")


class Rule(Answer):
    """A condition on the request plus the answer it gets when the condition holds."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.:-]+$")
    """Unique name, recorded in the request log as the rule that answered."""
    contains: list[str] = Field(default_factory=list)
    """Every one of these strings must occur in the searched text (``where``)."""
    not_contains: list[str] = Field(default_factory=list)
    """None of these strings may occur in the searched text."""
    regex: str | None = None
    """A Python regex that must match somewhere in the searched text (``re.search``, DOTALL)."""
    where: Where = "request"
    """Text searched: request (system + messages + tools), system, messages, tools, first_user (the first user
    message, system-reminders included), prompt (first user message without system-reminders), last_user."""
    model: str | None = None
    """A substring the request's ``model`` must contain (e.g. ``haiku`` for the CLI's side requests)."""
    turn: Annotated[int | TurnRange | None, BeforeValidator(_parse_turn)] = None
    """Assistant messages already in the request: exact (``turn = 0``) or a range (``{min = 1, max = 3}``)."""
    probability: float = Field(default=1.0, gt=0, le=1)
    """Fire with this probability, drawn from hash(run seed, rule name, seed text) — deterministic."""
    times: int | None = Field(default=None, ge=1)
    """Fire at most this many times, then let later rules answer (e.g. 429 twice, then succeed)."""
    times_per: Literal["session", "server"] = "session"
    """Count ``times`` per session (``x-claude-code-session-id``, else first user message) or server-wide."""

    @field_validator("contains", "not_contains", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("regex")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from exc
        return v

    def turn_matches(self, turn: int) -> bool:
        if self.turn is None:
            return True
        if isinstance(self.turn, int):
            return turn == self.turn
        lo, hi = self.turn.min, self.turn.max
        return (lo is None or turn >= lo) and (hi is None or turn <= hi)


class Script(Spec):
    """A sim script: ordered rules, a default answer, default usage and how probabilities are seeded."""

    schema_version: Literal[1] = 1
    description: str = ""
    seed_from: Literal["first_message", "prompt", "session"] = "first_message"
    """What a probability draw hashes besides the run seed and the rule name: the first user message text
    (``first_message``, system-reminders included, so it differs across cells), the ``prompt`` only
    (same draw in every cell and repeat), or the ``session`` id header with the prompt (a fresh draw per
    session; ``ablate run`` fixes each session's id from the run's seed, the item and the attempt, so a run
    draws the same whatever its paths, date or scheduling)."""
    model: str | None = None
    """Model name reported in answers; default: the model the request asked for."""
    usage: Usage = Field(default_factory=Usage)
    """Usage reported by answers that set none."""
    default: Answer = Field(default_factory=lambda: Answer(text="OK."))
    """The answer when no rule matches."""
    rules: list[Rule] = Field(default_factory=list)
    """Ordered rules; the first one that matches (and fires) answers."""

    @field_validator("rules")
    @classmethod
    def _unique_names(cls, rules: list[Rule]) -> list[Rule]:
        first: dict[str, int] = {}
        for i, rule in enumerate(rules):
            if rule.name == "default":
                raise ValueError(f"rules.{i}: `default` is reserved for the default answer; rename the rule")
            if rule.name in first:
                raise ValueError(
                    f"rule name {rule.name!r} is used twice (rules.{first[rule.name]} and rules.{i}); "
                    "names must be unique"
                )
            first[rule.name] = i
        return rules


def load_script(path: Path) -> Script:
    """Read and validate a sim script (``.toml`` or ``.json``); raise a located ``SpecError`` if malformed."""
    return load_spec(Script, path)


def script_from_data(data: Any, source: str = "<script>") -> Script:
    """Validate an already-parsed script (a dict), naming ``source`` in errors."""
    return validate(Script, data, source)

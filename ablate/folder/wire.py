"""``wire/<item>.jsonl`` (docs/ARCHITECTURE.md#wire): one :class:`WireRecord` per ``/v1/messages`` exchange,
appended by ablate's forwarder outside every view; :func:`wire_check` compares it with the transcript."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import Field, ValidationError

from ablate.core.specs import Spec, require_schema

#: Version of each wire line; another version is skipped on read (and counted).
WIRE_SCHEMA_VERSION: Literal[1] = 1
WIRE = "wire"
#: The result flag of a session whose transcript disagrees with the wire.
WIRE_MISMATCH_FLAG = "transcript-differs-from-wire"
#: The result flag of a session whose relay ended while its CLI still ran: calls after that passed no
#: forwarder (they failed, or reached whatever the session put on the relay's port).
RELAY_DIED_FLAG = "relay-died"
#: How much earlier than its CLI a relay may end and still have ended with it: the PID namespace's teardown
#: takes milliseconds (measured: 2 ms), a killed relay leads its CLI by seconds (2.1-3.7 s, the CLI's own
#: retries of the refused calls).
RELAY_GRACE_S = 1.0

_append_lock = threading.Lock()


class WireRecord(Spec):
    """One request to the model and its answer."""

    schema_version: Literal[1] = WIRE_SCHEMA_VERSION
    item: str | None = None
    attempt: int | None = None
    session_id: str | None = None
    at: float
    """Unix time the answer ended."""
    duration_s: float | None = None
    status: int
    """The upstream's HTTP status."""
    model: str | None = None
    """The model the request asked for."""
    answer_model: str | None = None
    """The model the answer names."""
    stream: bool = False
    system_sha256: str | None = None
    """sha256 of the request's system prompt (canonical JSON, the per-session billing header blanked)."""
    tools_sha256: str | None = None
    """sha256 of the request's tool list (canonical JSON)."""
    context_sha256: str | None = None
    """sha256 of the context attached to the first message (instruction files, memory, listings; the
    per-session reminders such as the date and working directory left out): where the layers travel."""
    messages: int = 0
    usage: dict[str, int] = Field(default_factory=dict)
    """The answer's usage as the API sent it (``input_tokens``, ``output_tokens``, ``cache_*``)."""
    stop_reason: str | None = None
    answer: str | None = None
    """The answer's text blocks, joined."""
    error: str | None = None
    """The API error type when the answer was an error."""


def wire_path(root: Path, item: str) -> Path:
    return root / WIRE / f"{item}.jsonl"


def append_wire(path: Path, record: WireRecord) -> None:
    """Append one record (one ``write`` of a whole line, under a process-wide lock)."""
    line = orjson.dumps(record.model_dump(mode="json")) + b"\n"
    with _append_lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def read_wire(path: Path) -> Iterator[WireRecord]:
    """The records of one wire file; unreadable lines skipped, a newer version a located error."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return
    for lineno, line in enumerate(lines, 1):
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        version = data.get("schema_version") if isinstance(data, dict) else None
        if isinstance(version, int) and version > WIRE_SCHEMA_VERSION:  # an older line is skipped
            require_schema(
                data, f"{path}:{lineno}", WIRE_SCHEMA_VERSION, "wire", hint="read it with that ablate"
            )
        try:
            yield WireRecord.model_validate(data)
        except ValidationError:
            continue


#: The token counts a wire total and a transcript's ``total`` thread both carry.
WIRE_TOKENS = ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens")


class WireTotals(Spec):
    """A session's figures from the wire, and where its transcript disagreed."""

    requests: int = 0
    answered: int = 0
    """Requests the model answered (HTTP 200, no error): the model calls a transcript counts."""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float | None = None
    """The cost of those tokens at list prices (None: a model without a known price)."""
    answer: str | None = None
    """The last answer's text."""
    system_sha256: list[str] = Field(default_factory=list)
    """Each distinct system-prompt digest, first seen first."""
    tools_sha256: list[str] = Field(default_factory=list)
    """Each distinct tool-list digest, first seen first."""
    context_sha256: list[str] = Field(default_factory=list)
    """Each distinct first-message context digest, first seen first (the layers the session really carried)."""
    differs: list[str] = Field(default_factory=list)
    """What the transcript says otherwise (``output_tokens: transcript 12, wire 40``)."""


def wire_totals(records: Iterable[WireRecord]) -> WireTotals:
    from ablate.core.pricing import estimate_cost

    totals = WireTotals()
    digests: dict[str, dict[str, None]] = {"system": {}, "tools": {}, "context": {}}
    cost: float | None = 0.0
    for r in records:
        inp, out = r.usage.get("input_tokens", 0), r.usage.get("output_tokens", 0)
        written, read = (
            r.usage.get("cache_creation_input_tokens", 0),
            r.usage.get("cache_read_input_tokens", 0),
        )
        each = estimate_cost(
            r.answer_model or r.model or "", input_tokens=inp, output_tokens=out,
            cache_write_5m_tokens=written, cache_write_1h_tokens=0, cache_read_tokens=read,
        )  # fmt: skip
        cost = None if cost is None or each is None else cost + each
        totals.requests += 1
        totals.answered += r.status == 200 and r.error is None
        totals.input_tokens += inp
        totals.output_tokens += out
        totals.cache_creation_tokens += written
        totals.cache_read_tokens += read
        if r.answer is not None:
            totals.answer = r.answer
        for part, seen in digests.items():
            if digest := getattr(r, f"{part}_sha256"):
                seen[digest] = None
    for part, seen in digests.items():
        setattr(totals, f"{part}_sha256", list(seen))
    totals.cost_usd = round(cost, 9) if cost is not None else None
    return totals


def wire_flags(wire: WireTotals | None) -> list[str]:
    """A result's flag when its transcript disagrees with the wire: the session is excluded from the
    statistics (as every flagged one is) and named in the report, never counted with the wire's figures."""
    return [WIRE_MISMATCH_FLAG] if wire is not None and wire.differs else []


def relay_flags(relay_ended_at: float | None, cli_exited_at: float) -> list[str]:
    """A result's flag when the session's relay ended more than :data:`RELAY_GRACE_S` before its CLI."""
    died = relay_ended_at is not None and cli_exited_at - relay_ended_at > RELAY_GRACE_S
    return [RELAY_DIED_FLAG] if died else []


def wire_check(records: Iterable[WireRecord], transcript: dict[str, Any], answer: str | None) -> WireTotals:
    """The wire's totals with ``differs`` filled: each token count, the number of model calls and the final
    answer where the transcript (its ``total`` thread) or the CLI says otherwise."""
    totals = wire_totals(records)
    if totals.requests == 0:
        return totals
    for key in WIRE_TOKENS:
        said, seen = transcript.get(key), getattr(totals, key)
        if isinstance(said, int) and said != seen:
            totals.differs.append(f"{key}: transcript {said}, wire {seen}")
    calls = transcript.get("api_calls")
    if isinstance(calls, int) and calls != totals.answered:
        totals.differs.append(f"model calls: transcript {calls}, wire {totals.answered}")
    if answer is not None and totals.answer is not None and answer.strip() != totals.answer.strip():
        totals.differs.append("answer: the CLI's final answer is not the last answer on the wire")
    return totals

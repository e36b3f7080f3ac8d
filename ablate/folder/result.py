"""``results/<item>.json`` (docs/ARCHITECTURE.md#item-result): one :class:`ItemResult` per item, whoever
writes it (runner, ``recover``, ``merge``), read by :func:`read_result` (a located error for another schema)
and written by :func:`write_result` alone, atomically, under one replacement rule (:func:`should_replace`)."""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import Field, ValidationError, computed_field, model_validator

from ablate.core.errors import SpecError
from ablate.core.fsutil import atomic_write_bytes
from ablate.core.specs import Spec, problems_from_validation, read_json_object, require_schema
from ablate.folder.layout import ItemRecord, RunFolder
from ablate.folder.session import SessionMetrics, SessionWrites
from ablate.folder.wire import WireTotals

#: Version of the ``results/<item>.json`` format (1 was untyped; its results are rebuilt by ``ablate recover``).
RESULT_SCHEMA_VERSION: Literal[2] = 2

#: Outcomes that answer the item: a resume skips them. A timeout is an outcome of the task, not a glitch.
COMPLETE_STATUSES = frozenset({"completed", "max_turns", "prompt_too_long", "timeout"})

Status = Literal[
    "completed",
    "max_turns",
    "prompt_too_long",
    "timeout",
    "api_error",
    "killed",
    "no_transcript",
    "rate_limited",
    "error",
]
#: Every value of :data:`Status`.
STATUSES: frozenset[str] = frozenset(Status.__args__)  # type: ignore[attr-defined]


class ExitInfo(Spec):
    """How the CLI process ended (all None for a recovered result whose process was never observed)."""

    returncode: int | None = None
    """The CLI's exit status (negative: killed by a signal)."""
    duration_s: float | None = None
    """Wall-clock seconds from launch to exit."""
    timed_out: bool = False
    """True when ablate killed the session at ``--timeout``."""


class Recovery(Spec):
    """Present when the result was rebuilt from the transcript by ``ablate recover``."""

    recovered_fields: list[str] = Field(default_factory=list)
    """Fields taken from the transcript instead of the CLI's stdout."""
    estimated_fields: list[str] = Field(default_factory=list)
    """Fields computed by a rule or the price table rather than read from a record."""
    stdout_kind: str | None = None
    """What the stdout file was: missing, empty, corrupt, rate_limit_stub."""
    reconciliation: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Differences between the transcript's figures and a salvaged CLI document."""


class ItemResult(ItemRecord):
    """The outcome of one item's best attempt (docs/ARCHITECTURE.md, "The run folder")."""

    schema_version: Literal[2] = RESULT_SCHEMA_VERSION
    """Format version of this file."""
    attempt: int = Field(ge=1)
    """The attempt (``stdout/<item>.a<N>.json``) this result describes."""
    session_id: str
    """The session id of that attempt (names the transcript)."""
    status: Status
    """completed, max_turns, prompt_too_long, timeout (complete outcomes); api_error, killed, no_transcript,
    error (failed attempts: a resume re-runs them). ``rate_limited`` is never written. Any other value is a
    validation error."""
    started_at: str | None = None
    """ISO-8601 UTC launch time (None when unknown, e.g. recovered from a folder without a plan time)."""
    finished_at: str | None = None
    """ISO-8601 UTC end time."""
    env: str | None = None
    """The environment (slot) the attempt ran in."""
    cost_usd: float | None = None
    """Spend of the session (the transcript's last cost record, else the CLI's, else an estimate)."""
    turns: int | None = None
    """Turns (the CLI's ``num_turns`` when it covers the session, else the calibrated rule)."""
    pitfall_hits: dict[str, int] = Field(default_factory=dict)
    """Hits per pitfall id of the task."""
    exit: ExitInfo = Field(default_factory=ExitInfo)
    """How the process ended."""
    stdout: str | None = None
    """Path of the attempt's stdout file, relative to the run folder."""
    transcript: str | None = None
    """Path of the copied session JSONL, relative to the run folder (None: no transcript)."""
    error: str | None = None
    """The first line of the error, for failed attempts."""
    session: SessionMetrics | None = None
    """Everything mined from the transcript: the ``ablate mine --json`` object (its own ``schema_version``),
    with ``transcript`` relative to the run folder."""
    recovery: Recovery | None = None
    """Set when ``ablate recover`` rebuilt this result from the transcript."""
    flags: list[str] = Field(default_factory=list)
    """Provenance flags that exclude the item from comparisons (e.g. ``read-stripped-via-git``)."""
    writes: SessionWrites | None = None
    """What the session wrote outside its cell (isolation backend's report; discarded writes)."""
    wire: WireTotals | None = None
    """The session's requests as ablate's forwarder saw them (``wire/<item>.jsonl``): token totals, the last
    answer, the system prompts' digests, and where the transcript says otherwise (``differs``; then
    ``session``'s token totals and ``cost_usd`` are the wire's). None: the session was not sealed."""

    @model_validator(mode="before")
    @classmethod
    def _drop_stored_complete(cls, data: Any) -> Any:
        """Files carry ``complete`` (it is written for readers of the JSON); it is derived, never read back,
        and a stored value that contradicts ``status`` is an error."""
        if isinstance(data, dict) and "complete" in data:
            data = dict(data)
            problem = complete_mismatch(data.pop("complete"), data.get("status"))
            if problem:
                raise ValueError(problem)
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def complete(self) -> bool:
        """True when ``status`` answers the item (see ``COMPLETE_STATUSES``); derived, written for readers."""
        return self.status in COMPLETE_STATUSES


def complete_mismatch(stored: Any, status: Any) -> str | None:
    """Why a stored ``complete`` contradicts ``status`` (None when it agrees or the status is invalid anyway)."""
    if not isinstance(status, str) or status not in STATUSES:
        return None
    derived = status in COMPLETE_STATUSES
    if stored is derived:
        return None
    return (
        f"is {stored!r}, but status {status!r} makes it {derived!r} (complete is derived from status; "
        "remove the field or fix the status)"
    )


def result_rank(result: ItemResult | None) -> int:
    """0: no result; 1: a failed attempt (api_error, no transcript, killed); 2: a complete outcome."""
    if result is None:
        return 0
    return 2 if result.complete else 1


def should_replace(old: ItemResult | None, new: ItemResult) -> bool:
    """True when ``new`` may overwrite ``old``, the one replacement rule of the run folder: never with a worse
    result; the first complete outcome stands (a resume or merge never swaps one valid answer for another); a
    failure may replace an older failure, unless a recovered one would replace one built from a valid stdout;
    a rate-limited attempt never becomes a result."""
    if new.status == "rate_limited":
        return False
    old_rank, new_rank = result_rank(old), result_rank(new)
    if new_rank != old_rank:
        return new_rank > old_rank
    if new_rank == 2:
        return False
    assert old is not None
    return not (new.recovery is not None and old.recovery is None and old.status != "no_transcript")


def parse_result(data: Any, source: str) -> ItemResult:
    """Validate a result document; a document of another schema or shape is a located :class:`SpecError`."""
    if not isinstance(data, dict):
        raise SpecError.single(source, "", "expected a JSON object")
    require_schema(
        data,
        source,
        RESULT_SCHEMA_VERSION,
        "result",
        hint="results of schema 1 are rebuilt from their transcripts by `ablate recover`; a newer schema "
        "needs a newer ablate",
    )
    if "complete" in data:
        problem = complete_mismatch(data["complete"], data.get("status"))
        if problem:
            raise SpecError.single(source, "complete", problem)
    try:
        return ItemResult.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problems_from_validation(source, exc)) from exc


def read_result(folder: RunFolder, item: str) -> ItemResult | None:
    """The item's result, or None when there is none. An unreadable or foreign file is a located error."""
    path = folder.result_path(item)
    data = read_json_object(path)
    return None if data is None else parse_result(data, str(path))


def iter_results(folder: RunFolder) -> list[ItemResult]:
    """Every result of the folder, in plan order (items without a result are skipped)."""
    return [res for it in folder.read_plan() if (res := read_result(folder, it.item)) is not None]


def write_result(folder: RunFolder, result: ItemResult) -> bool:
    """Write ``result`` atomically unless the replacement rule forbids it; return whether it was written
    (write errors propagate: a result that cannot be written must never be mistaken for one that was)."""
    if not should_replace(read_result(folder, result.item), result):
        return False
    path = folder.result_path(result.item)
    data = orjson.dumps(result.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
    atomic_write_bytes(path, data + b"\n")
    return True

"""The CLI's own stdout (``--output-format json``) and the rate-limit messages it and the transcript carry.

The stdout file is a convenience, never the ground truth (docs/ARCHITECTURE.md#mining): it can be missing, empty (a killed
run), corrupt (two writers on one file, docs/CLAUDE-CODE.md#shared-output), or a rate-limit stub. :func:`parse_cli_output`
classifies it and salvages every complete JSON document it holds."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

CliOutputKind = Literal["missing", "empty", "corrupt", "rate_limit_stub", "valid"]

#: Larger stdout files are not a single `--output-format json` result; read only this much.
_MAX_STDOUT_BYTES = 64 << 20

_LIMIT_RE = re.compile(
    r"hit your (?:usage |session |weekly )?limit|usage limit reached|(?:5-hour|weekly|session) limit reached",
    re.IGNORECASE,
)
_EPOCH_RE = re.compile(r"limit reached\|(\d{9,11})", re.IGNORECASE)
_RESETS_RE = re.compile(r"resets?\s+(?:at\s+)?(?P<when>[^()\n·|]+?)\s*(?:\((?P<tz>[^)]+)\))?\s*(?:$|[.\n·|])")
_CLOCK_RE = re.compile(r"(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>am|pm)?$", re.IGNORECASE)
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
    )
}
_DATE_RE = re.compile(
    r"(?P<mon>[A-Za-z]{3})[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s*(?:at\s+)?(?P<rest>.*)$"
)


def is_rate_limit_message(text: str) -> bool:
    """True for the subscription "hit your limit · resets …" / "usage limit reached|<epoch>" messages."""
    return bool(_LIMIT_RE.search(text))


def parse_reset_time(text: str, *, now: datetime | None = None) -> datetime | None:
    """The reset time named in a rate-limit message, as an aware datetime, or ``None``: ``usage limit
    reached|<epoch>``, ``resets 5pm``, ``resets 5:30pm (Europe/Paris)``, ``resets 17:00``, ``resets Dec 1, 9am
    (UTC)``. A clock time without a date is the next such time after ``now``, in the named zone, else UTC."""
    if m := _EPOCH_RE.search(text):
        return datetime.fromtimestamp(int(m.group(1)), tz=UTC)
    m = _RESETS_RE.search(text)
    if not m:
        return None
    tz: tzinfo = UTC
    if m.group("tz"):
        try:
            tz = ZoneInfo(m.group("tz").strip())
        except (ZoneInfoNotFoundError, ValueError):
            tz = UTC
    ref = (now or datetime.now(UTC)).astimezone(tz)
    when = m.group("when").strip()
    day: date | None = None
    dm = _DATE_RE.match(when)
    if dm and dm.group("mon").lower() in _MONTHS:
        try:
            day = date(ref.year, _MONTHS[dm.group("mon").lower()], int(dm.group("day")))
        except ValueError:
            return None
        when = dm.group("rest").strip() or "0:00"
    cm = _CLOCK_RE.match(when)
    if not cm:
        return None
    hour, minute = int(cm.group("h")), int(cm.group("m") or 0)
    ampm = (cm.group("ampm") or "").lower()
    if ampm == "pm" and hour < 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        return None
    if day is not None:
        out = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
        if out < ref - timedelta(days=180):  # "Jan 2" seen in late December
            out = out.replace(year=out.year + 1)
        return out
    out = ref.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if out <= ref:
        out += timedelta(days=1)
    return out


@dataclass(frozen=True)
class CliOutput:
    """What one stdout file of ``claude -p --output-format json`` turned out to hold."""

    kind: CliOutputKind
    path: Path
    #: The result document: the whole file when valid; for a corrupt file, the last complete salvaged one.
    data: dict[str, Any] | None = None
    #: Every complete JSON document found in the file (two for a two-writer file written with ``>>``).
    documents: tuple[dict[str, Any], ...] = ()
    #: Why the file is not valid (decoder message), when it is not.
    error: str | None = None
    rate_limit_message: str | None = None
    rate_limit_reset: datetime | None = None

    def for_session(self, session_id: str | None) -> dict[str, Any] | None:
        """The document belonging to ``session_id``: ``data`` when valid, else a salvaged match, else None."""
        if self.kind == "valid":
            return self.data
        for doc in reversed(self.documents):
            if session_id is not None and doc.get("session_id") == session_id:
                found: dict[str, Any] = doc
                return found
        return None


def _salvage(text: str) -> tuple[list[dict[str, Any]], bool]:
    """Every complete JSON object in ``text``, and whether anything else (garbage, a torn tail) was left."""
    decoder = json.JSONDecoder()
    docs: list[dict[str, Any]] = []
    pos, n, leftover = 0, len(text), False
    while pos < n:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            leftover = True
            nxt = text.find("{", pos + 1)
            if nxt < 0:
                break
            pos = nxt
            continue
        if isinstance(obj, dict):
            docs.append(obj)
        else:
            leftover = True
        pos = end
    return docs, leftover


def parse_cli_output(path: Path) -> CliOutput:
    """Classify a stdout file: missing (or unreadable), empty, corrupt (two writers, torn), rate-limit stub, or
    valid; never raises for the file's content."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(_MAX_STDOUT_BYTES)
    except OSError as exc:
        return CliOutput("missing", path, error=str(exc))
    if not raw.strip():
        return CliOutput("empty", path)
    obj: Any = None
    error: str | None = None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        error = str(exc)
    if isinstance(obj, dict) and obj.get("type") == "result":
        text = obj.get("result")
        if obj.get("is_error") is True and isinstance(text, str) and is_rate_limit_message(text):
            return CliOutput(
                "rate_limit_stub",
                path,
                data=obj,
                documents=(obj,),
                rate_limit_message=text,
                rate_limit_reset=parse_reset_time(text),
            )
        return CliOutput("valid", path, data=obj, documents=(obj,))
    text = raw.decode("utf-8", errors="replace")
    if obj is None and is_rate_limit_message(text) and "{" not in text:
        msg = text.strip()
        return CliOutput(
            "rate_limit_stub", path, rate_limit_message=msg, rate_limit_reset=parse_reset_time(msg)
        )
    docs, _ = _salvage(text)
    results = tuple(d for d in docs if d.get("type") == "result")
    return CliOutput(
        "corrupt",
        path,
        data=results[-1] if results else None,
        documents=results,
        error=error or "not a `claude -p --output-format json` result document",
    )

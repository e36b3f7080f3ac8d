"""What a run's (or probe's) sessions wrote outside their cells, one line per path for the whole run."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


def writes_lines(writes: Iterable[Mapping[str, Any]], total: int, *, noun: str = "sessions") -> list[str]:
    """One line per path the sessions wrote outside their cells (the most-written first), then one per path the
    ``links`` fence refused, from each session's ``writes`` record (:mod:`ablate.isolate.writes`)."""
    records = list(writes)
    groups: dict[str, _Group] = {}
    for at, record in enumerate(records):
        for area in (record.get("outside_cell") or {}).values():
            for path, n in (area.get("by_folder") or {}).items():
                group = groups.setdefault(id_pattern(str(path)), _Group())
                group.sessions.add(at)
                group.names.add(str(path))
                group.files += int(n)
    lines = []
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1].sessions), -kv[1].files, kv[0]))
    for pattern, group in ordered:
        sessions, files = len(group.sessions), group.files
        count = f"{files} file{'' if files == 1 else 's'} in all"
        if len(group.names) > 1:
            shown, count = pattern, f"{len(group.names)} names differing only by an id, {count}"
        else:
            shown = next(iter(group.names))
        lines.append(f"{sessions} of {max(total, sessions)} {noun} wrote {shown} ({count}) — discarded")
    refused = denied_by_path(records)
    for path, tried in sorted(refused.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        n = len(tried)
        lines.append(f"{n} of {max(total, n)} {noun} were refused writing {path} — the fence held")
    return lines


@dataclass
class _Group:
    """Paths that differ only by an id: the sessions that wrote one, the names, the files written."""

    sessions: set[int] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    files: int = 0


#: Ids in per-session names, most specific first: a uuid, a long hex string (a hash), a run of digits long
#: enough to be a pid or a timestamp (short numbers such as ``v2`` stay).
_IDS = (
    (re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"), "<uuid>"),
    (
        re.compile(
            r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}(?![0-9A-Za-z])"
        ),
        "<hex>",
    ),
    (re.compile(r"(?<![0-9])[0-9]{4,}(?![0-9])"), "<n>"),
)


def id_pattern(path: str) -> str:
    """``path`` with every id in it replaced by its kind (``.idle-since-<uuid>``, ``tmp.<n>``): paths with
    the same pattern differ only by an id and are summarised as one line."""
    for regex, name in _IDS:
        path = regex.sub(name, path)
    return path


def denied_by_path(writes: Iterable[Mapping[str, Any]]) -> dict[str, list[int]]:
    """Each path the ``links`` fence refused a write to → the positions of the sessions that tried."""
    out: dict[str, list[int]] = {}
    for n, record in enumerate(writes):
        for denied in record.get("denied") or []:
            sessions = out.setdefault(str(denied["path"]), [])
            if n not in sessions:
                sessions.append(n)
    return out

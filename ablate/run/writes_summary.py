"""What a run's (or probe's) sessions wrote outside their cells, one line per path for the whole run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def writes_lines(writes: Iterable[Mapping[str, Any]], total: int, *, noun: str = "sessions") -> list[str]:
    """From each session's ``writes`` record (:mod:`ablate.isolate.writes`), one line per path written
    outside the cells: "12 of 12 sessions wrote ~/.claude/data (14 files in all) — discarded" (the most-written
    first); then one per path the ``links`` fence refused: "3 of 12 sessions were refused writing
    ~/.gitconfig — the fence held"."""
    records = list(writes)
    by_path: dict[str, list[int]] = {}
    for record in records:
        for area in (record.get("outside_cell") or {}).values():
            for path, n in (area.get("by_folder") or {}).items():
                entry = by_path.setdefault(str(path), [0, 0])
                entry[0] += 1
                entry[1] += int(n)
    lines = []
    for path, (sessions, files) in sorted(by_path.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0])):
        count = f"{files} file{'' if files == 1 else 's'} in all"
        lines.append(f"{sessions} of {max(total, sessions)} {noun} wrote {path} ({count}) — discarded")
    refused = denied_by_path(records)
    for path, tried in sorted(refused.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        n = len(tried)
        lines.append(f"{n} of {max(total, n)} {noun} were refused writing {path} — the fence held")
    return lines


def denied_by_path(writes: Iterable[Mapping[str, Any]]) -> dict[str, list[int]]:
    """``links`` under a write fence: each path the fence refused a write to → the positions (in
    ``writes``) of the sessions that tried."""
    out: dict[str, list[int]] = {}
    for n, record in enumerate(writes):
        for denied in record.get("denied") or []:
            sessions = out.setdefault(str(denied["path"]), [])
            if n not in sessions:
                sessions.append(n)
    return out

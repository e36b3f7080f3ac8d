"""What a run's (or probe's) sessions wrote outside their cells, one line per path for the whole run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def writes_lines(writes: Iterable[Mapping[str, Any]], total: int, *, noun: str = "sessions") -> list[str]:
    """From each session's ``writes`` record (:mod:`ablate.isolate.writes`), one line per path written
    outside the cells: "12 of 12 sessions wrote ~/.claude/data (14 files in all) — discarded" (the most-written first)."""
    by_path: dict[str, list[int]] = {}
    for record in writes:
        for area in (record.get("outside_cell") or {}).values():
            for path, n in (area.get("by_folder") or {}).items():
                entry = by_path.setdefault(str(path), [0, 0])
                entry[0] += 1
                entry[1] += int(n)
    lines = []
    for path, (sessions, files) in sorted(by_path.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0])):
        count = f"{files} file{'' if files == 1 else 's'} in all"
        lines.append(f"{sessions} of {max(total, sessions)} {noun} wrote {path} ({count}) — discarded")
    return lines

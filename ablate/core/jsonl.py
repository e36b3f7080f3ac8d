"""JSON Lines and JSON values: reading a file of one value a line (blank lines passed over, an unreadable line
as ``None``), and changing every string of a value."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson


def json_lines(path: Path) -> Iterator[Any]:
    """Stream the values of ``path``'s lines, in order. A line that is not JSON (a torn last line of a file
    still being written) yields ``None``: callers that count bad lines count it, the others pass over it."""
    with path.open("rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:
                yield None


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` (JSON data) with ``change`` applied to every string in it; keys are left as they are."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [map_strings(v, change) for v in value]
    if isinstance(value, dict):
        return {k: map_strings(v, change) for k, v in value.items()}
    return value


def json_strings(*values: Any) -> list[str]:
    """Every string in JSON data ``values``, in order (dict values and list items; keys left out)."""
    out: list[str] = []
    stack = list(reversed(values))
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict | list):
            stack.extend(reversed(v.values() if isinstance(v, dict) else v))
    return out

"""Reading a JSON Lines file: one value a line, blank lines passed over, an unreadable line as ``None``."""

from __future__ import annotations

from collections.abc import Iterator
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

"""Claude Code's project-folder slug (docs/CLAUDE-CODE.md#slug): ``$CLAUDE_CONFIG_DIR/projects/<slug>/``.

Every non-``[A-Za-z0-9]`` UTF-16 code unit of the real path becomes ``-``; a slug over 200 units is cut to
200 and suffixed with ``-`` + base36 of the absolute Java ``String.hashCode`` of the *original* path."""

from __future__ import annotations

import os
from pathlib import Path

_MAX = 200
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-le", errors="surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def java_string_hash(text: str) -> int:
    """Java/JavaScript ``String.hashCode`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    for unit in _utf16_units(text):
        h = (h * 31 + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def base36(n: int) -> str:
    if n == 0:
        return "0"
    out = []
    while n:
        n, r = divmod(n, 36)
        out.append(_DIGITS[r])
    return "".join(reversed(out))


def slug(path: str) -> str:
    """The project slug of an (already resolved) absolute path string."""
    units = _utf16_units(path)
    s = "".join(chr(u) if (u < 128 and chr(u).isalnum()) else "-" for u in units)
    if len(s) <= _MAX:
        return s
    return s[:_MAX] + "-" + base36(abs(java_string_hash(path)))


def slug_for(path: Path) -> str:
    """The slug of ``path`` after resolving symlinks, as the CLI does (docs/CLAUDE-CODE.md#slug-symlink)."""
    return slug(os.path.realpath(path))

"""How the CLI's git status block reads once repo-layer files are hidden from it."""

from __future__ import annotations

from collections.abc import Sequence

_STATUS = "\nStatus:\n"


def hide_status_lines(text: str, hidden: Sequence[str]) -> str:
    """``text`` with the lines of the CLI's git status block that name a ``hidden`` path (or a folder of one)
    removed, "(clean)" when none is left: how the user's status reads once repo-layer files are hidden."""
    at = text.find(_STATUS)
    if at < 0 or not hidden:
        return text
    body_start = at + len(_STATUS)
    end = text.find("\n\n", body_start)
    end = len(text) if end < 0 else end
    roots = [h.strip("/") for h in hidden]

    def named(line: str) -> bool:
        path = line[3:].strip().strip('"')
        path = path.split(" -> ")[-1].rstrip("/")
        return any(path == r or path.startswith(r + "/") or r.startswith(path + "/") for r in roots)

    lines = text[body_start:end].split("\n")
    kept = [ln for ln in lines if not named(ln)]
    if kept == lines:
        return text
    return text[:body_start] + ("\n".join(kept) if kept else "(clean)") + text[end:]

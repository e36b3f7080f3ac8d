"""Paths into an ordinary user's held view (``/proc/<pid>/root/<path>``,
:func:`ablate.isolate.namespace.held_view`).

Reads and writes work through ``/proc/<pid>/root``; resolving a path does not (it reads as ``/``, so
``os.path.realpath`` and git land on the host's empty mount point): hence :func:`real_path` and
:func:`view_command`. Any other path is left to the ordinary functions (as root, the view is ablate's own).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ablate.isolate import nsexec

_HELD = re.compile(r"^(/proc/(\d+)/root)(/.*)?$")
#: Links followed while resolving a path before giving up (the kernel's own limit).
MAX_LINKS = 40


def split_view(path: str | Path) -> tuple[int, str] | None:
    """(holder pid, the path as the view has it) for a path through ``/proc/<pid>/root``, else None."""
    found = _HELD.match(os.path.normpath(str(path)))
    if found is None:
        return None
    return int(found.group(2)), found.group(3) or "/"


def as_seen_inside(path: str | Path) -> str:
    """The path as the view has it (a path through ``/proc/<pid>/root`` without that prefix), else itself."""
    held = split_view(path)
    return held[1] if held is not None else str(path)


def real_path(path: str | Path) -> str:
    """``os.path.realpath(path)``; for a path through ``/proc/<pid>/root``, resolved inside that view."""
    held = _HELD.match(os.path.normpath(str(path)))
    if held is None:
        return os.path.realpath(path)
    root = held.group(1)
    todo = [p for p in (held.group(3) or "").split("/") if p]
    done: list[str] = []
    links = 0
    while todo:
        part = todo.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        here = root + "/" + "/".join([*done, part])
        if not os.path.islink(here):
            done.append(part)
            continue
        links += 1
        if links > MAX_LINKS:  # a loop: left unresolved, as realpath does (reading it then fails)
            return "/".join([here, *todo])
        target = os.readlink(here)
        if target.startswith("/"):
            done = []
        todo = [p for p in target.split("/") if p] + todo
    return root + "/" + "/".join(done) if done else root


def view_command(cwd: Path, argv: list[str]) -> tuple[list[str], Path]:
    """(argv, cwd) that run ``argv`` in ``cwd``, inside the holder's namespaces for a ``/proc/<pid>/root``."""
    held = split_view(cwd)
    if held is None:
        return argv, cwd
    pid, inner = held
    join = [sys.executable, "-I", str(Path(nsexec.__file__).resolve()), "--join", str(pid), inner, "--"]
    return [*join, *argv], Path("/")

"""What a session wrote outside its cell, read from its upper folders (``namespace``) before they are
discarded: each holds exactly what the session created, changed or deleted (whiteouts: devices 0/0). Beyond
the task's work and the CLI's own folders, it is what would have reached the user's machine unisolated.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Protocol

from ablate.core.fdtree import walk_tree
from ablate.folder.session import AreaWrites, SessionWrites
from ablate.isolate.shadow_home import ACCOUNT, WRITTEN_DIRS

#: Config-dir entries the CLI itself writes in every session (not reported as writes outside the cell).
CLI_CONFIG = (*WRITTEN_DIRS, ACCOUNT, "plugins/store", "telemetry")


class _Uppers(Protocol):
    def upper(self, area: str) -> Path: ...
    def shown_as(self) -> dict[str, Path]: ...


def scan_upper(
    upper: Path, shown_as: Path, *, label: str, depth: int = 1, skip: tuple[str, ...] = ()
) -> AreaWrites:
    """Count the files (and whiteouts) in ``upper``, grouped by their first ``depth`` path components."""
    files = size = deleted = 0
    by_folder: dict[str, int] = {}
    if upper.is_dir():
        skipped = {s.strip("/") for s in skip}
        for entry in walk_tree(upper, exclude=skipped):  # any depth; a folder it cannot read: a located error
            if entry.is_dir:
                continue
            if stat.S_ISCHR(entry.st.st_mode) and entry.st.st_rdev == 0:  # an overlay whiteout
                deleted += 1
            else:
                files += 1
                size += entry.st.st_size if stat.S_ISREG(entry.st.st_mode) else 0
            parts = entry.rel.split("/", depth)
            top = "/".join(parts[:depth]) if len(parts) > depth else entry.rel
            key = f"{label}/{top}"
            by_folder[key] = by_folder.get(key, 0) + 1
    by_folder = dict(sorted(by_folder.items()))
    return AreaWrites(path=str(shown_as), files=files, bytes=size, deleted=deleted, by_folder=by_folder)


def session_writes(env: _Uppers) -> SessionWrites:
    """Scan every upper folder of a session's view; ``outside_cell``: the areas outside the cell it touched."""
    shown = env.shown_as()
    home = shown["home"]
    areas: dict[str, AreaWrites] = {}
    outside: dict[str, AreaWrites] = {}
    for area, real in shown.items():
        upper = env.upper(area)
        areas[area] = scan_upper(upper, real, label=_label(real, home))
    outside["home"] = areas["home"]
    outside["config"] = scan_upper(
        env.upper("config"), shown["config"], label=_label(shown["config"], home), depth=2, skip=CLI_CONFIG
    )
    uid = os.getuid()
    outside["tmp"] = scan_upper(
        env.upper("tmp"), shown["tmp"], label="/tmp", skip=(f"claude-{uid}", "cc-socks")
    )
    return SessionWrites(areas=areas, outside_cell={k: v for k, v in outside.items() if v.files or v.deleted})


def _label(path: Path, home: Path) -> str:
    if path == home:
        return "~"
    if str(path).startswith(str(home) + os.sep):
        return "~/" + str(path.relative_to(home))
    return str(path)

"""Following symlinks the way the CLI does (docs/ARCHITECTURE.md#links-in-setups): a link resolves against its
own folder, through chains; a missing target is *dangling* (the CLI reads nothing there); a loop or an
unreadable target is bad input named by the link and where it points, never a traceback."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ablate.core.errors import UsageError

HINT = "fix or remove the link (ablate reads a setup through its links, as the CLI does)"


def points_to(path: Path | str) -> str:
    """What the link at ``path`` says (``readlink``), or its resolved path when it is no link itself."""
    try:
        return os.readlink(path)
    except OSError:
        return os.path.realpath(path)


def link_error(path: Path | str, exc: OSError) -> UsageError:
    """The located error for an entry that cannot be followed: which link, where it points, what is wrong."""
    if exc.errno == errno.ELOOP:
        why = "a symlink loop"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why = "points to a place ablate may not read"
    else:
        why = f"cannot be read ({exc.strerror or exc})"
    return UsageError(f"{path}: {why} (it points to {points_to(path)})", hint=HINT)


def follow(path: Path | str) -> os.stat_result | None:
    """``stat`` of what ``path`` resolves to; None: dangling; a loop or unreadable target: ``UsageError``."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return None
        raise
    except OSError as exc:
        raise link_error(path, exc) from None


def is_dir(st: os.stat_result) -> bool:
    return stat.S_ISDIR(st.st_mode)


def dangling_target(path: Path | str) -> str:
    """The absolute path a dangling link names, resolved against the link's own folder."""
    return os.path.realpath(path)


def loop_error(path: Path | str) -> UsageError:
    """A link to a folder that contains it (walking it would never end)."""
    return UsageError(
        f"{path}: a symlink loop (it points to {points_to(path)}, a folder that contains it)", hint=HINT
    )


def enter(
    path: Path, st: os.stat_result, above: frozenset[tuple[int, int]], via: Path
) -> tuple[list[str], frozenset[tuple[int, int]]]:
    """Enter the folder ``path`` on a walk: its sorted names and the folders above its entries; one already
    in ``above`` is a loop, named by ``via`` (the last link on the way)."""
    ident = (st.st_dev, st.st_ino)
    if ident in above:
        raise loop_error(via)
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise link_error(path, exc) from None
    return names, above | {ident}

"""ablate's own work folders in the temporary directory: made with an owner file (the pid and start time of
their process), removed whatever their modes, and swept at the start of every command once their owner is
gone (a run killed with SIGKILL leaves its folders, and as root its mounts, behind; a mount point ablate
holds has an owner file too, and is unmounted by the same sweep)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

from ablate.core.fdtree import delete_tree
from ablate.core.mounts import MOUNTINFO, mount_points, unmount_all_under

#: The owner file inside every work folder ablate makes.
OWNER = ".ablate-owner"
#: The forwarder's folder (its socket and seccomp filter), one per ablate process that runs sessions.
FORWARDER_PREFIX = "ablate-fwd-"
#: Folders of the temporary directory that are ablate's work folders (the cache is not one: it is reused).
SWEPT_PREFIXES = ("ablate-probe-", "ablate-grade-", "ablate-mpl-", "ablate-doctor-", FORWARDER_PREFIX)
#: Folders holding one work folder per run (``ablate-envs/<run-id>``).
SWEPT_PARENTS = ("ablate-envs",)


_PROC = Path("/proc/self/stat").exists()


def _start_token(pid: int) -> str | None:
    """When process ``pid`` started (None: no such process), so a reused pid is not taken for the owner: the
    start time in clock ticks from ``/proc`` (no import: every command sweeps), else psutil's."""
    if _PROC:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
        except OSError:
            return None
        return stat.rsplit(")", 1)[1].split()[19]  # field 22, starttime (fields from 3 after the name)
    import psutil

    try:
        return f"{psutil.Process(pid).create_time():.3f}"
    except psutil.Error:
        return None


def _me() -> str:
    return f"{os.getpid()} {_start_token(os.getpid())}\n"


def mark_owned(folder: Path) -> None:
    """Write the owner file: this process owns ``folder`` until it exits."""
    (folder / OWNER).write_text(_me(), encoding="utf-8")


def make_work_dir(prefix: str, parent: Path | None = None) -> Path:
    """A fresh private folder (``tempfile.mkdtemp``) marked as this process's."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    mark_owned(folder)
    return folder


def owner_alive(folder: Path) -> bool:
    """Whether the process that made ``folder`` still runs (no readable owner file: alive, not ours)."""
    return _alive(folder / OWNER)


def _alive(owner: Path) -> bool:
    try:
        pid_text, started = owner.read_text(encoding="utf-8").split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return True
    return _start_token(pid) == started


def mount_owner(point: Path) -> Path:
    """The owner file of a mount point ablate holds in its own namespace (``<point>.ablate-owner`` beside it)."""
    return point.parent / (point.name + OWNER)


def own_mount(point: Path) -> None:
    """Mark ``point``, about to be mounted, as this process's until :func:`disown_mount`: a runner killed
    meanwhile (even with kill -9) leaves it mounted, and the next command's sweep unmounts it."""
    mount_owner(point).write_text(_me(), encoding="utf-8")


def disown_mount(point: Path) -> None:
    mount_owner(point).unlink(missing_ok=True)


def unmount_orphans(mountinfo: str = MOUNTINFO) -> list[str]:
    """Unmount every mount point marked by :func:`own_mount` whose owner is gone, wherever it is, and all
    under it; return what was unmounted. Root's only: an ordinary user's mounts live in a user namespace of
    their own and go with it (and other users' mounts in the table are not theirs to inspect)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return []
    done: list[str] = []
    for point in sorted(set(mount_points(mountinfo))):
        owner = mount_owner(Path(point))
        try:
            if not owner.is_file() or _alive(owner):
                continue
        except OSError:  # not readable, or vanished meanwhile: not ours to judge
            continue
        done.extend(unmount_all_under(point))
        owner.unlink(missing_ok=True)
    return done


def remove_tree(folder: Path) -> None:
    """:func:`ablate.core.fdtree.delete_tree`, mounts under it unmounted first (as root), errors ignored."""
    unmount_all_under(str(folder))
    with contextlib.suppress(OSError):
        delete_tree(folder)


def sweep(tmp: Path | None = None) -> list[Path]:
    """:func:`unmount_orphans`, then remove (and return) ablate's work folders whose owner is gone."""
    unmount_orphans()
    base = Path(tmp or tempfile.gettempdir())
    candidates: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    for entry in entries:
        name = entry.name
        if name.startswith(SWEPT_PREFIXES):
            candidates.append(entry)
        elif name in SWEPT_PARENTS and entry.is_dir() and not entry.is_symlink():
            with contextlib.suppress(OSError):
                candidates.extend(entry.iterdir())
    removed = []
    for folder in candidates:
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not (folder / OWNER).is_file() or owner_alive(folder):
            continue
        remove_tree(folder)
        removed.append(folder)
    for name in SWEPT_PARENTS:
        with contextlib.suppress(OSError):
            (base / name).rmdir()  # only when empty
    legacy = base / f"ablate-cache-{os.getuid()}"  # where ablate kept its caches before ~/.cache/ablate
    with contextlib.suppress(OSError):
        if legacy.is_dir() and not legacy.is_symlink() and legacy.stat().st_uid == os.getuid():
            remove_tree(legacy)
            removed.append(legacy)
    return removed

"""Mount points in this process's mount namespace, and unmounting them (Linux; standard library only).

As root ablate mounts a session's view in its own namespace while it seeds or grades it; removing a work
folder, cleaning a backend's work root and the sweep of a killed runner's views unmount what is left there
(an ordinary user's views live in namespaces of their own and go with them)."""

from __future__ import annotations

import os
import sys

MNT_DETACH = 2
MOUNTINFO = "/proc/self/mountinfo"


def mount_points(mountinfo: str = MOUNTINFO) -> list[str]:
    """Every mount point of this namespace (``[]`` where there is no ``/proc``)."""
    try:
        with open(mountinfo, encoding="utf-8") as fh:
            # field 5 is the mount point, with spaces and the like octal-escaped
            return [
                line.split(" ")[4].encode().decode("unicode_escape") for line in fh if line.count(" ") > 4
            ]
    except OSError:
        return []


def mounts_under(root: str, mountinfo: str = MOUNTINFO) -> list[str]:
    """Mount points at or below ``root`` in this process's mount namespace, deepest first."""
    prefix = os.path.realpath(root).rstrip("/") + "/"
    found = {p for p in mount_points(mountinfo) if (p + "/").startswith(prefix)}
    return sorted(found, key=lambda p: p.count("/"), reverse=True)


def unmount(target: str) -> None:
    """Unmount ``target`` (lazily when it is still busy); OSError when neither works."""
    import ctypes  # here: every command sweeps (ablate.core.tempwork), and most find nothing to unmount

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(target.encode(), 0) != 0 and libc.umount2(target.encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unmount {target}: {os.strerror(err)}")


def unmount_all_under(root: str) -> list[str]:
    """Unmount (as root, on Linux) what is mounted at or below ``root``, deepest first; return what was."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return []
    done = []
    for point in mounts_under(root):
        try:
            unmount(point)
        except OSError:
            continue
        done.append(point)
    return done

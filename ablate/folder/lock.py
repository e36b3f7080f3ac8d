"""The run folder's lock: one process works on a run folder at a time (runner, resume, recover, merge)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket

from ablate.core.errors import RunFolderError
from ablate.folder.layout import LOCK, RunFolder, utcnow


class RunLock:
    """An exclusive ``flock`` on ``<run>/.lock``: released by the kernel when the holder dies (even kill -9)."""

    def __init__(self, folder: RunFolder) -> None:
        self.path = folder.root / LOCK
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            with contextlib.suppress(OSError):
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise RunFolderError(
                f"{self.path.parent}: another `ablate run` is working on this run folder"
                + (f" ({holder})" if holder else ""),
                hint="wait for it to finish or stop it (Ctrl-C); two runners on one folder would corrupt it",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {utcnow()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(folder: RunFolder) -> str | None:
    """Who holds the folder's lock (``pid 12 on host since ...``), or None when no one does."""
    try:
        fd = os.open(folder.root / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "a process"
    finally:
        os.close(fd)

"""Run one subprocess and return a typed result; never raise on a non-zero exit. A timeout kills the whole
process tree (psutil); a process that left the tree (a ``setsid … &`` double fork) still carries the
session's *tag* in its environment (``ABLATE_TAG``), and :func:`kill_tagged` kills every process that does."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil


@dataclass(frozen=True)
class ExecResult:
    """What a finished (or killed) process left behind."""

    returncode: int
    """The exit status; negative for a signal (POSIX convention), as ``subprocess`` reports it."""
    duration_s: float
    timed_out: bool
    stdout_path: Path | None
    """Where stdout was written (one file per attempt, never shared), or None when captured in memory."""
    stdout: bytes
    """Captured stdout when no ``stdout_path`` was given, else empty."""
    stderr_tail: str
    """The last few KB of stderr, decoded leniently."""
    pid: int
    exited_at: float = 0.0
    """``time.monotonic()`` when the process itself ended (before its pipes were drained)."""
    limit: str | None = None
    """The limit the process went over, for which it was stopped (``stdout``, ``stderr``, or what ``watch``
    said), else None."""


def kill_tree(pid: int, *, grace_s: float = 3.0) -> None:
    """Terminate ``pid`` and all its descendants: SIGTERM first, SIGKILL after ``grace_s``."""
    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    try:
        procs = [*parent.children(recursive=True), parent]
    except psutil.NoSuchProcess:
        procs = [parent]
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)


#: The environment variable that marks every process a session started (see :func:`kill_tagged`).
TAG_VAR = "ABLATE_TAG"


def tagged_pids(prefix: str) -> list[int]:
    """Pids of the processes whose environment holds ``ABLATE_TAG=<prefix>…`` (Linux ``/proc``; else none)."""
    needle = f"{TAG_VAR}={prefix}".encode()
    me = os.getpid()
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:  # gone, or not ours to read
            continue
        if any(var.startswith(needle) for var in environ.split(b"\0")):
            out.append(int(name))
    return out


def kill_tagged(prefix: str, *, quiet_scans: int = 3, max_rounds: int = 50) -> int:
    """SIGKILL every process tagged ``prefix…``; return how many were killed. One empty scan proves nothing
    (a process between fork and exec may show no readable environment for an instant, and a fork may race the
    kill), so scans repeat 10 ms apart until ``quiet_scans`` in a row find nothing (at most ``max_rounds``)."""
    killed = quiet = 0
    for _ in range(max_rounds):
        pids = tagged_pids(prefix)
        if not pids:
            quiet += 1
            if quiet >= quiet_scans:
                break
        else:
            quiet = 0
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
        time.sleep(0.01)
    return killed


#: Most of a session's stdout kept (a ``--output-format json`` result is a few KB); the rest is dropped and
#: the truncation said in the stderr tail.
STDOUT_CAP = 16 << 20


class _Drain(threading.Thread):
    """Read one pipe to its end in a thread: keep the first ``cap`` bytes (``keep="head"``) or the last
    ``cap`` (``keep="tail"``), count the rest. Memory stays bounded whatever the process writes."""

    def __init__(self, pipe: IO[bytes], cap: int, keep: str, limit: int | None = None) -> None:
        super().__init__(daemon=True, name="ablate-pipe")
        self.pipe, self.cap, self.keep, self.limit = pipe, cap, keep, limit
        self.data = bytearray()
        self.dropped = self.read = 0

    @property
    def over(self) -> bool:
        """More than ``limit`` bytes came through the pipe."""
        return self.limit is not None and self.read > self.limit

    def run(self) -> None:
        fd = self.pipe.fileno()
        with contextlib.suppress(OSError):
            while block := os.read(fd, 1 << 16):
                self.read += len(block)
                if self.keep == "tail":
                    self.data += block
                    if len(self.data) > self.cap:
                        self.dropped += len(self.data) - self.cap
                        del self.data[: len(self.data) - self.cap]
                    continue
                room = max(0, self.cap - len(self.data))
                self.data += block[:room]
                self.dropped += len(block) - min(room, len(block))

    def finish(self, timeout: float) -> bytes:
        """The kept bytes once the pipe ended, or what was read when ``timeout`` passed first (a descendant
        that escaped every kill still holds the pipe: the thread is left to it, the pipe never closed under
        it, so its descriptor cannot be reused while it reads)."""
        self.join(timeout)
        if not self.is_alive():
            self.pipe.close()
        return bytes(self.data)


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float | None = None,
    stdout_path: Path | None = None,
    stderr_tail_bytes: int = 8192,
    kill_grace_s: float = 3.0,
    tag: str | None = None,
    stdout_cap: int = STDOUT_CAP,
    pipe_limits: tuple[int, int] | None = None,
    watch: Callable[[int], str | None] | None = None,
    preexec: Callable[[], None] | None = None,
) -> ExecResult:
    """Run ``argv`` with stdin from /dev/null and an explicit ``env``; kill the tree on ``timeout``. stdout's
    first ``stdout_cap`` bytes go to ``stdout_path`` (created exclusively) or are returned, stderr's last
    ``stderr_tail_bytes`` kept (docs/ARCHITECTURE.md#session-io); a ``tag``'s leftovers are killed.
    ``pipe_limits`` (bytes) and ``watch`` (the pid every :data:`POLL_S` → a limit it is over) kill the tree,
    ``limit`` says which; ``preexec`` runs in the child first."""
    if tag is not None:
        env = {**env, TAG_VAR: tag}
    start = time.monotonic()
    out_fh = None
    if stdout_path is not None:
        stdout_path.parent.mkdir(parents=True, exist_ok=True)
        out_fh = stdout_path.open("xb")
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=preexec,
        )
        assert proc.stdout is not None and proc.stderr is not None
        out_limit, err_limit = pipe_limits or (None, None)
        out = _Drain(proc.stdout, stdout_cap, "head", out_limit)
        err = _Drain(proc.stderr, stderr_tail_bytes, "tail", err_limit)
        out.start()
        err.start()
        timed_out, limit = False, None
        try:
            if pipe_limits is None and watch is None:
                proc.wait(timeout=timeout)
            else:
                limit = _watched(proc, out, err, watch, None if timeout is None else start + timeout)
                if limit is not None:
                    kill_tree(proc.pid, grace_s=kill_grace_s)
                    proc.wait()
        except BaseException as exc:  # a timeout, or anything that stops the caller (Ctrl-C): the tree goes
            kill_tree(proc.pid, grace_s=kill_grace_s)
            proc.wait()
            if not isinstance(exc, subprocess.TimeoutExpired):
                raise
            timed_out = True
        finally:
            exited_at = time.monotonic()
            if tag is not None:
                kill_tagged(tag)
            captured, tail_bytes = out.finish(5.0), err.finish(5.0)
        if limit is None and not timed_out:  # what it wrote just before it ended
            limit = "stdout" if out.over else "stderr" if err.over else None
        tail = tail_bytes.decode("utf-8", errors="replace")
        if out.dropped:
            tail += f"\nablate: stdout truncated: {out.dropped} bytes past the first {stdout_cap} dropped\n"
        if out_fh is not None:
            try:
                out_fh.write(captured)
                out_fh.flush()
                os.fsync(out_fh.fileno())
            except OSError as exc:  # a full disk names the record it could not write
                raise OSError(exc.errno, exc.strerror, str(stdout_path)) from exc
    finally:
        if out_fh is not None:
            out_fh.close()
    return ExecResult(
        returncode=proc.returncode,
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        stdout_path=stdout_path,
        stdout=captured if stdout_path is None else b"",
        stderr_tail=tail,
        pid=proc.pid,
        exited_at=exited_at,
        limit=limit,
    )


#: How often a watched process's limits are looked at (seconds).
POLL_S = 0.25


def _watched(
    proc: subprocess.Popen[bytes],
    out: _Drain,
    err: _Drain,
    watch: Callable[[int], str | None] | None,
    deadline: float | None,
) -> str | None:
    """Wait for ``proc``, looking at its limits every :data:`POLL_S` and as it ends: the one it went over."""
    ended = threading.Event()  # set the moment it ends (a wait with a timeout polls every 50 ms)

    def waiter() -> None:
        proc.wait()
        ended.set()

    threading.Thread(target=waiter, daemon=True, name="ablate-wait").start()
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(proc.args, 0)
        ended.wait(POLL_S if left is None else min(POLL_S, left))
        said = "stdout" if out.over else "stderr" if err.over else watch(proc.pid) if watch else None
        if said is not None or ended.is_set():  # looked at once more as it ended: it may have gone over
            return said

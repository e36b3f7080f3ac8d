"""Per-session limits enforced around one session (docs/ARCHITECTURE.md#limits, which says how each is held;
the record, its defaults and the ``--limit`` parse are :mod:`ablate.folder.limits`). A session over a limit
is stopped (its whole tree killed) and its item fails with ``limit:<what>``."""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from ablate.folder.limits import Limits
from ablate.isolate.nsexec import NPROC_VAR

_CGROOT = Path("/sys/fs/cgroup")


def _own_cgroups() -> dict[str, Path]:
    """Controller (``memory``, ``pids``; ``""`` for a v2 hierarchy) → this process's cgroup folder."""
    out: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                base = _CGROOT if c == "" and (_CGROOT / "cgroup.controllers").exists() else _CGROOT / c
                if c in ("memory", "pids", "") and base.is_dir():
                    out[c] = base / path.lstrip("/")
    return out


def cgroup_kind() -> str:
    """``cgroup v2`` or ``cgroup v1`` where this process may make memory and pids cgroups, else ""."""
    if os.geteuid() != 0:
        return ""
    own = _own_cgroups()
    if "memory" in own and "pids" in own and all(os.access(own[c], os.W_OK) for c in ("memory", "pids")):
        return "cgroup v1"
    v2 = own.get("")
    if v2 is not None and {"memory", "pids"} <= set(_read(v2 / "cgroup.subtree_control").split()):
        return "cgroup v2"
    return ""


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text()
    return ""


def _event(path: Path, name: str) -> int:
    """The counter ``name`` of a cgroup's ``*.events`` file (0 when it has none)."""
    found = [v for k, _, v in (line.partition(" ") for line in _read(path).splitlines()) if k == name]
    return int(found[0]) if found and found[0].strip().isdigit() else 0


def tree_size(root: Path) -> int:
    """Bytes allocated under ``root`` (links not followed, no other file system entered)."""
    total, stack = 0, [str(root)]
    with contextlib.suppress(OSError):
        dev = os.lstat(root).st_dev
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for e in entries:
                with contextlib.suppress(OSError):
                    st = e.stat(follow_symlinks=False)
                    total += st.st_blocks * 512
                    if e.is_dir(follow_symlinks=False) and st.st_dev == dev:
                        stack.append(e.path)
    return total


class SessionLimits:
    """The limits around one session: cgroups made before it (:meth:`preexec` puts the session in them and
    sets its rlimits), :meth:`check` while it runs, :meth:`close` after it (the cgroups removed)."""

    def __init__(self, limits: Limits, name: str, root: Path, over_request: Callable[[], bool]) -> None:
        self.limits, self.root, self.over_request = limits, root, over_request
        self.groups: dict[str, Path] = {}
        kind = cgroup_kind()
        own = _own_cgroups()
        for c in ("memory", "pids") if kind == "cgroup v1" else ("",) if kind else ():
            folder = own[c] / f"ablate-{name}"
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
            self.groups[c] = folder
        for c, folder in self.groups.items():  # v1: memory, pids; v2: one folder with both
            memory = folder / ("memory.max" if c == "" else "memory.limit_in_bytes")
            if c != "pids":
                memory.write_text(str(limits.memory))
            if c != "memory":
                (folder / "pids.max").write_text(str(limits.processes))
        self.baseline, self._walk_at = tree_size(root), 0.0
        self._procs: dict[int, psutil.Process] = {}

    def preexec(self) -> None:
        """In the session's first process, before it execs: join the cgroups, set the rlimits."""
        for folder in self.groups.values():
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
        lim = self.limits
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.disk, lim.disk))
        if not self.groups:
            resource.setrlimit(resource.RLIMIT_AS, (lim.memory, lim.memory))

    @property
    def env(self) -> dict[str, str]:
        """The session's ``RLIMIT_NPROC``, set by :mod:`~ablate.isolate.nsexec` in the view's user namespace
        (set before it, every process of the user on the host would count against it)."""
        return {} if self.groups else {NPROC_VAR: str(self.limits.processes)}

    def check(self, pid: int) -> str | None:
        """The limit the running session ``pid`` is over, else None."""
        lim, now = self.limits, time.monotonic()
        # a big folder is walked less often (a twentieth of the time at most), and always once it ended
        if now >= self._walk_at or not psutil.pid_exists(pid):
            grown = tree_size(self.root) - self.baseline
            self._walk_at = now + 20 * (time.monotonic() - now)
            if grown >= lim.disk:
                return "disk"
        if self.over_request():
            return "request"
        if self.groups:
            v2 = self.groups.get("")
            mem = v2 / "memory.events" if v2 else self.groups["memory"] / "memory.oom_control"
            if _event(mem, "oom_kill"):
                return "memory"
            return "processes" if _event((v2 or self.groups["pids"]) / "pids.events", "max") else None
        rss, tasks = self._tree(pid)
        if rss >= lim.memory:
            return "memory"
        return "processes" if tasks >= lim.processes else None

    def _tree(self, pid: int) -> tuple[int, int]:
        """Total RSS and tasks of ``pid`` and its descendants (processes kept between polls: cheap)."""
        try:
            top = self._procs.setdefault(pid, psutil.Process(pid))
            found = [top, *top.children(recursive=True)]
        except psutil.Error:
            return 0, 0
        rss = tasks = 0
        for p in found:
            p = self._procs.setdefault(p.pid, p)
            with contextlib.suppress(psutil.Error), p.oneshot():
                rss, tasks = rss + p.memory_info().rss, tasks + p.num_threads()
        return rss, tasks

    def close(self) -> None:
        """Remove the session's cgroups (their processes are gone: killed with the session)."""
        for folder in self.groups.values():
            for _ in range(50):
                with contextlib.suppress(FileNotFoundError):
                    try:
                        folder.rmdir()
                    except OSError:  # a process still leaving it
                        for pid in _read(folder / "cgroup.procs").split():
                            with contextlib.suppress(OSError):
                                os.kill(int(pid), 9)
                        time.sleep(0.02)
                        continue
                break


def with_mechanisms(limits: Limits) -> Limits:
    """``limits`` with ``enforced_by`` filled in for this machine and user."""
    group, pipe = cgroup_kind(), "counted by the runner's pipe reader"
    by = {
        "disk": "watched (every file under the slot's folder), one file by RLIMIT_FSIZE",
        "memory": f"{group} memory controller" if group else "RLIMIT_AS, the tree's total RSS watched",
        "processes": f"{group} pids controller"
        if group
        else "RLIMIT_NPROC in the session's user namespace, the tree's tasks watched",
        "stdout": pipe,
        "stderr": pipe,
        "request": "the forwarder streams the body and refuses it past the limit (413)",
        "forwarder_memory": "bodies spill to the forwarder's private folder; a request waits for room",
    }
    return limits.model_copy(update={"enforced_by": by})

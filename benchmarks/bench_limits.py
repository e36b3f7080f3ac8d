"""What the per-session limits (:mod:`ablate.isolate.limits`) cost a session.

(a) set-up and removal: :class:`~ablate.isolate.limits.SessionLimits` made and closed for a slot folder
holding ``FILES`` files (its cgroups where they can be had, the disk baseline's walk), median of ``ROUNDS``;
(b) one look while the session runs (:meth:`~ablate.isolate.limits.SessionLimits.check`: the folder's walk,
the cgroup events or the process tree), on a tree of ``CHILDREN`` processes, median of ``ROUNDS`` — it is
made every :data:`ablate.core.proc.POLL_S` by the thread that waits for the session anyway;
(c) end to end: ``sh -c 'sleep 0.3'`` through :func:`ablate.core.proc.run_process` with and without the
limits, median of ``ROUNDS``.

Run: ``python -m benchmarks.run limits`` (as root: cgroups; as an ordinary user: rlimits and the watch).

Measured on the shared 2-core machine (load average ~5, Python 3.11, cgroup v1). As root (cgroups):
(a) 1.7 ms per session, (b) 1.1 ms per look (4.5 ms of CPU per second of session), (c) 310 ms plain
against 326 ms limited: +16 ms per session, most of it the ``preexec`` (a fork where ``subprocess`` would
otherwise use vfork: an empty one costs ~10 ms here) and the cgroup join. As an ordinary user (rlimits, the
tree watched): (a) 0.9 ms, (b) 6.8 ms per look (the process tree is found by scanning ``/proc``: 27 ms of
CPU per second of session), (c) +11 ms per session. Beside the CLI's own ~1.5 s start, 1 % or less.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ablate.core.proc import POLL_S, run_process
from ablate.folder.limits import Limits
from ablate.isolate.limits import SessionLimits, cgroup_kind, with_mechanisms

ROUNDS = 20
FILES = 500
CHILDREN = 10
ENV = {"PATH": "/usr/bin:/bin"}


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    limits = with_mechanisms(Limits())
    print(f"as uid {os.geteuid()}: {cgroup_kind() or 'no cgroup'}; memory by {limits.enforced_by['memory']}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n in range(FILES):
            (root / f"d{n % 20}").mkdir(exist_ok=True)
            (root / f"d{n % 20}" / f"f{n}").write_bytes(b"x" * 2000)
        setup = []
        for n in range(ROUNDS):
            t = time.perf_counter()
            SessionLimits(limits, f"bench-{n}", root, lambda: False).close()
            setup.append(time.perf_counter() - t)
        print(f"(a) set-up and removal: {_ms(setup):.2f} ms per session ({FILES} files in the slot)")
        guard = SessionLimits(limits, "bench-look", root, lambda: False)
        script = " ".join(["sleep 30 &"] * CHILDREN) + " wait"
        tree = subprocess.Popen(["sh", "-c", script], preexec_fn=guard.preexec, start_new_session=True)
        time.sleep(0.5)
        looks = []
        for _ in range(ROUNDS):
            t = time.perf_counter()
            guard.check(tree.pid)
            looks.append(time.perf_counter() - t)
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
        guard.close()
        look = _ms(looks)
        print(f"(b) one look: {look:.2f} ms ({look / POLL_S:.1f} ms of CPU per second of session)")
        plain, limited, argv = [], [], ["sh", "-c", "sleep 0.3"]
        for n in range(ROUNDS):
            t = time.perf_counter()
            run_process(argv, cwd=root, env=ENV)
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            guard = SessionLimits(limits, f"bench-run-{n}", root, lambda: False)
            pipes = (limits.stdout, limits.stderr)
            run_process(argv, cwd=root, env=ENV, pipe_limits=pipes, watch=guard.check, preexec=guard.preexec)
            guard.close()
            limited.append(time.perf_counter() - t)
        a, b = _ms(plain), _ms(limited)
        print(f"(c) a 0.3 s process: {a:.0f} ms plain, {b:.0f} ms limited ({b - a:+.1f} ms per session)")

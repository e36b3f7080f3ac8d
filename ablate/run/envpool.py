"""The scheduler's environment pool: built once per (cell, slot), reset between items and retargeted to another
cell when idle, never rebuilt (a checkout is the expensive part). A pool made with ``keep=True`` outlives one
scheduler pass (an adaptive run's rounds); its owner closes it."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ablate.isolate.backend import CellEnv, EnvBackend
from ablate.run.schedule_types import Idle
from ablate.setup.cells import ResolvedCell


class EnvPool:
    """Builds, lends and removes the environments of one run."""

    def __init__(
        self, backend: EnvBackend, cells: dict[str, ResolvedCell], jobs: int, *, keep: bool = False
    ) -> None:
        self.backend = backend
        self.keep = keep
        """Environments stay (idle, to be reset) when a pass has nothing left to launch; closed by the owner."""
        self.cleaned = False
        """The work root was cleared of what a crashed run left (once per pool, before its first build)."""
        self.described: set[str] = set()
        """Cells whose environment the manifest describes already."""
        self.cells = cells
        self.jobs = max(1, jobs)
        self.idle: list[Idle] = []
        self.builds: dict[Future[CellEnv], tuple[str, int]] = {}
        self.envs: list[CellEnv] = []
        """Every environment built and not yet retired."""
        self.built = 0
        self._slots = itertools.count()
        # Checkouts are disk-bound: two at a time get the first sessions going sooner than `jobs` contending.
        self._build_pool = ThreadPoolExecutor(
            max_workers=min(2, self.jobs), thread_name_prefix="ablate-build"
        )
        self._teardown_pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="ablate-down")

    def start(self, pending_cells: Sequence[str]) -> int:
        """Start one build per concurrent session, for the first cells the plan needs; returns how many."""
        have = {i.cell for i in self.idle} | {cell for cell, _ in self.builds.values()}
        room = self.jobs - len(self.envs) - len(self.builds)
        wanted = [c for c in dict.fromkeys(pending_cells) if c not in have][: max(0, room)]
        for cell_id in wanted:
            self.submit_build(cell_id)
        return len(wanted)

    def submit_build(self, cell_id: str) -> None:
        slot = next(self._slots)
        fut = self._build_pool.submit(self.backend.build, self.cells[cell_id], slot)
        self.builds[fut] = (cell_id, slot)

    def maybe_grow(self, runnable: Sequence[str]) -> None:
        """Build another environment while there are fewer than ``jobs`` and ``runnable`` waits."""
        if self.idle or len(self.envs) + len(self.builds) >= self.jobs:
            return
        if len(runnable) > len(self.builds):
            self.submit_build(runnable[len(self.builds)])

    def built_one(self, fut: Future[CellEnv]) -> tuple[str, CellEnv]:
        """A finished build's environment, idle now; a build failure is fatal (the cell cannot be measured)."""
        cell_id, _ = self.builds.pop(fut)
        env = fut.result()
        self.envs.append(env)
        self.built += 1
        self.idle.append(Idle(env, Path(env.root).name, cell_id, dirty=False))
        return cell_id, env

    def give_back(self, env: CellEnv, label: str, cell_id: str) -> None:
        """A session ended in ``env``: it is idle again, to be reset before its next item."""
        self.idle.append(Idle(env, label, cell_id, dirty=True))

    def retire(self, env: CellEnv) -> None:
        """Remove ``env`` now (it could not be prepared, or nothing is left to launch)."""
        self.envs.remove(env)
        self._teardown_pool.submit(self.backend.teardown, env)

    def close(self) -> None:
        """Stop building; remove every environment and the backend's run-wide layers, and wait."""
        self._build_pool.shutdown(wait=True, cancel_futures=True)
        for fut in list(self.builds):
            with contextlib.suppress(Exception):
                self.envs.append(fut.result())
        for env in self.envs:
            self._teardown_pool.submit(self.backend.teardown, env)
        self._teardown_pool.shutdown(wait=True)
        with contextlib.suppress(Exception):
            self.backend.close()  # what the backend shares between environments (a view's lower layers)

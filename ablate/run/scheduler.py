"""The scheduler: a bounded pool of pinned `claude -p` sessions over prebuilt cell environments, items in plan
order (docs/ARCHITECTURE.md#running-sessions). A rate limit pauses the whole pool (``CLAUDE_CODE_MAX_RETRIES``
is kept low so ablate owns the backoff) and the attempt is requeued, never a result."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from ablate.core.claude import ClaudeBinary, task_args
from ablate.core.errors import DISK_FULL_HINT, DiskFull, RunFolderError
from ablate.core.fsutil import disk_full_message, is_disk_full
from ablate.core.proc import kill_tagged, kill_tree
from ablate.core.watchdog import Watchdog
from ablate.folder.layout import (
    Attempt,
    ManifestSession,
    PlanItem,
    RunFolder,
    RunManifest,
    utcnow,
    write_manifest,
)
from ablate.folder.lock import RunLock
from ablate.folder.result import COMPLETE_STATUSES, write_result
from ablate.isolate.backend import CellEnv, EnvBackend
from ablate.mine.model import SessionResult
from ablate.run.envpool import EnvPool
from ablate.run.hooks import TreeHook
from ablate.run.run_state import RunState
from ablate.run.schedule_types import (
    Idle,
    Job,
    Outcome,
    Phase,
    Prepare,
    Progress,
    RunOptions,
    RunSummary,
    SessionOutcome,
)
from ablate.run.session import PERMANENT_API_STATUSES, build_result, kill_strays, render_argv, session_uuid
from ablate.run.worker import Worker
from ablate.setup.cells import ResolvedCell
from ablate.setup.tasks import Task

__all__ = ["Progress", "RunOptions", "RunSummary", "Runner"]


@dataclass
class Runner:
    """Executes one run folder's share of its plan, one :meth:`run` per instance."""

    folder: RunFolder
    manifest: RunManifest
    _: KW_ONLY
    tasks: Mapping[str, Task]
    """The run's tasks by id."""
    cells: dict[str, ResolvedCell]
    """The run's cells by id."""
    backend: EnvBackend
    options: RunOptions
    tree_hook: TreeHook
    claude: ClaudeBinary | None = None
    forced: bool = False
    work_root: Path | None = None
    on_progress: Callable[[Progress], None] | None = None
    clock: Callable[[], float] = time.monotonic
    pool: EnvPool | None = None
    """Environments kept across passes (adaptive rounds), owned and closed by the caller; else this pass
    builds its own and removes them at its end."""
    lock: bool = True
    """False when the caller holds the folder's lock across passes."""
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _kill: threading.Event = field(default_factory=threading.Event, init=False)

    # -- control (safe from a signal handler or another thread) ----------------------------------------

    def request_stop(self, *, kill: bool = False) -> None:
        """Stop launching; running sessions finish within the grace period (or now, with ``kill``)."""
        self._stop.set()
        if kill:
            self._kill.set()

    # -- the run ---------------------------------------------------------------------------------------

    def run(self) -> RunSummary:
        with RunLock(self.folder) if self.lock else contextlib.nullcontext():
            return self._run_locked()

    def _run_locked(self) -> RunSummary:
        # Every process a session starts carries this run's tag; the watchdog kills them all if this process
        # dies (even kill -9), and each session's leftovers are killed when it ends.
        st = RunState.read(
            self.folder,
            self.manifest.shard,
            tasks=self.tasks,
            cells=self.cells,
            backoff=self.options.backoff,
            tag=f"{self.manifest.run_id}/{os.getpid()}/",
            now=self.clock(),
        )
        self._record_invocation()
        watchdog = Watchdog(st.tag)
        pool = self.pool or EnvPool(self.backend, self.cells, self.options.jobs)
        st.envs_built = pool.built  # a kept pool counts every pass's builds
        sessions = ThreadPoolExecutor(max_workers=max(1, self.options.jobs), thread_name_prefix="ablate-run")
        fatal: BaseException | None = None
        outcome: Outcome | None = None
        try:
            if st.pending:
                if not pool.cleaned and self.work_root is not None and self.work_root.exists():
                    kill_strays(self.work_root)
                    self.backend.clean()
                pool.cleaned = True
                if started := pool.start([p.cell for p in st.pending]):
                    self.emit(st, "building", message=f"building {started} cell environments")
            outcome = self._dispatch(st, pool, sessions)
        except BaseException as exc:
            fatal = exc
            self._stop.set()
            self._kill_running(st)
            raise
        finally:
            self._finalise(st, pool, sessions, watchdog, fatal=fatal, outcome=outcome)
        return st.summary(self.folder, self.clock())

    def _finalise(
        self,
        st: RunState,
        pool: EnvPool,
        sessions: ThreadPoolExecutor,
        watchdog: Watchdog,
        *,
        fatal: BaseException | None,
        outcome: Outcome | None,
    ) -> None:
        """The end of a pass, however it ends: results written, environments removed (not a kept pool's), plan
        flushed, outcome recorded. A finished session that could not be recorded raises :class:`RunFolderError`
        (unless another exception is on its way): it would silently run again on resume."""
        write_errors: list[BaseException] = []
        for fut in list(st.running):
            try:
                res = fut.result()
            except Exception as exc:  # the worker itself failed: the item stays pending
                write_errors.append(exc)
                continue
            try:
                self.handle(st, res)
            except Exception as exc:
                write_errors.append(exc)
        st.running.clear()
        sessions.shutdown(wait=True)
        self.flush_plan(st, force=True)
        if self.pool is None:
            pool.close()
        watchdog.close()
        if fatal is not None:
            return
        if write_errors:
            raise RunFolderError(
                f"{self.folder.root}: could not record {len(write_errors)} finished session(s): {write_errors[0]}",
                hint="fix the cause (disk full? permissions?) and resume; the transcripts are kept",
            ) from write_errors[0]
        final: Outcome = outcome or ("failed-items" if st.failed else "finished")
        if final == "finished" and st.pending:
            final = "failed-items"
        st.final = final
        manifest = self.manifest
        last = manifest.sessions[-1].model_copy(update={"finished_at": utcnow(), "outcome": final})
        self.manifest = manifest.model_copy(update={"sessions": [*manifest.sessions[:-1], last]})
        write_manifest(self.folder, self.manifest)
        self.emit(st, "finished")

    def _record_invocation(self) -> None:
        claude = self.claude
        session = ManifestSession(
            started_at=utcnow(),
            host=socket.gethostname(),
            pid=os.getpid(),
            claude_version=claude.version if claude else self.manifest.claude.version,
            claude_sha256=claude.sha256 if claude else self.manifest.claude.sha256,
            model=self.manifest.model,
            forced=self.forced,
        )
        update = {"sessions": [*self.manifest.sessions, session], "jobs": self.options.jobs}
        self.manifest = self.manifest.model_copy(update={**update, "budget_usd": self.options.budget_usd})
        write_manifest(self.folder, self.manifest)

    def _dispatch(self, st: RunState, pool: EnvPool, sessions: ThreadPoolExecutor) -> Outcome | None:
        """Launch onto idle environments and collect, until nothing is left or a stop condition holds."""
        outcome: Outcome | None = None
        while True:
            now = self.clock()
            outcome = outcome or self._stop_condition(st, now)
            grace_over = st.stop_at is not None and now - st.stop_at >= self.options.grace_s
            if outcome == "interrupted" and st.running and (self._kill.is_set() or grace_over):
                self._kill_running(st)
            paused = st.backoff.paused(now)
            if outcome is None and not paused:
                self._launch_ready(st, pool, sessions, now)
            elif outcome is None and paused:
                self.emit(st, "paused")
            waiting: list[Future[Any]] = [*st.running, *pool.builds]
            if not waiting:
                if outcome is not None or not st.pending:
                    return outcome
                if paused or any(t > now for t in st.not_before.values()):
                    time.sleep(min(0.25, max(0.01, st.backoff.paused_until - now)))
                    self.flush_plan(st)
                    continue
                # Nothing runnable, nothing building: cannot happen unless every build failed.
                raise RunFolderError("no environment could be built for the remaining items")
            done_set, _ = wait(waiting, timeout=0.25, return_when=FIRST_COMPLETED)
            for fut in done_set:
                self._collect(st, fut, pool)
            self.flush_plan(st)
            paused = st.backoff.paused(self.clock())
            self.emit(st, "stopping" if outcome is not None else "paused" if paused else "running")

    def _stop_condition(self, st: RunState, now: float) -> Outcome | None:
        """Why launching stops now (said once, when it starts to hold), or None."""
        opts = self.options
        if self._stop.is_set():
            st.stop_at = now
            self.emit(st, "stopping", message="stopping: no new sessions; waiting for running ones")
            return "interrupted"
        if opts.budget_usd is not None and st.spend >= opts.budget_usd:
            self.emit(st, "stopping", message=f"budget reached (${st.spend:.4f} of ${opts.budget_usd})")
            return "budget"
        if st.backoff.exhausted:
            said = f"still rate-limited after {opts.backoff.max_pauses} pauses; giving up"
            self.emit(st, "stopping", message=said)
            return "rate-limited"
        return None

    def _launch_ready(self, st: RunState, pool: EnvPool, sessions: ThreadPoolExecutor, now: float) -> None:
        while len(st.running) < self.options.jobs:
            pick = self._pick(st, pool.idle, now)
            if pick is None:
                runnable = [it.cell for it in st.pending if st.not_before.get(it.item, 0.0) <= now]
                pool.maybe_grow(runnable)
                return
            self._launch(st, sessions, *pick)
            st.launched += 1

    def _collect(self, st: RunState, fut: Future[Any], pool: EnvPool) -> None:
        """A build or a session finished: make the environment idle (or retire it) and record the outcome."""
        if fut in pool.builds:
            cell_id, env = pool.built_one(fut)
            st.envs_built = pool.built
            self._describe_cell(pool, cell_id, env)
            return
        job = st.running.pop(fut)
        res: SessionOutcome = fut.result()
        self.handle(st, res)  # may requeue the item (rate limit, transient failure)
        if res.status == "env_error" or (not st.pending and not pool.keep):
            # An environment that could not be prepared is not trusted again; and once nothing is left to
            # launch, an environment is removed at once, while the last sessions still run, not after them
            # (unless the pool is kept for the next pass).
            pool.retire(job.env)
            return
        pool.give_back(job.env, job.env_label, job.item.cell)
        self._describe_cell(pool, job.item.cell, job.env)

    # -- dispatch --------------------------------------------------------------------------------------

    def _pick(self, st: RunState, idle: list[Idle], now: float) -> tuple[PlanItem, Idle, Prepare] | None:
        """The first runnable pending item and the idle environment to serve it: one at its cell (reset if
        used), else the one whose cell the upcoming items need last (retargeted)."""
        if not idle:
            return None
        window = st.pending[: self.options.jobs * 2 + len(self.cells)]
        for idx, it in enumerate(window):
            if st.not_before.get(it.item, 0.0) > now:
                continue
            if same := [e for e in idle if e.cell == it.cell]:
                chosen = same[0]
                prepare: Prepare = "reset" if chosen.dirty else "none"
            else:
                upcoming = [p.cell for p in window[idx + 1 :]]
                chosen = max(
                    idle, key=lambda e: upcoming.index(e.cell) if e.cell in upcoming else len(upcoming)
                )
                prepare = "retarget"
            idle.remove(chosen)
            del st.pending[idx]
            return it, chosen, prepare
        return None

    def _launch(
        self, st: RunState, sessions: ThreadPoolExecutor, it: PlanItem, chosen: Idle, prepare: Prepare
    ) -> None:
        n = max([a.n for a in it.attempts] + [st.stdout_max.get(it.item, 0)]) + 1
        st.stdout_max[it.item] = n
        attempt = Attempt(
            n=n,
            session_id=session_uuid(self.manifest.seed, it.item, n),
            started_at=utcnow(),
            slot=chosen.label,
        )
        it.attempts.append(attempt)
        st.plan_dirty = True
        task = self.tasks[it.task]
        max_turns = task.spec.max_turns or self.manifest.max_turns
        timeout = task.spec.timeout_s or self.manifest.timeout_s
        argv = render_argv(
            self.manifest.argv,
            max_turns=max_turns,
            session_id=attempt.session_id,
            prompt=task.prompt,
            task_args=task_args(append_system_prompt=task.spec.append_system_prompt),
            model=it.model,
        )
        job = Job(it, attempt, chosen.env, chosen.label, task, argv, timeout, st.backoff.epoch, prepare)
        st.tries[it.item] = st.tries.get(it.item, 0) + 1
        worker = Worker(
            self.folder,
            self.backend,
            self.cells,
            self.tree_hook,
            st.tag,
            st.killed_sessions,
            self.manifest.max_retries,
            self.options.limits,
        )
        fut = sessions.submit(worker.attempt, job)
        st.running[fut] = job

    def _kill_running(self, st: RunState) -> None:
        """Kill the process tree of every running session (found by its unique --session-id)."""
        with st.lock:
            sids = {job.attempt.session_id for job in st.running.values()} - st.killed_sessions
            st.killed_sessions |= sids
        if not sids:
            return
        try:
            children = psutil.Process().children(recursive=False)
        except psutil.Error:
            return
        for child in children:
            try:
                cmd = child.cmdline()
            except psutil.Error:
                continue
            if sids.intersection(cmd):
                kill_tree(child.pid, grace_s=2.0)
        for sid in sids:  # what left the tree (double forks)
            kill_tagged(st.tag + sid)

    # -- outcomes --------------------------------------------------------------------------------------

    def handle(self, st: RunState, res: SessionOutcome) -> None:
        """Record a finished attempt, then requeue the item or write its result."""
        job, opts, now = res.job, self.options, self.clock()
        it = job.item
        cost = res.session.cost_usd if res.session is not None else None
        st.spend += cost or 0.0
        a = job.attempt.model_copy(
            update={
                "outcome": res.status,
                "finished_at": utcnow(),
                "cost_usd": cost,
                "returncode": res.exec.returncode if res.exec else None,
            }
        )
        it.attempts[-1] = a
        st.plan_dirty = True

        if res.status == "interrupted" or (self._kill.is_set() and res.status not in COMPLETE_STATUSES):
            st.requeue(it)
            return
        if res.status == "rate_limited":
            st.rate_limited += 1
            self._pause(st, res.session, job)
            st.requeue(it)
            return
        st.backoff.succeeded(epoch=job.pause_epoch)
        if res.status not in COMPLETE_STATUSES and _transient(res) and st.tries[it.item] < opts.max_attempts:
            st.not_before[it.item] = now + opts.retry_delay_s * st.tries[it.item]
            st.requeue(it)
            return
        st.not_before.pop(it.item, None)
        result = build_result(
            self.folder,
            it,
            a,
            res.session,
            res.exec,
            res.status,
            res.transcript,
            res.error,
            flags=res.flags,
            writes=res.writes,
            wire=res.wire,
        )
        try:
            write_result(self.folder, result)
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            kept = f"item {it.item} has no result (its transcript, if copied, is kept); a resume re-runs it"
            raise DiskFull(disk_full_message(exc, kept=kept), hint=DISK_FULL_HINT) from None
        if res.status in COMPLETE_STATUSES:
            st.done += 1
            st.failed.discard(it.item)
        else:
            st.failed.add(it.item)

    def _pause(self, st: RunState, session: SessionResult | None, job: Job) -> None:
        reset = session.rate_limit_reset if session is not None else None
        named = (reset - datetime.now(UTC)).total_seconds() + 2.0 if reset is not None else None
        wait_s = st.backoff.rate_limited(self.clock(), named, epoch=job.pause_epoch)
        if wait_s is not None:  # None: launched before the current pause, already accounted for
            self.emit(st, "paused", message=f"rate-limited: pausing every launch for {wait_s:.0f} s")

    # -- bookkeeping -----------------------------------------------------------------------------------

    def flush_plan(self, st: RunState, *, force: bool = False) -> None:
        """Write plan.jsonl when attempts were recorded (at most every half second unless ``force``)."""
        now = self.clock()
        if st.plan_dirty and (force or now - st.plan_written >= 0.5):
            self.folder.write_plan(st.plan())
            st.plan_dirty = False
            st.plan_written = now

    def _describe_cell(self, pool: EnvPool, cell_id: str, env: CellEnv) -> None:
        """Record what the backend says of a cell's environment in the manifest, once per cell."""
        if cell_id in pool.described:
            return
        pool.described.add(cell_id)
        try:
            info = self.backend.describe(env)
        except Exception as exc:
            info = {"notes": [f"could not describe the environment: {exc}"]}
        said = {
            k: info.get(k, empty)
            for k, empty in (("fingerprints", {}), ("leaks", []), ("notes", []), ("env", {}))
        }
        cells = [c.model_copy(update=said) if c.id == cell_id else c for c in self.manifest.cells]
        self.manifest = self.manifest.model_copy(update={"cells": cells})
        write_manifest(self.folder, self.manifest)

    def emit(self, st: RunState, phase: Phase, *, message: str | None = None) -> None:
        """Tell ``on_progress`` (if any) where the pass is."""
        if self.on_progress is not None:
            self.on_progress(st.progress(phase, self.clock(), message=message))


def _transient(res: SessionOutcome) -> bool:
    if res.status == "api_error":
        s = res.session.api_error_status if res.session is not None else None
        return s not in PERMANENT_API_STATUSES
    return res.status in ("no_transcript", "killed", "launch_error", "env_error")

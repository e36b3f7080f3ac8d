"""The scheduler — running a plan: a bounded pool of pinned `claude -p` sessions over prebuilt cell environments.

One :class:`Runner` works on one run folder (docs/ARCHITECTURE.md) at a time, holding its lock. Its main thread
dispatches items in plan order; session, environment-build and reset work happens in thread pools:

* **Environments** are built once per (cell, slot), in parallel, and reset between items (only what the
  previous session changed), never rebuilt. A second slot of a cell is built only when an item of that cell
  is next and every environment of the cell is busy. A caller that runs several passes on one folder (an
  adaptive run's rounds) hands each Runner the same kept :class:`~ablate.run.envpool.EnvPool` and closes it
  itself: environments then outlive a pass.
* **Rate limits** (429, the "hit your limit" message, a synthetic rate-limit record, 529 overloaded) pause the
  whole pool until the reset time the message names, else with exponential backoff; the attempt is requeued
  and never becomes a result. ``CLAUDE_CODE_MAX_RETRIES`` is kept low so ablate owns the backoff.
* **Results** are written atomically and never replaced by a worse one (:func:`should_replace`).
* **Budget**: launching stops once the recorded spend reaches the limit.
* **Stopping**: :meth:`Runner.request_stop` stops launching; running sessions get ``grace_s`` to finish and
  are then killed (whole process tree). The folder is always left resumable.

The library never prints: progress goes to an ``on_progress`` callback.
"""

from __future__ import annotations

import bisect
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from ablate.core.claude import ClaudeBinary
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
from ablate.folder.result import COMPLETE_STATUSES, read_result, write_result
from ablate.isolate.backend import CellEnv, EnvBackend
from ablate.mine.model import SessionResult
from ablate.run.envpool import EnvPool
from ablate.run.finalise import finalise
from ablate.run.hooks import TreeHook
from ablate.run.plan import Shard, shard_items
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
from ablate.run.session import (
    PERMANENT_API_STATUSES,
    build_result,
    kill_strays,
    render_argv,
    session_uuid,
)
from ablate.run.worker import Worker
from ablate.setup.cells import ResolvedCell
from ablate.setup.tasks import Task

__all__ = ["Progress", "RunOptions", "RunSummary", "Runner"]


class Runner:
    """Executes one run folder's share of its plan. Not reusable: one :meth:`run` per instance."""

    def __init__(
        self,
        folder: RunFolder,
        manifest: RunManifest,
        *,
        tasks: Sequence[Task],
        cells: Sequence[ResolvedCell],
        backend: EnvBackend,
        options: RunOptions,
        tree_hook: TreeHook,
        claude: ClaudeBinary | None = None,
        forced: bool = False,
        work_root: Path | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        pool: EnvPool | None = None,
        lock: bool = True,
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        self.tasks = {t.id: t for t in tasks}
        self.cells = {c.id: c for c in cells}
        self.backend = backend
        self.options = options
        self.tree_hook = tree_hook
        self.claude = claude
        self.forced = forced
        self.work_root = work_root
        self.on_progress = on_progress
        self._clock = clock
        self._shared_pool = pool
        """Environments kept across passes (adaptive rounds), owned and closed by the caller; else this
        pass builds its own and removes them at its end."""
        self._take_lock = lock
        """False when the caller holds the folder's lock across passes."""
        self._stop = threading.Event()
        self._kill = threading.Event()
        self._stop_at: float | None = None
        self._lock = threading.Lock()
        self._killed_sessions: set[str] = set()
        self._running: dict[Future[SessionOutcome], Job] = {}
        self._final: Outcome = "interrupted"

    # -- control (safe from a signal handler or another thread) ----------------------------------------

    def request_stop(self, *, kill: bool = False) -> None:
        """Stop launching; running sessions finish within the grace period (or now, with ``kill``)."""
        self._stop.set()
        if kill:
            self._kill.set()

    # -- the run ---------------------------------------------------------------------------------------

    def run(self) -> RunSummary:
        if not self._take_lock:
            return self._run_locked()
        with RunLock(self.folder):
            return self._run_locked()

    @property
    def owns_pool(self) -> bool:
        return self._shared_pool is None

    def _run_locked(self) -> RunSummary:
        self._start = self._clock()
        by_item, skipped = self._begin()
        # Every process a session starts carries this run's tag; the watchdog kills them all if this process
        # dies (even kill -9), and each session's leftovers are killed when it ends.
        self._tag = f"{self.manifest.run_id}/{os.getpid()}/"
        watchdog = Watchdog(self._tag)
        pool = self._shared_pool or EnvPool(self.backend, self.cells, self.options.jobs)
        self._envs_built = pool.built  # a kept pool counts every pass's builds
        sessions = ThreadPoolExecutor(max_workers=max(1, self.options.jobs), thread_name_prefix="ablate-run")
        fatal: BaseException | None = None
        outcome: Outcome | None = None
        try:
            if self._pending:
                if not pool.cleaned and self.work_root is not None and self.work_root.exists():
                    kill_strays(self.work_root)
                    self.backend.clean()
                pool.cleaned = True
                if started := pool.start([p.cell for p in self._pending]):
                    self._emit("building", message=f"building {started} cell environments")
            outcome = self._dispatch(pool, sessions, by_item)
        except BaseException as exc:
            fatal = exc
            self._stop.set()
            self._kill_running()
            raise
        finally:
            finalise(self, pool, sessions, watchdog, by_item, fatal=fatal, outcome=outcome)
        return self._summary(skipped)

    def _begin(self) -> tuple[dict[str, PlanItem], int]:
        """Read the plan and the results once, set the counters, and record this invocation in the manifest."""
        plan = self.folder.read_plan()
        share = shard_items(plan, _parse_manifest_shard(self.manifest.shard))
        for it in share:
            if it.task not in self.tasks:
                raise RunFolderError(f"plan item {it.item}: unknown task {it.task!r}")
            if it.cell not in self.cells:
                raise RunFolderError(f"plan item {it.item}: unknown cell {it.cell!r}")
        existing = {it.item: read_result(self.folder, it.item) for it in share}  # each result read once
        complete = {item for item, res in existing.items() if res is not None and res.complete}
        self._failed = {item for item, res in existing.items() if res is not None and not res.complete}
        self._pending = [it for it in share if it.item not in complete]
        self._total, self._done = len(share), len(complete)
        self._rate_limited = 0
        self._spend = sum(a.cost_usd or 0.0 for p in plan for a in p.attempts)
        self._paused_until = 0.0
        self._pause_epoch = 0
        self._consecutive_pauses = 0
        self._not_before: dict[str, float] = {}
        self._tries: dict[str, int] = {}
        self._plan_dirty = False
        self._plan_written = self._clock()
        self._stdout_max = self._existing_attempts()
        self._launched = 0
        self._envs_built = 0
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
        return {p.item: p for p in plan}, len(complete)

    def _dispatch(
        self, pool: EnvPool, sessions: ThreadPoolExecutor, by_item: dict[str, PlanItem]
    ) -> Outcome | None:
        """The main loop: launch in plan order onto idle environments, collect what finished, until nothing
        is left or a stop condition (Ctrl-C, budget, rate limits) holds and the running sessions are done."""
        outcome: Outcome | None = None
        while True:
            now = self._clock()
            outcome = outcome or self._stop_condition(now)
            grace_over = self._stop_at is not None and now - self._stop_at >= self.options.grace_s
            if outcome == "interrupted" and self._running and (self._kill.is_set() or grace_over):
                self._kill_running()
            if outcome is None and now >= self._paused_until:
                self._launch_ready(pool, sessions, now)
            elif outcome is None and self._paused_until > now:
                self._emit("paused")
            waiting: list[Future[Any]] = [*self._running, *pool.builds]
            if not waiting:
                if outcome is not None or not self._pending:
                    return outcome
                if now < self._paused_until or any(t > now for t in self._not_before.values()):
                    time.sleep(min(0.25, max(0.01, self._paused_until - now)))
                    self._flush_plan(by_item)
                    continue
                # Nothing runnable, nothing building: cannot happen unless every build failed.
                raise RunFolderError("no environment could be built for the remaining items")
            done_set, _ = wait(waiting, timeout=0.25, return_when=FIRST_COMPLETED)
            for fut in done_set:
                self._collect(fut, pool, by_item)
            self._flush_plan(by_item)
            self._emit(self._phase(outcome))

    def _stop_condition(self, now: float) -> Outcome | None:
        """Why launching stops now (said once, when it starts to hold), or None."""
        opts = self.options
        if self._stop.is_set():
            self._stop_at = now
            self._emit("stopping", message="stopping: no new sessions; waiting for running ones")
            return "interrupted"
        if opts.budget_usd is not None and self._spend >= opts.budget_usd:
            self._emit("stopping", message=f"budget reached (${self._spend:.4f} of ${opts.budget_usd})")
            return "budget"
        if self._consecutive_pauses > opts.max_pauses:
            self._emit("stopping", message=f"still rate-limited after {opts.max_pauses} pauses; giving up")
            return "rate-limited"
        return None

    def _launch_ready(self, pool: EnvPool, sessions: ThreadPoolExecutor, now: float) -> None:
        while len(self._running) < self.options.jobs:
            pick = self._pick(pool.idle, now)
            if pick is None:
                runnable = [it.cell for it in self._pending if self._not_before.get(it.item, 0.0) <= now]
                pool.maybe_grow(runnable)
                return
            it, chosen, prepare = pick
            self._launch(sessions, it, chosen.env, chosen.label, prepare)
            self._launched += 1

    def _collect(self, fut: Future[Any], pool: EnvPool, by_item: dict[str, PlanItem]) -> None:
        """A build or a session finished: make the environment idle (or retire it) and record the outcome."""
        if fut in pool.builds:
            cell_id, env = pool.built_one(fut)
            self._envs_built = pool.built
            if cell_id not in pool.described:
                pool.described.add(cell_id)
                self._describe_cell(cell_id, env)
            return
        job = self._running.pop(fut)
        res: SessionOutcome = fut.result()
        self._handle(res, by_item)  # may requeue the item (rate limit, transient failure)
        if res.status == "env_error" or (not self._pending and not pool.keep):
            # An environment that could not be prepared is not trusted again; and once nothing is left to
            # launch, an environment is removed at once, while the last sessions still run, not after them
            # (unless the pool is kept for the next pass).
            pool.retire(job.env)
            return
        pool.give_back(job.env, job.env_label, job.item.cell)
        if job.item.cell not in pool.described:
            pool.described.add(job.item.cell)
            self._describe_cell(job.item.cell, job.env)

    def _summary(self, skipped: int) -> RunSummary:
        return RunSummary(
            folder=self.folder.root,
            total=self._total,
            done=self._done,
            failed=sorted(self._failed),
            pending=[p.item for p in self._pending],
            skipped=skipped,
            launched=self._launched,
            rate_limited=self._rate_limited,
            spend_usd=self._spend,
            elapsed_s=self._clock() - self._start,
            outcome=self._final,
            envs_built=self._envs_built,
        )

    # -- dispatch --------------------------------------------------------------------------------------

    def _pick(self, idle: list[Idle], now: float) -> tuple[PlanItem, Idle, Prepare] | None:
        """The first runnable pending item, in plan order, and the idle environment to serve it: one already
        at its cell (reset if used), else the one whose cell the upcoming items need least (retargeted)."""
        if not idle:
            return None
        window = self._pending[: self.options.jobs * 2 + len(self.cells)]
        for idx, it in enumerate(window):
            if self._not_before.get(it.item, 0.0) > now:
                continue
            same = [e for e in idle if e.cell == it.cell]
            if same:
                chosen = same[0]
                prepare: Prepare = "reset" if chosen.dirty else "none"
            else:
                upcoming = [p.cell for p in window[idx + 1 :]]
                chosen = max(
                    idle, key=lambda e: upcoming.index(e.cell) if e.cell in upcoming else len(upcoming)
                )
                prepare = "retarget"
            idle.remove(chosen)
            del self._pending[idx]
            return it, chosen, prepare
        return None

    def _existing_attempts(self) -> dict[str, int]:
        """Highest attempt number per item found on disk (stdout files), so numbers are never reused even
        when plan.jsonl lags behind a crash."""
        out: dict[str, int] = {}
        stdout_dir = self.folder.root / "stdout"
        if stdout_dir.is_dir():
            for p in stdout_dir.iterdir():
                name = p.name.removesuffix(".json")
                item, _, n = name.rpartition(".a")
                if item and n.isdigit():
                    out[item] = max(out.get(item, 0), int(n))
        return out

    def _launch(
        self, pool: ThreadPoolExecutor, it: PlanItem, env: CellEnv, label: str, prepare: Prepare = "none"
    ) -> None:
        n = max([a.n for a in it.attempts] + [self._stdout_max.get(it.item, 0)]) + 1
        self._stdout_max[it.item] = n
        attempt = Attempt(
            n=n, session_id=session_uuid(self.manifest.seed, it.item, n), started_at=utcnow(), slot=label
        )
        it.attempts.append(attempt)
        self._plan_dirty = True
        task = self.tasks[it.task]
        max_turns = task.spec.max_turns or self.manifest.max_turns
        timeout = task.spec.timeout_s or self.manifest.timeout_s
        argv = render_argv(
            self.manifest.argv, max_turns=max_turns, session_id=attempt.session_id, prompt=task.prompt
        )
        job = Job(it, attempt, env, label, task, argv, timeout, self._pause_epoch, prepare)
        self._tries[it.item] = self._tries.get(it.item, 0) + 1
        fut = pool.submit(self._attempt, job)
        self._running[fut] = job

    def _attempt(self, job: Job) -> SessionOutcome:
        worker = Worker(
            self.folder,
            self.backend,
            self.cells,
            self.tree_hook,
            self._tag,
            self._killed_sessions,
            self.manifest.max_retries,
        )
        return worker.attempt(job)

    def _kill_running(self) -> None:
        """Kill the process tree of every running session (found by its unique --session-id)."""
        with self._lock:
            sids = {job.attempt.session_id for job in self._running.values()} - self._killed_sessions
            self._killed_sessions |= sids
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
            kill_tagged(self._tag + sid)

    # -- outcomes --------------------------------------------------------------------------------------

    def _handle(self, res: SessionOutcome, by_item: dict[str, PlanItem]) -> None:
        job, opts, now = res.job, self.options, self._clock()
        it = job.item
        cost = res.session.cost_usd if res.session is not None else None
        self._spend += cost or 0.0
        a = job.attempt.model_copy(
            update={
                "outcome": res.status,
                "finished_at": utcnow(),
                "cost_usd": cost,
                "returncode": res.exec.returncode if res.exec else None,
            }
        )
        it.attempts[-1] = a
        self._plan_dirty = True

        if res.status == "interrupted" or (self._kill.is_set() and res.status not in COMPLETE_STATUSES):
            self._requeue(it)
            return
        if res.status == "rate_limited":
            self._rate_limited += 1
            self._pause(res.session, job)
            self._requeue(it)
            return
        if job.pause_epoch == self._pause_epoch:
            self._consecutive_pauses = 0
        if (
            res.status not in COMPLETE_STATUSES
            and self._transient(res)
            and self._tries[it.item] < opts.max_attempts
        ):
            self._not_before[it.item] = now + opts.retry_delay_s * self._tries[it.item]
            self._requeue(it)
            return
        self._not_before.pop(it.item, None)
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
            self._done += 1
            self._failed.discard(it.item)
        else:
            self._failed.add(it.item)

    @staticmethod
    def _transient(res: SessionOutcome) -> bool:
        if res.status == "api_error":
            s = res.session.api_error_status if res.session is not None else None
            return s not in PERMANENT_API_STATUSES
        return res.status in ("no_transcript", "killed", "launch_error", "env_error")

    def _pause(self, session: SessionResult | None, job: Job) -> None:
        opts, now = self.options, self._clock()
        if job.pause_epoch != self._pause_epoch and now < self._paused_until:
            return  # launched before the current pause: already accounted for
        reset = session.rate_limit_reset if session is not None else None
        if reset is not None:
            wait_s = (reset - datetime.now(UTC)).total_seconds() + 2.0
            wait_s = min(max(wait_s, opts.backoff_s), opts.max_reset_wait_s)
        else:
            wait_s = min(opts.backoff_s * (2**self._consecutive_pauses), opts.max_backoff_s)
        self._consecutive_pauses += 1
        self._pause_epoch += 1
        self._paused_until = max(self._paused_until, now + wait_s)
        self._emit("paused", message=f"rate-limited: pausing every launch for {wait_s:.0f} s")

    def _requeue(self, it: PlanItem) -> None:
        bisect.insort(self._pending, it, key=lambda p: p.order)

    # -- bookkeeping -----------------------------------------------------------------------------------

    def _flush_plan(self, by_item: dict[str, PlanItem], *, force: bool = False) -> None:
        now = self._clock()
        if self._plan_dirty and (force or now - self._plan_written >= 0.5):
            self.folder.write_plan(sorted(by_item.values(), key=lambda p: p.order))
            self._plan_dirty = False
            self._plan_written = now

    def _describe_cell(self, cell_id: str, env: CellEnv) -> None:
        try:
            info = self.backend.describe(env)
        except Exception as exc:
            info = {"notes": [f"could not describe the environment: {exc}"]}
        cells = []
        for c in self.manifest.cells:
            if c.id == cell_id:
                c = c.model_copy(
                    update={
                        "fingerprints": info.get("fingerprints", {}),
                        "leaks": info.get("leaks", []),
                        "notes": info.get("notes", []),
                        "env": info.get("env", {}),
                    }
                )
            cells.append(c)
        self.manifest = self.manifest.model_copy(update={"cells": cells})
        write_manifest(self.folder, self.manifest)

    def _phase(self, outcome: str | None) -> Phase:
        if outcome is not None:
            return "stopping"
        if self._clock() < self._paused_until:
            return "paused"
        return "running"

    def _emit(self, phase: Phase, *, message: str | None = None) -> None:
        if self.on_progress is None:
            return
        now = self._clock()
        paused = None
        if self._paused_until > now:
            paused = datetime.fromtimestamp(time.time() + (self._paused_until - now), UTC)
        self.on_progress(
            Progress(
                phase=phase,
                total=getattr(self, "_total", 0),
                done=getattr(self, "_done", 0),
                failed=len(getattr(self, "_failed", ())),
                rate_limited=getattr(self, "_rate_limited", 0),
                running=len(self._running),
                pending=len(getattr(self, "_pending", ())),
                spend_usd=getattr(self, "_spend", 0.0),
                elapsed_s=now - getattr(self, "_start", now),
                paused_until=paused,
                message=message,
            )
        )


def _parse_manifest_shard(text: str | None) -> Shard | None:
    if not text:
        return None
    from ablate.run.plan import parse_shard

    return parse_shard(text)

"""One scheduler pass's state, in one object: made once from the run folder (:meth:`RunState.read`), updated
by the :class:`~ablate.run.scheduler.Runner`, read for progress and the summary."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ablate.core.backoff import Backoff, BackoffPolicy
from ablate.core.errors import RunFolderError
from ablate.folder.layout import PlanItem, RunFolder
from ablate.folder.result import read_result
from ablate.run.plan import parse_shard, shard_items
from ablate.run.schedule_types import Job, Outcome, Phase, Progress, RunSummary, SessionOutcome


@dataclass
class RunState:
    """The mutable state of one pass over a run folder's share of the plan (its counts: as
    :class:`~ablate.run.schedule_types.Progress` and ``RunSummary`` say)."""

    by_item: dict[str, PlanItem]
    """The whole plan by item id; attempts are recorded in these items and flushed to plan.jsonl."""
    pending: list[PlanItem]
    """Items of the share still to run, in plan order."""
    failed: set[str]
    total: int
    done: int
    skipped: int
    spend: float
    stdout_max: dict[str, int]
    """Highest attempt number per item (from plan.jsonl and the stdout files): never reused."""
    tag: str
    """This pass's process tag; each session's processes carry ``tag + session_id``."""
    backoff: Backoff
    start: float
    """When the pass started (the runner's clock)."""
    plan_written: float
    plan_dirty: bool = False
    """Attempts recorded since plan.jsonl was last written."""
    rate_limited: int = 0
    launched: int = 0
    envs_built: int = 0
    not_before: dict[str, float] = field(default_factory=dict)
    """Items waiting out a retry delay, with the time they may run again."""
    tries: dict[str, int] = field(default_factory=dict)
    """Attempts per item in this pass."""
    running: dict[Future[SessionOutcome], Job] = field(default_factory=dict)
    killed_sessions: set[str] = field(default_factory=set)
    """Session ids the runner killed (read by the workers: their status is ``interrupted``)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards ``killed_sessions``."""
    stop_at: float | None = None
    final: Outcome = "interrupted"
    """How the pass ended (set by :meth:`Runner._finalise <ablate.run.scheduler.Runner>`)."""

    @classmethod
    def read(
        cls,
        folder: RunFolder,
        shard: str | None,
        *,
        tasks: Mapping[str, object],
        cells: Mapping[str, object],
        backoff: BackoffPolicy,
        tag: str,
        now: float,
    ) -> RunState:
        """The plan and every result of the share read once; items of an unknown task or cell refused."""
        plan = folder.read_plan()
        share = shard_items(plan, parse_shard(shard) if shard else None)
        for it in share:
            if it.task not in tasks:
                raise RunFolderError(f"plan item {it.item}: unknown task {it.task!r}")
            if it.cell not in cells:
                raise RunFolderError(f"plan item {it.item}: unknown cell {it.cell!r}")
        existing = {it.item: read_result(folder, it.item) for it in share}  # each result read once
        complete = {item for item, res in existing.items() if res is not None and res.complete}
        return cls(
            by_item={p.item: p for p in plan},
            pending=[it for it in share if it.item not in complete],
            failed={item for item, res in existing.items() if res is not None and not res.complete},
            total=len(share),
            done=len(complete),
            skipped=len(complete),
            spend=sum(a.cost_usd or 0.0 for p in plan for a in p.attempts),
            stdout_max=existing_attempts(folder),
            tag=tag,
            backoff=Backoff(backoff),
            start=now,
            plan_written=now,
        )

    def requeue(self, it: PlanItem) -> None:
        """Back among the pending items, at its place in plan order."""
        bisect.insort(self.pending, it, key=lambda p: p.order)

    def plan(self) -> list[PlanItem]:
        """The whole plan in order, as plan.jsonl holds it."""
        return sorted(self.by_item.values(), key=lambda p: p.order)

    def progress(self, phase: Phase, now: float, *, message: str | None = None) -> Progress:
        paused = None
        if self.backoff.paused(now):
            paused = datetime.fromtimestamp(time.time() + (self.backoff.paused_until - now), UTC)
        return Progress(
            phase=phase,
            total=self.total,
            done=self.done,
            failed=len(self.failed),
            rate_limited=self.rate_limited,
            running=len(self.running),
            pending=len(self.pending),
            spend_usd=self.spend,
            elapsed_s=now - self.start,
            paused_until=paused,
            message=message,
        )

    def summary(self, folder: RunFolder, now: float) -> RunSummary:
        return RunSummary(
            folder=folder.root,
            total=self.total,
            done=self.done,
            failed=sorted(self.failed),
            pending=[p.item for p in self.pending],
            skipped=self.skipped,
            launched=self.launched,
            rate_limited=self.rate_limited,
            spend_usd=self.spend,
            elapsed_s=now - self.start,
            outcome=self.final,
            envs_built=self.envs_built,
        )


def existing_attempts(folder: RunFolder) -> dict[str, int]:
    """Highest attempt number per item of the stdout files: never reused, even when plan.jsonl lags a crash."""
    out: dict[str, int] = {}
    stdout_dir = folder.stdout_dir
    if stdout_dir.is_dir():
        for p in stdout_dir.iterdir():
            name = p.name.removesuffix(".json")
            item, _, n = name.rpartition(".a")
            if item and n.isdigit():
                out[item] = max(out.get(item, 0), int(n))
    return out

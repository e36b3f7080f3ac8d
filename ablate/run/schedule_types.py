"""The scheduler's vocabulary: how a plan is executed, what progress and the summary say, and the records its
dispatch loop, environment pool and session workers pass between them."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ablate.core.backoff import BackoffPolicy
from ablate.core.constants import DEFAULT_GRACE_S
from ablate.core.proc import ExecResult
from ablate.folder.layout import Attempt, PlanItem
from ablate.folder.limits import Limits
from ablate.folder.wire import WireTotals
from ablate.isolate.backend import CellEnv
from ablate.mine.model import SessionResult
from ablate.setup.tasks import Task


@dataclass(frozen=True)
class RunOptions:
    """How a plan is executed (what may differ between invocations on one folder)."""

    jobs: int = 1
    """Parallel sessions."""
    budget_usd: float | None = None
    """Stop launching once the recorded spend reaches this."""
    max_attempts: int = 3
    """Attempts per item in one invocation for transient failures (5xx, no transcript, crashed CLI)."""
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    """Pool pauses after a rate limit (a reset time the message names, else exponential), and when to give up."""
    grace_s: float = DEFAULT_GRACE_S
    """After a stop request, how long running sessions may finish before they are killed."""
    retry_delay_s: float = 5.0
    """Delay before re-running an item after a transient failure (times the attempt number)."""
    limits: Limits = field(default_factory=Limits)
    """Each session's limits (``--limit``: docs/ARCHITECTURE.md#limits)."""


Outcome = Literal["finished", "failed-items", "budget", "rate-limited", "interrupted"]
Phase = Literal["building", "running", "paused", "stopping", "finished"]
Prepare = Literal["none", "reset", "retarget"]


@dataclass(frozen=True)
class Progress:
    """A snapshot for progress displays."""

    phase: Phase
    total: int
    """Items in this folder's share of the plan."""
    done: int
    """Items with a complete result (including those complete before this invocation)."""
    failed: int
    """Items whose last attempt failed (and will not be retried in this invocation)."""
    rate_limited: int
    """Rate-limited attempts in this invocation (requeued, never results)."""
    running: int
    pending: int
    spend_usd: float
    """Recorded spend of the whole folder, every invocation."""
    elapsed_s: float
    paused_until: datetime | None = None
    message: str | None = None


@dataclass
class RunSummary:
    """What an invocation did."""

    folder: Path
    outcome: Outcome
    total: int
    done: int
    failed: list[str]
    pending: list[str]
    skipped: int
    """Items already complete when this invocation started."""
    launched: int
    rate_limited: int
    spend_usd: float
    elapsed_s: float
    envs_built: int = 0

    def to_json(self) -> dict[str, Any]:
        rounded = {"spend_usd": round(self.spend_usd, 6), "elapsed_s": round(self.elapsed_s, 3)}
        return {**asdict(self), "folder": str(self.folder), **rounded}


@dataclass
class Job:
    item: PlanItem
    attempt: Attempt
    env: CellEnv
    env_label: str
    task: Task
    argv: list[str]
    timeout_s: float | None
    pause_epoch: int
    prepare: Prepare = "none"
    launched: float = field(default_factory=time.monotonic)


@dataclass
class Idle:
    """An environment no session is using: at ``cell``; ``dirty`` once a session has run in it."""

    env: CellEnv
    label: str
    cell: str
    dirty: bool


@dataclass
class SessionOutcome:
    job: Job
    exec: ExecResult | None
    session: SessionResult | None
    status: str
    transcript: Path | None
    error: str | None = None
    flags: list[str] = field(default_factory=list)
    writes: dict[str, Any] | None = None
    wire: WireTotals | None = None
    """The session's figures as the forwarder saw them (None: not sealed, nothing recorded)."""

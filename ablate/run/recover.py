"""Recovering results from transcripts when the CLI's stdout is missing, empty, corrupt or a rate-limit stub:
the latest attempt's result is rebuilt from its transcript, with the fields that came from it or from a rule
marked and the transcript's figures reconciled with any salvaged CLI document. A result is written
atomically, never replaced by a worse one; a rate-limited session never becomes a result (it needs a re-run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from ablate.core.errors import AblateError, NotFound
from ablate.core.workers import in_workers
from ablate.folder.layout import TASKS_DIR, Attempt, PlanItem, RunFolder, read_manifest
from ablate.folder.lock import RunLock
from ablate.folder.result import ExitInfo, ItemResult, Recovery, read_result, should_replace, write_result
from ablate.folder.wire import read_wire, wire_path
from ablate.mine.cli_output import parse_cli_output
from ablate.mine.derive import mine_session
from ablate.mine.model import SessionResult
from ablate.run.session import PAUSE_API_STATUSES, build_result, compare_wire
from ablate.setup.tasks import Task, load_task

RecoverAction = Literal["ok", "recovered", "kept", "needs_rerun", "not_run"]

#: Fields a recovered result takes from the transcript instead of the CLI's stdout.
RECOVERED_FIELDS = (
    "status", "turns", "cost_usd", "duration_s", "api_calls", "input_tokens", "output_tokens",
    "cache_creation_tokens", "cache_read_tokens", "tool_calls",
)  # fmt: skip


@dataclass
class RecoveredItem:
    """What ``recover`` did with one item."""

    item: str
    attempt: int | None
    stdout_kind: str | None
    action: RecoverAction
    reason: str = ""
    result: SessionResult | None = None
    recovered_fields: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "item": self.item,
            "attempt": self.attempt,
            "stdout": self.stdout_kind,
            "action": self.action,
            "reason": self.reason,
            "status": r.status if r else None,
            "session_id": r.session_id if r else None,
            "cost_usd": r.cost_usd if r else None,
            "turns": r.turns if r else None,
            "recovered_fields": list(self.recovered_fields),
            "estimated_fields": r.estimated_fields if r else [],
            "reconciliation": {k: dict(v) for k, v in r.reconciliation.items()} if r else {},
        }


def recovered_result(
    rf: RunFolder, item: PlanItem, attempt: Attempt, session: SessionResult, recovered_fields: list[str]
) -> ItemResult:
    """The ``results/<item>.json`` of a recovered item: the runner's :class:`ItemResult`
    (:func:`ablate.run.session.build_result`, checked against ``wire/<item>.jsonl`` as the runner does) with
    the attempt's return code and a ``recovery`` block saying what came from where."""
    transcript = rf.transcript_path(item.item, attempt.n, attempt.session_id)
    records = [r for r in read_wire(wire_path(rf.root, item.item)) if r.attempt == attempt.n]
    wire = compare_wire(records, session, rf.stdout_path(item.item, attempt.n))
    result = build_result(rf, item, attempt, session, None, session.status, transcript, wire=wire)
    recovery = Recovery(
        recovered_fields=recovered_fields,
        estimated_fields=session.estimated_fields,
        stdout_kind=session.stdout_kind,
        reconciliation={k: dict(v) for k, v in session.reconciliation.items()},
    )
    return result.model_copy(update={"exit": ExitInfo(returncode=attempt.returncode), "recovery": recovery})


def _recover_item(rf: RunFolder, item: PlanItem, *, tasks: dict[str, Task], write: bool) -> RecoveredItem:
    if not item.attempts:
        return RecoveredItem(item.item, None, None, "not_run", "no attempt yet")
    attempt = item.attempts[-1]
    stdout = rf.stdout_path(item.item, attempt.n)
    cli = parse_cli_output(stdout)
    old = read_result(rf, item.item)
    if cli.kind == "valid" and old is not None:
        return RecoveredItem(item.item, attempt.n, cli.kind, "ok", "stdout is valid and the result exists")
    transcript = rf.transcript_path(item.item, attempt.n, attempt.session_id)
    task = tasks.get(item.task)
    pitfalls = task.pitfall_patterns() if task is not None else ()
    result = mine_session(transcript, stdout=stdout, pitfalls=pitfalls)
    rate_limited = (
        result.status == "rate_limited"
        or cli.kind == "rate_limit_stub"
        or (result.status == "api_error" and result.api_error_status in PAUSE_API_STATUSES)
    )
    if rate_limited:
        reset = f"; resets {result.rate_limit_reset.isoformat()}" if result.rate_limit_reset else ""
        return RecoveredItem(
            item.item, attempt.n, cli.kind, "needs_rerun", f"rate limited{reset}", result=result
        )
    if result.status == "no_transcript":
        return RecoveredItem(item.item, attempt.n, cli.kind, "needs_rerun", "no transcript to recover from")
    recovered = [] if cli.kind == "valid" else list(RECOVERED_FIELDS)
    out = RecoveredItem(
        item.item,
        attempt.n,
        cli.kind,
        "recovered",
        f"stdout {cli.kind}; result rebuilt",
        result,
        recovered_fields=recovered,
    )
    new = recovered_result(rf, item, attempt, result, recovered)
    if not should_replace(old, new):
        out.action, out.reason = (
            "kept",
            f"stdout {cli.kind}; results/{item.item}.json is already a better result",
        )
        return out
    if write:
        write_result(rf, new)
    return out


def recover_run(run_dir: Path, *, write: bool = True, jobs: int = 1) -> list[RecoveredItem]:
    """Recover every item of the run folder ``run_dir`` whose stdout is not a valid result (see module doc),
    ``jobs`` items at a time in worker processes (each writes its own items' results). Holds the run folder's
    lock (a live runner and ``recover`` never write one folder at once). Raises
    :class:`NotFound` for a missing folder, ``RunFolderError`` for a folder without a plan or locked, and a
    located ``SpecError`` for a manifest.json that is not a valid manifest."""
    if not run_dir.is_dir():
        raise NotFound(f"{run_dir}: no such run folder")
    rf = RunFolder(run_dir)
    plan = rf.read_plan()
    if rf.manifest_path.exists():  # a lost manifest is recoverable; a garbage one is a folder edited by hand
        read_manifest(rf)
    tasks = _run_tasks(rf)
    with RunLock(rf):
        return list(in_workers(partial(_recover_item, rf, tasks=tasks, write=write), plan, jobs))


def _run_tasks(rf: RunFolder) -> dict[str, Task]:
    """The run's own task copies (for pitfall patterns); a folder without them recovers without pitfalls."""
    out: dict[str, Task] = {}
    tdir = rf.root / TASKS_DIR
    if tdir.is_dir():
        for path in sorted(tdir.glob("*.toml")):
            try:
                task = load_task(path)
            except AblateError:
                continue
            out[task.id] = task
    return out

"""Recovering results from transcripts when the CLI's stdout is missing, empty, corrupt or a rate-limit stub.

For each item of a run folder's plan, the latest attempt's stdout file is classified
(:func:`ablate.cli_output.parse_cli_output`). When it is not a valid result, the result is rebuilt from that
attempt's transcript, the fields that came from the transcript (``recovered_fields``) or from a rule or the
price table (``estimated_fields``) are marked, and the transcript's cost and turns are reconciled with the
CLI's figures wherever a salvaged CLI document exists. ``results/<item>.json`` is written atomically and
never replaced by a worse result; a rate-limited session never becomes a result (it needs a re-run).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from ablate.core.errors import NotFound
from ablate.core.fsutil import atomic_write_json
from ablate.mine.cli_output import parse_cli_output
from ablate.mine.transcript import SessionResult, mine_session
from ablate.run.folder import PlanItem, RunFolder

RecoverAction = Literal["ok", "recovered", "kept", "needs_rerun", "not_run"]

#: Fields a recovered result takes from the transcript instead of the CLI's stdout.
RECOVERED_FIELDS = (
    "status",
    "turns",
    "cost_usd",
    "duration_s",
    "api_calls",
    "input_tokens",
    "output_tokens",
    "cache_creation_tokens",
    "cache_read_tokens",
    "tool_calls",
)


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


def result_document(
    result: SessionResult, *, item: str, recovered_fields: list[str], attempt: int
) -> dict[str, Any]:
    """The ``results/<item>.json`` body of a recovered item: the mined session plus a ``recovery`` block."""
    doc = result.to_json()
    doc["item"] = item
    doc["attempt"] = attempt
    doc["recovery"] = {
        "recovered_fields": recovered_fields,
        "estimated_fields": result.estimated_fields,
        "stdout": result.stdout_kind,
        "reconciliation": {k: dict(v) for k, v in result.reconciliation.items()},
    }
    return doc


def _existing_is_better(path: Path) -> bool:
    """True when ``path`` already holds a result that a recovered one must not replace."""
    try:
        old = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    if not isinstance(old, dict):
        return False
    # A result built from a valid stdout (no recovery block) is never replaced by a recovered one.
    return old.get("recovery") is None and old.get("status") not in (None, "no_transcript")


def _recover_item(rf: RunFolder, item: PlanItem, *, write: bool) -> RecoveredItem:
    if not item.attempts:
        return RecoveredItem(item.item, None, None, "not_run", "no attempt yet")
    attempt = item.attempts[-1]
    stdout = rf.stdout_path(item.item, attempt.n)
    cli = parse_cli_output(stdout)
    if cli.kind == "valid":
        return RecoveredItem(item.item, attempt.n, cli.kind, "ok", "stdout is a valid result")
    transcript = rf.transcript_path(item.item, attempt.n, attempt.session_id)
    result = mine_session(transcript, stdout=stdout)
    if result.status == "no_transcript":
        return RecoveredItem(item.item, attempt.n, cli.kind, "needs_rerun", "no transcript to recover from")
    if result.status == "rate_limited":
        reset = f"; resets {result.rate_limit_reset.isoformat()}" if result.rate_limit_reset else ""
        return RecoveredItem(
            item.item, attempt.n, cli.kind, "needs_rerun", f"rate limited{reset}", result=result
        )
    recovered = list(RECOVERED_FIELDS)
    out = RecoveredItem(
        item.item, attempt.n, cli.kind, "recovered", f"stdout {cli.kind}", result, recovered_fields=recovered
    )
    path = rf.result_path(item.item)
    if _existing_is_better(path):
        out.action, out.reason = "kept", f"stdout {cli.kind}; results/{path.name} is already a better result"
        return out
    if write:
        atomic_write_json(
            path, result_document(result, item=item.item, recovered_fields=recovered, attempt=attempt.n)
        )
    return out


def recover_run(run_dir: Path, *, write: bool = True) -> Iterator[RecoveredItem]:
    """Recover every item of the run folder ``run_dir`` whose stdout is not a valid result (see module doc).

    Raises :class:`NotFound` for a missing folder and ``RunFolderError`` for a folder without a plan.
    """
    if not run_dir.is_dir():
        raise NotFound(f"{run_dir}: no such run folder")
    rf = RunFolder(run_dir)
    for item in rf.read_plan():
        yield _recover_item(rf, item, write=write)

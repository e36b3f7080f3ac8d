"""``<out>/compare-ledger.jsonl``: every compare run, so looks at the same tasks (hash of the task ids and file
hashes) and uses of each holdout task are counted, and every arm's fingerprint, so a file edited in place
between two runs that call it by the same name is caught (:func:`fingerprint_changes`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ablate.compare.arms import Arm
from ablate.compare.model import LooksInfo
from ablate.core.jsonl import json_lines
from ablate.setup.tasks import Task

LEDGER = "compare-ledger.jsonl"
LEDGER_SCHEMA_VERSION = 1


def task_set_sha256(tasks: Sequence[Task]) -> str:
    """Hash of the task set: sorted (id, file sha256) pairs."""
    text = "\n".join(f"{t.id}\0{t.sha256}" for t in sorted(tasks, key=lambda t: t.id))
    return hashlib.sha256(text.encode()).hexdigest()


def read_ledger(out_root: Path) -> tuple[list[dict[str, Any]], int]:
    """The ledger's entries, oldest first, and the number of unreadable lines (skipped, counted)."""
    path = out_root / LEDGER
    records = list(json_lines(path)) if path.exists() else []
    entries = [r for r in records if isinstance(r, dict) and r.get("schema_version") == LEDGER_SCHEMA_VERSION]
    return entries, len(records) - len(entries)


def append_ledger(out_root: Path, entry: dict[str, Any]) -> None:
    """Append one entry (a single ``write`` of one line, flushed and synced)."""
    out_root.mkdir(parents=True, exist_ok=True)
    data = orjson.dumps({"schema_version": LEDGER_SCHEMA_VERSION, **entry}) + b"\n"
    with (out_root / LEDGER).open("ab") as fh:
        fh.write(data)
        fh.flush()


def _statement(earlier_same_tasks: int, holdout_uses: dict[str, int]) -> str:
    if earlier_same_tasks == 0:
        head = "first compare run on this task set in this runs folder"
    else:
        head = (
            f"{earlier_same_tasks} earlier compare run(s) looked at the same tasks: a version picked as "
            "the best of several looks is a maximum, not an estimate (expect it to shrink on new tasks)"
        )
    used = {t: n for t, n in sorted(holdout_uses.items()) if n}
    if used:
        listed = ", ".join(f"{t} by {n} earlier run(s)" for t, n in used.items())
        head += f"; holdout tasks already used: {listed} (a reused holdout is no longer untouched)"
    elif holdout_uses:
        head += f"; the {len(holdout_uses)} holdout task(s) were not used by earlier runs"
    return head


def count_looks(
    entries: Sequence[dict[str, Any]], task_sha: str, holdout: Sequence[str], bad: int
) -> LooksInfo:
    """Earlier compare runs on exactly this task set, and per holdout task the earlier runs that used it."""
    same = [e for e in entries if e.get("task_set_sha256") == task_sha]
    uses = {t: sum(1 for e in entries if t in (e.get("tasks") or [])) for t in holdout}
    return LooksInfo(
        earlier_same_tasks=len(same),
        earlier_ids=[str(e.get("compare_id")) for e in same],
        holdout_uses=uses,
        unreadable_lines=bad,
        statement=_statement(len(same), uses),
    )


def arm_key(arm: Arm) -> dict[str, object]:
    """What the ledger keeps of an arm (its part of compare.json's ``arms``)."""
    info = arm.to_json()
    return {k: info[k] for k in ("name", "source", "op", "block", "fingerprint", "source_sha256")}


def fingerprint_changes(entries: Sequence[dict[str, Any]], arms: Sequence[Arm]) -> list[dict[str, object]]:
    """Arms whose name and source match an earlier run's arm but whose bytes differ (an in-place edit)."""
    out: list[dict[str, object]] = []
    for arm in arms:
        key = arm_key(arm)
        for e in entries:
            for old in e.get("arms") or []:
                if not isinstance(old, dict):
                    continue
                same_claim = all(old.get(k) == key[k] for k in ("name", "source", "op", "block"))
                if same_claim and old.get("fingerprint") != arm.fingerprint:
                    out.append(
                        {
                            "arm": arm.name,
                            "source": key["source"],
                            "earlier_compare_id": e.get("compare_id"),
                            "earlier_fingerprint": old.get("fingerprint"),
                            "fingerprint": arm.fingerprint,
                            "when": "between runs",
                        }
                    )
    return out

"""The run folder layout (DESIGN §4): the contract between `run`, `mine`, `recover` and `report`.

```
runs/<run-id>/
  manifest.json               RunManifest
  plan.jsonl                  one PlanItem per line (rewritten atomically when attempts are added)
  results/<item>.json         the mined outcome of the item's best attempt, written atomically
  stdout/<item>.a<N>.json     the CLI's own stdout, one file per attempt (never shared)
  stderr/<item>.a<N>.txt      the tail of the CLI's stderr, one file per attempt
  transcripts/<item>.a<N>/<session_id>.jsonl   the session JSONL copied from the shadow
  transcripts/<item>.a<N>/<session_id>/subagents/agent-*.jsonl|.meta.json
  report.md  report.json  plots
```

Item ids are ``<task>__<cell>__r<repeat>`` (repeat zero-padded to 2 digits), stable across runs, shards and
merges. Attempts are numbered from 1.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import Field

from ablate.errors import RunFolderError
from ablate.fsutil import atomic_write_bytes
from ablate.specs import Spec

SCHEMA_VERSION = 1

MANIFEST = "manifest.json"
PLAN = "plan.jsonl"
RESULTS = "results"
STDOUT = "stdout"
STDERR = "stderr"
TRANSCRIPTS = "transcripts"
LOCK = ".lock"


def item_id(task: str, cell: str, repeat: int) -> str:
    """The stable id of one (task, cell, repeat) item."""
    return f"{task}__{cell}__r{repeat:02d}"


class Attempt(Spec):
    """One launch of `claude -p` for an item."""

    n: int = Field(ge=1)
    """Attempt number, from 1."""
    session_id: str
    """The `--session-id` passed to the CLI; names the transcript file."""
    started_at: str | None = None
    """ISO-8601 UTC time the process was launched."""
    outcome: str | None = None
    """What the runner concluded: completed, api_error, max_turns, killed, rate_limited, no_transcript, ..."""


class PlanItem(Spec):
    """One line of plan.jsonl: what to run, in which order, and every attempt made so far."""

    schema_version: int = SCHEMA_VERSION
    """Format version of this line."""
    item: str
    """The item id (`<task>__<cell>__r<repeat>`)."""
    task: str
    """Task id."""
    cell: str
    """Cell id (C0, C1, ...)."""
    repeat: int = Field(ge=0)
    """Repeat index, from 0."""
    order: int = Field(ge=0)
    """Global execution order (randomised within each (task, repeat) block from the manifest's seed)."""
    attempts: list[Attempt] = Field(default_factory=list)
    """Every attempt, oldest first."""


class RunFolder:
    """Paths inside one run folder, plus reading and writing its plan."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    @property
    def plan_path(self) -> Path:
        return self.root / PLAN

    def result_path(self, item: str) -> Path:
        return self.root / RESULTS / f"{item}.json"

    def stdout_path(self, item: str, attempt: int) -> Path:
        return self.root / STDOUT / f"{item}.a{attempt}.json"

    def stderr_path(self, item: str, attempt: int) -> Path:
        return self.root / STDERR / f"{item}.a{attempt}.txt"

    def transcript_dir(self, item: str, attempt: int) -> Path:
        return self.root / TRANSCRIPTS / f"{item}.a{attempt}"

    def transcript_path(self, item: str, attempt: int, session_id: str) -> Path:
        return self.transcript_dir(item, attempt) / f"{session_id}.jsonl"

    def read_plan(self) -> list[PlanItem]:
        """Read plan.jsonl; a malformed line is a :class:`RunFolderError` naming the line."""
        if not self.plan_path.exists():
            raise RunFolderError(f"{self.plan_path}: no plan.jsonl; is {self.root} a run folder?")
        items: list[PlanItem] = []
        with self.plan_path.open("rb") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    items.append(PlanItem.model_validate(orjson.loads(line)))
                except (orjson.JSONDecodeError, ValueError) as exc:
                    raise RunFolderError(f"{self.plan_path}:{lineno}: invalid plan line: {exc}") from exc
        return items

    def write_plan(self, items: list[PlanItem]) -> None:
        """Rewrite plan.jsonl atomically."""
        data = b"".join(orjson.dumps(i.model_dump(mode="json")) + b"\n" for i in items)
        atomic_write_bytes(self.plan_path, data)

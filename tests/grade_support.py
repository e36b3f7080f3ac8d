"""A hand-made run folder for grading tests: manifest, plan, task copies, results and stdout files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ablate.folder.layout import (
    Attempt,
    ManifestCell,
    ManifestTask,
    PlanItem,
    RunFolder,
    SetupInfo,
    item_id,
)
from ablate.folder.result import ItemResult
from ablate.folder.session import SessionMetrics
from tests.run_folder import new_manifest, write_run

TASK_TOML = """schema_version = 1
id = "{id}"
split = "{split}"
prompt = "{prompt}"

[rubric]
pass = "Names the rounding risk before editing."
fail = "Edits without surfacing any risk."
"""


@dataclass(frozen=True)
class Item:
    task: str
    cell: str
    repeat: int
    answer: str
    cwd: str = "/nowhere/ablate-envs/run/s00/wt/repo"


def make_run(
    root: Path,
    items: Sequence[Item],
    *,
    model: str = "claude-sonnet-4-6",
    splits: dict[str, str] | None = None,
    cell_env: dict[str, dict[str, str]] | None = None,
    stripped: dict[str, list[str]] | None = None,
    setup: dict[str, object] | None = None,
    task_text: dict[str, str] | None = None,
) -> RunFolder:
    """A graded run's folder under ``root``: one completed attempt per item, its stdout answering
    ``item.answer``, and a copy of every task (``task_text``, else a rubric task of the given split)."""
    task_ids = sorted({i.task for i in items})
    splits = splits or {}
    task_files = {
        t: (task_text or {}).get(t)
        or TASK_TOML.format(id=t, split=splits.get(t, "dev"), prompt=f"Task {t}: change the billing code.")
        for t in task_ids
    }
    cells = sorted({i.cell for i in items})
    manifest = new_manifest(
        run_id=root.name,
        ablate_version="test",
        model=model,
        max_turns=5,
        argv=["claude"],
        max_retries=0,
        cells=[
            ManifestCell(
                id=c,
                dirname=c.lower(),
                stripped=(stripped or {}).get(c, []),
                env=(cell_env or {}).get(c, {}),
            )
            for c in cells
        ],
        tasks=[
            ManifestTask(id=t, sha256="0" * 64, source=f"{t}.toml", split=splits.get(t, "dev"))
            for t in task_ids
        ],
        repeats=max(i.repeat for i in items) + 1,
        seed=1,
        plan_sha256="0" * 64,
        items=len(items),
        setup=SetupInfo.model_validate({k: str(v) for k, v in (setup or {}).items()}),
    )
    plan = []
    results = []
    stdout: dict[tuple[str, int], dict[str, object]] = {}
    for n, it in enumerate(items):
        iid = item_id(it.task, it.cell, it.repeat)
        sid = f"00000000-0000-4000-8000-{n:012d}"
        plan.append(
            PlanItem(
                item=iid,
                task=it.task,
                cell=it.cell,
                repeat=it.repeat,
                order=n,
                attempts=[Attempt(n=1, session_id=sid, outcome="completed")],
            )
        )
        stdout[(iid, 1)] = {"type": "result", "subtype": "success", "result": it.answer, "session_id": sid}
        results.append(
            ItemResult(
                item=iid,
                task=it.task,
                cell=it.cell,
                repeat=it.repeat,
                order=n,
                attempt=1,
                session_id=sid,
                status="completed",
                stdout=f"stdout/{iid}.a1.json",
                session=SessionMetrics(
                    transcript=f"transcripts/{iid}.a1/{sid}.jsonl", status="completed", cwd=it.cwd
                ),
            )
        )
    return write_run(root, manifest, plan, results, task_files=task_files, stdout=stdout)

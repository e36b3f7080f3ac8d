"""The one run-folder builder of the tests: a valid manifest with test defaults, and a folder written from it
through the run folder's own writers (``write_manifest``, ``write_plan``, ``write_result``), so a synthetic
folder is read exactly as a real run's. ``report_support`` and ``grade_support`` describe their items their
own way and write them here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from ablate import PINNED_CLAUDE_VERSION
from ablate.core.claude import ClaudeBinary
from ablate.folder.layout import TASKS_DIR, PlanItem, RunFolder, RunManifest, write_manifest
from ablate.folder.result import ItemResult, write_result
from ablate.setup.tasks import Task, load_task

MODEL = "claude-sonnet-4-6"
CLAUDE = ClaudeBinary(path="/opt/claude", version=PINNED_CLAUDE_VERSION, sha256="ab" * 32, pinned=True)


def write_outcome(folder: RunFolder, it: PlanItem, passed: bool, *, turns: int = 2) -> None:
    """A completed result of plan item ``it`` costing $0.01: pitfall-free when ``passed``, else pitfall ``p``
    hit (the planted executors of the adaptive tests)."""
    write_result(
        folder,
        ItemResult(
            item=it.item, task=it.task, cell=it.cell, repeat=it.repeat, order=it.order, attempt=1,
            session_id=f"s-{it.item}", status="completed", cost_usd=0.01,
            pitfall_hits={} if passed else {"p": 1}, turns=turns,
        ),
    )  # fmt: skip


def pitfall_tasks(folder: Path, n: int) -> list[Task]:
    """``n`` one-line tasks ``t0``, ``t1``, … with one pitfall ``p`` (pattern ``x``), written to ``folder``."""
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"t{i}.toml").write_text(
            f'id = "t{i}"\nprompt = "do {i}"\n[[pitfalls]]\nid = "p"\npattern = "x"\n'
        )
    return [load_task(folder / f"t{i}.toml") for i in range(n)]


def new_manifest(**fields: Any) -> RunManifest:
    """A ``RunManifest`` of test defaults (run id, times, CLI, model, flags, seed, plan hash), ``fields`` over
    them; ``cells``, ``tasks``, ``repeats`` and ``items`` are the caller's."""
    defaults: dict[str, Any] = {
        "run_id": "20260101-000000-test",
        "created_at": "2026-01-01T00:00:00+00:00",
        "ablate_version": "0.1.0",
        "claude": CLAUDE,
        "model": MODEL,
        "max_turns": 8,
        "argv": ["claude", "-p"],
        "max_retries": 2,
        "cell_set": "test",
        "seed": 7,
        "plan_sha256": "cd" * 32,
    }
    return RunManifest(**{**defaults, **fields})


def write_run(
    root: Path,
    manifest: RunManifest,
    plan: Iterable[PlanItem],
    results: Iterable[ItemResult],
    *,
    task_files: Mapping[str, str] | None = None,
    stdout: Mapping[tuple[str, int], Mapping[str, object]] | None = None,
) -> RunFolder:
    """Write a run folder under ``root``: the manifest, ``task_files`` (task id → its TOML copy), the plan,
    ``stdout`` ((item, attempt) → the CLI's stdout document) and one result per item."""
    folder = RunFolder(root)
    root.mkdir(parents=True, exist_ok=True)
    write_manifest(folder, manifest)
    if task_files:
        (root / TASKS_DIR).mkdir(exist_ok=True)
        for task, text in task_files.items():
            (root / TASKS_DIR / f"{task}.toml").write_text(text)
    folder.write_plan(list(plan))
    for (item, attempt), doc in (stdout or {}).items():
        path = folder.stdout_path(item, attempt)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(doc))
    for result in results:
        assert write_result(folder, result), result.item
    return folder


def edit_manifest(root: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the manifest of the folder at ``root`` as JSON, in place (what a hand edit or another writer
    would leave: not validated on the way in)."""
    path = root / "manifest.json"
    data = orjson.loads(path.read_bytes())
    change(data)
    path.write_bytes(orjson.dumps(data))


def why(*parts: object) -> str:
    """An assertion message of several parts, one per line. pytest shows a string message whole but cuts the
    repr of any other object to about 240 characters, which lost the middle of a failing run's stderr."""
    return "\n".join(p if isinstance(p, str) else repr(p) for p in parts)


def items_said(runs: Path) -> str:
    """What each item of the run folders under ``runs`` ended as (status, error, the tail of its session's
    stderr), and why a probe refused a run: a failing e2e test says why the run exited non-zero, not only
    what ablate printed."""
    lines = [_probe_said(probe) for probe in sorted(runs.glob("**/probe.json"))]
    lines = [line for line in lines if line]
    for result in sorted(runs.glob("**/results/*.json")):
        r = orjson.loads(result.read_bytes())
        lines.append(f"{r.get('item')}: {r.get('status')} {r.get('error') or ''}".rstrip())
        for err in sorted(result.parent.parent.glob(f"stderr/{r.get('item')}.a*.txt")):
            lines.append(f"  {err.name}: {err.read_text(errors='replace')[-600:]}")
    return "\n".join(lines) or f"no results under {runs}"


def _probe_said(path: Path) -> str:
    """A refused probe's reasons: each cell that was not faithful, the control's fidelity, the real files."""
    doc = orjson.loads(path.read_bytes())
    if doc.get("ok") is not False:
        return ""
    lines = [f"{path}: refused"]
    for cell in doc.get("cells", []):
        if cell.get("verdict") not in ("faithful", "no-op"):
            bad = {k: v for k, v in cell.get("layers", {}).items() if v.get("status") != "ok"}
            lines.append(
                f"  {cell.get('id')} {cell.get('verdict')}: {cell.get('note')} {cell.get('problems')} {bad}"
            )
    fidelity = doc.get("fidelity") or {}
    if not fidelity.get("equal", True):
        lines.append(f"  fidelity: {fidelity.get('differences')}")
    if doc.get("real_setup_unchanged") is False:
        lines.append("  the real files changed during the probe")
    lines += [f"  note: {note}" for note in doc.get("notes", [])]
    return "\n".join(lines)

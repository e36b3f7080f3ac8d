"""Creating and opening run folders: the plan, the manifest and the run's own copies of its tasks."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from ablate import __version__
from ablate.core.claude import ClaudeBinary
from ablate.core.errors import NotFound, OutputExists, RunFolderError, UsageError
from ablate.folder.design import PieceDesignRecord
from ablate.folder.layout import (
    SCHEMA_VERSION,
    TASKS_DIR,
    ManifestCell,
    ManifestTask,
    PlanItem,
    RunFolder,
    RunManifest,
    SetupInfo,
    read_manifest,
    utcnow,
    write_manifest,
)
from ablate.run.plan import Shard, make_plan, plan_sha256, shard_items
from ablate.run.session import pinned_argv
from ablate.setup.cells import ResolvedCell
from ablate.setup.tasks import Task, load_task

DEFAULT_MAX_RETRIES = 2
#: What the manifest records of each resolved cell as it is (besides its folder name and no-op reason).
CELL_FIELDS = ("id", "label", "stripped", "empty_config", "aa_of", "pieces", "kept")


def create_run(
    out_root: Path,
    *,
    tasks: Sequence[Task],
    cell_set: str,
    cells: Sequence[ResolvedCell],
    repeats: int,
    seed: int,
    model: str,
    max_turns: int,
    claude: ClaudeBinary,
    timeout_s: float | None = None,
    extra_args: Sequence[str] = (),
    max_retries: int = DEFAULT_MAX_RETRIES,
    setup: SetupInfo | None = None,
    shard: Shard | None = None,
    run_id: str | None = None,
    noops: Mapping[str, str] | None = None,
    design: PieceDesignRecord | None = None,
    models: Sequence[str] = (),
) -> tuple[RunFolder, RunManifest]:
    """Plan a run and write its folder (manifest.json, plan.jsonl, tasks/); nothing is executed."""
    # a piece run plans its design's rows; its confirmation cells run only in the stage after the screening
    planned = [r.cell for r in design.rows] if design is not None else [c.id for c in cells]
    items = make_plan(
        [t.id for t in tasks], planned, repeats=repeats, seed=seed,
        cells_in=design.cells_in if design is not None and design.drawn is not None else None, models=models,
    )  # fmt: skip
    if shard is not None:
        shard_items(items, shard)  # validates K/N against the plan
    sha = plan_sha256(items)
    run_id = run_id or f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{sha[:8]}"
    folder = RunFolder(out_root / (run_id + (shard.suffix if shard else "")))
    if folder.root.exists() and any(folder.root.iterdir()):
        raise OutputExists(
            f"{folder.root}: run folder already exists", hint="resume it with --resume, or pick another --out"
        )
    manifest = RunManifest(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        created_at=utcnow(),
        ablate_version=__version__,
        claude=claude,
        model=model,
        max_turns=max_turns,
        timeout_s=timeout_s,
        argv=pinned_argv(claude.path, "{model}" if models else model, extra_args),
        max_retries=max_retries,
        cell_set=cell_set,
        cells=[
            ManifestCell(
                dirname=c.dirname, noop=(noops or {}).get(c.id), **{k: getattr(c, k) for k in CELL_FIELDS}
            )
            for c in cells
        ],
        tasks=[ManifestTask.model_validate(t.manifest_entry()) for t in tasks],
        repeats=repeats,
        seed=seed,
        plan_sha256=sha,
        items=len(items),
        shard=str(shard) if shard else None,
        setup=setup or SetupInfo(),
        host=socket.gethostname(),
        design=design,
        models=list(models),
    )
    folder.root.mkdir(parents=True, exist_ok=True)
    tasks_dir = folder.root / TASKS_DIR
    tasks_dir.mkdir(exist_ok=True)
    for t in tasks:
        if t.text is not None:  # a converted plugin-eval case: the TOML ablate wrote for it
            (tasks_dir / f"{t.id}.toml").write_bytes(t.text)
        else:
            shutil.copyfile(t.source, tasks_dir / f"{t.id}.toml")
    folder.write_plan(items)
    write_manifest(folder, manifest)
    return folder, manifest


def shard_folder(plan_dir: Path, shard: Shard, out_root: Path | None = None) -> tuple[RunFolder, RunManifest]:
    """Create (or reopen) the run folder of one shard of a planned run: its own folder, never sharing a lock."""
    src = RunFolder(plan_dir)
    manifest = read_manifest(src)
    if manifest.shard is not None:
        raise UsageError(
            f"{plan_dir} is itself shard {manifest.shard}", hint="shard the original plan folder"
        )
    items = src.read_plan()
    shard_items(items, shard)
    dest = RunFolder((out_root or plan_dir.parent) / (manifest.run_id + shard.suffix))
    if dest.manifest_path.exists():
        return dest, read_manifest(dest)
    dest.root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src.root / TASKS_DIR, dest.root / TASKS_DIR, dirs_exist_ok=True)
    dest.write_plan([PlanItem(**{**i.model_dump(), "attempts": []}) for i in items])
    manifest = manifest.model_copy(update={"shard": str(shard), "sessions": []})
    write_manifest(dest, manifest)
    return dest, manifest


def open_run(run_dir: Path) -> tuple[RunFolder, RunManifest]:
    """Open an existing run folder (for --resume)."""
    if not run_dir.is_dir():
        raise NotFound(f"{run_dir}: no such run folder", hint="pass the folder `ablate run` printed")
    folder = RunFolder(run_dir)
    return folder, read_manifest(folder)


def load_run_tasks(folder: RunFolder, manifest: RunManifest) -> list[Task]:
    """The run's own copies of its task files, checked against the manifest's hashes."""
    tasks = []
    for mt in manifest.tasks:
        path = folder.root / TASKS_DIR / f"{mt.id}.toml"
        if not path.exists():
            raise RunFolderError(f"{path}: task file missing from the run folder")
        task = load_task(path)
        if task.sha256 != mt.sha256:
            raise RunFolderError(f"{path}: task file changed since the run was planned (hash differs)")
        tasks.append(task)
    return tasks


def compatibility_problems(
    manifest: RunManifest, claude: ClaudeBinary, model: str | None, models: Sequence[str] = ()
) -> list[str]:
    """Why this CLI/model (or ``--models``) may not add results to the folder (empty when it may)."""
    out = []
    if claude.version != manifest.claude.version:
        out.append(f"claude version {claude.version} differs from the run's {manifest.claude.version}")
    elif claude.sha256 != manifest.claude.sha256:
        out.append(
            f"claude binary {claude.path} differs from the run's (sha256 {manifest.claude.sha256[:12]}…)"
        )
    if models and list(models) != manifest.models:
        out.append(
            f"models {', '.join(models)} differ from the run's {', '.join(manifest.models) or manifest.model}"
        )
    elif model is not None and (model != manifest.model or manifest.models):
        out.append(f"model {model} differs from the run's {', '.join(manifest.models) or manifest.model}")
    return out

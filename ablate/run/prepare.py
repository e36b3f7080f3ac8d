"""Deciding what an ``ablate run`` invocation works on: a fresh run, a resume, a planned run or one shard of it.

The policy lives here, not in the CLI: which folder, which manifest, which tasks and cells, which setup, and the
checks that refuse a folder that would mix CLI builds, models or commits. Nothing is executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.core.claude import ClaudeBinary
from ablate.core.errors import UsageError
from ablate.run.create import compatibility_problems, create_run, load_run_tasks, open_run, shard_folder
from ablate.run.folder import PlanItem, RunFolder, RunManifest
from ablate.run.plan import Shard, new_seed, parse_shard, shard_items
from ablate.run.result import read_result
from ablate.setup.cells import CellSet
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup
from ablate.setup.tasks import Task


@dataclass(frozen=True)
class RunRequest:
    """What the user asked for (the options of ``ablate run`` / ``ablate ab``)."""

    tasks: list[Path]
    cells: str
    repeats: int
    model: str
    max_turns: int
    timeout_s: float
    out: Path
    config_dir: Path
    repo: Path
    seed: int | None = None
    resume: Path | None = None
    plan: Path | None = None
    shard: str | None = None
    force: bool = False
    ablate_toml: Path | None = None
    model_given: bool = True
    """False when ``model`` is the default, so a resume keeps the run's own model."""
    config_dir_given: bool = True
    repo_given: bool = True


@dataclass
class PreparedRun:
    """A run folder ready for the scheduler."""

    folder: RunFolder
    manifest: RunManifest
    tasks: list[Task]
    catalog: Catalog
    cell_set: CellSet
    setup: Setup
    share: list[PlanItem]
    """This folder's share of the plan (all of it, unless it is a shard)."""

    def todo(self) -> list[PlanItem]:
        """Items of the share without a complete result."""
        out = []
        for p in self.share:
            res = read_result(self.folder, p.item)
            if res is None or not res.complete:
                out.append(p)
        return out


def load_cells(cells: str, ablate_toml: Path | None) -> tuple[Catalog, CellSet]:
    from ablate.setup.cells import load_cell_set
    from ablate.setup.layers import load_catalog

    catalog = load_catalog(ablate_toml)
    return catalog, load_cell_set(cells, catalog)


def setup_info(setup: Setup, cells_source: Path, ablate_toml: Path | None) -> dict[str, object]:
    """The ``setup`` block of the manifest: what was ablated, at which commit."""
    return {
        "config_dir": str(setup.config_dir),
        "repo": str(setup.repo),
        "head": setup.head,
        "dirty": setup.dirty,
        "dirty_files": list(setup.dirty_files)[:200],
        "cell_set_source": str(cells_source),
        "ablate_toml": str(ablate_toml) if ablate_toml else None,
    }


def prepare_run(req: RunRequest, claude: ClaudeBinary) -> PreparedRun:
    """Create, reopen or shard the run folder ``req`` names; raise :class:`UsageError` on any conflict."""
    from ablate.setup.load import load_setup
    from ablate.setup.tasks import load_tasks

    shard_spec: Shard | None = parse_shard(req.shard) if req.shard else None
    if req.resume is not None and req.plan is not None:
        raise UsageError("pass either --resume or --plan, not both")
    if req.resume is not None or req.plan is not None:
        if req.tasks:
            raise UsageError(
                "--tasks cannot change a planned run", hint="drop --tasks (the run folder has its own)"
            )
        if req.plan is not None and shard_spec is not None:
            folder, manifest = shard_folder(
                req.plan, shard_spec, req.out if req.out != Path("runs") else None
            )
        else:
            if shard_spec is not None:
                raise UsageError("--shard goes with --plan DIR (or a fresh run), not with --resume")
            target = req.resume if req.resume is not None else req.plan
            assert target is not None
            folder, manifest = open_run(target)
        problems = compatibility_problems(manifest, claude, req.model if req.model_given else None)
        if problems and not req.force:
            raise UsageError(
                f"{folder.root}: " + "; ".join(problems),
                hint="a run folder never mixes CLI versions or models; use a new run, or --force to record it",
            )
        info: dict[str, Any] = dict(manifest.setup)
        catalog, cell_set = load_cells(
            str(info.get("cell_set_source") or manifest.cell_set),
            Path(str(info["ablate_toml"])) if info.get("ablate_toml") else req.ablate_toml,
        )
        setup = load_setup(
            req.config_dir if req.config_dir_given else Path(str(info.get("config_dir") or req.config_dir)),
            req.repo if req.repo_given else Path(str(info.get("repo") or req.repo)),
        )
        if setup.head != info.get("head") and not req.force:
            raise UsageError(
                f"{setup.repo}: HEAD is {setup.head[:12]}, the run was planned at {str(info.get('head'))[:12]}",
                hint="check out the planned commit, or pass --force",
            )
        tasks = load_run_tasks(folder, manifest)
    else:
        if not req.tasks:
            raise UsageError("no tasks given", hint="pass --tasks DIR (e.g. --tasks tasks/)")
        catalog, cell_set = load_cells(req.cells, req.ablate_toml)
        tasks = load_tasks(req.tasks, catalog)
        setup = load_setup(req.config_dir, req.repo)
        if shard_spec is not None and req.seed is None:
            raise UsageError(
                "--shard needs --seed", hint="every shard must draw the same plan; pass the same --seed"
            )
        folder, manifest = create_run(
            req.out,
            tasks=tasks,
            cell_set=cell_set.name,
            cells=list(cell_set.cells),
            repeats=req.repeats,
            seed=req.seed if req.seed is not None else new_seed(),
            model=req.model,
            max_turns=req.max_turns,
            claude=claude,
            timeout_s=req.timeout_s,
            setup=setup_info(setup, cell_set.source, req.ablate_toml),
            shard=shard_spec,
        )
    share = shard_items(folder.read_plan(), parse_shard(manifest.shard) if manifest.shard else None)
    return PreparedRun(folder, manifest, tasks, catalog, cell_set, setup, share)

"""Deciding what an ``ablate run`` invocation works on (a fresh run, a resume, a planned run or one shard of it)
and refusing a folder that would mix CLI builds, models or commits; nothing is executed."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ablate.core.claude import ClaudeBinary
from ablate.core.constants import DEFAULT_MODEL
from ablate.core.errors import UsageError
from ablate.core.gitutil import run_git
from ablate.core.tempwork import mark_owned, remove_tree
from ablate.folder.layout import PlanItem, RunFolder, RunManifest, SetupInfo
from ablate.folder.result import read_result
from ablate.run.create import compatibility_problems, create_run, load_run_tasks, open_run, shard_folder
from ablate.run.plan import Shard, new_seed, parse_shard, shard_items
from ablate.setup.cells import CellSet, noop_reasons
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup, ancestor_leaks
from ablate.setup.tasks import Task
from ablate.setup.taskset import task_repeats

if TYPE_CHECKING:
    from ablate.run.pieces import PieceRequest

#: The options of a :class:`RunRequest` whose default a resume or a plan treats otherwise than a given value.
Defaultable = Literal["model", "config_dir", "repo", "cells", "repeats", "out"]


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
    defaulted: frozenset[Defaultable] = frozenset()
    """The options the user left at their default: a resumed or planned run keeps its own model, config dir
    and repository unless given, and refuses ``--cells`` and ``--repeats``."""
    work_dir: Path | None = None
    """Where environments are built (checked before anything is written)."""
    aa: bool = False
    """--aa: add the A/A cell (a second control built on its own) to the cell set."""
    dirty: bool = False
    """``--dirty``: uncommitted non-layer changes go into every cell; without it they are refused here."""
    pieces: PieceRequest | None = None
    """``--pieces``: the cells are a per-piece design's rows (:mod:`ablate.run.pieces`), not ``cells``."""
    adaptive: bool = False
    """``--adaptive``: the run chooses its own repeats (``repeats`` is its most), whatever ``runs`` tasks ask."""
    models: tuple[str, ...] = ()
    """``--models``: several, a run whose blocks hold every cell on every model (one is ``--model``)."""

    def given(self, option: Defaultable) -> bool:
        """Whether the user gave ``option`` (rather than leaving it at its default)."""
        return option not in self.defaulted


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
    warnings: list[str]
    """Things about the setup the user should know before paying for sessions."""

    def todo(self) -> list[PlanItem]:
        """Items of the share without a complete result."""
        results = (read_result(self.folder, p.item) for p in self.share)
        return [p for p, res in zip(self.share, results, strict=True) if res is None or not res.complete]


def load_cells(
    cells: str, ablate_toml: Path | None, *, aa: bool = False, manifest: RunManifest | None = None
) -> tuple[Catalog, CellSet]:
    """The catalog and the cell set (with ``aa``: plus the A/A cell); a piece run's rebuilt from its manifest."""
    from ablate.setup.cells import load_cell_set, with_aa
    from ablate.setup.layers import load_catalog

    catalog = load_catalog(ablate_toml)
    if manifest is not None and manifest.design is not None:
        from ablate.run.pieces import design_cell_set

        return catalog, design_cell_set(manifest)
    cell_set = load_cell_set(cells, catalog)
    return catalog, with_aa(cell_set) if aa else cell_set


def setup_info(setup: Setup, cells_source: Path, ablate_toml: Path | None) -> SetupInfo:
    """The ``setup`` block of the manifest: what was ablated, at which commit."""
    return SetupInfo(
        config_dir=str(setup.config_dir),
        repo=str(setup.repo),
        head=setup.head,
        dirty=setup.dirty,
        dirty_files=list(setup.dirty_files)[:200],
        cell_set_source=str(cells_source),
        ablate_toml=str(ablate_toml) if ablate_toml else None,
    )


def unwritable(folder: Path) -> str | None:
    """Why ablate could not create or write ``folder`` (judged by its nearest existing ancestor), or None."""
    probe = Path(os.path.abspath(folder))
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is a file, not a folder"
    if os.access(probe, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return f"{probe} is on a read-only file system" if read_only else f"{probe} is not writable by you"


def check_locations(setup: Setup, *, out: Path | None, work_dir: Path | None) -> list[str]:
    """Refuse (exit 2) folders that would put ablate's files into the user's setup or make every cell load an
    unexpected instruction file; return warnings about the setup itself."""
    if setup.config_dir.resolve() == setup.repo.resolve():
        raise UsageError(
            f"--config-dir {setup.config_dir} is the repository itself",
            hint="pass your Claude config dir (usually ~/.claude) and the repository separately",
        )
    for opt, folder in (("--out", out), ("--work-dir", work_dir)):
        if folder is None:
            continue
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{opt} {folder}: is a file, not a folder", hint=f"pass a folder to {opt}")
        if why := unwritable(folder):
            raise UsageError(f"{opt} {folder}: {why}", hint=f"pass a folder you can write to {opt}")
        for inside, what in ((setup.config_dir, "config dir"), (setup.repo, "repository")):
            if folder.resolve().is_relative_to(inside.resolve()):
                raise UsageError(
                    f"{opt} {folder}: inside the {what} {inside}",
                    hint=f"ablate never writes into your setup; pick an {opt} outside it",
                )
    if work_dir is not None and (above := ancestor_leaks(work_dir / "x")):
        raise UsageError(
            f"--work-dir {work_dir}: instruction files above it ({', '.join(a.path for a in above)}); "
            "the CLI would load them in every cell",
            hint="pick a --work-dir whose parent folders hold no CLAUDE.md, AGENTS.md, .claude/ or .mcp.json",
        )
    warnings = []
    modules = run_git(setup.repo, "submodule", "status", check=False).stdout.split("\n")
    if subs := [line.split()[1] for line in modules if line.strip() and len(line.split()) > 1]:
        warnings.append(
            f"the repository has submodules ({', '.join(subs[:5])}): cells check out HEAD without them, so "
            "their folders are empty in every cell alike"
        )
    return warnings


def prepare_run(req: RunRequest, claude: ClaudeBinary) -> PreparedRun:
    """Create, reopen or shard the run folder ``req`` names; raise :class:`UsageError` on any conflict."""
    from ablate.isolate.worktree import plan_repo
    from ablate.setup.load import load_setup

    req = with_models(req)
    shard_spec: Shard | None = parse_shard(req.shard) if req.shard else None
    if req.resume is not None and req.plan is not None:
        raise UsageError("pass either --resume or --plan, not both")
    if req.resume is not None or req.plan is not None:
        if given := [f"--{o}" for o in ("cells", "repeats") if req.given(o)]:
            raise UsageError(
                f"{' and '.join(given)} cannot change a planned run",
                hint=f"drop {' and '.join(given)}: the run folder has its own (plan a new run to change them)",
            )
        if req.tasks:
            raise UsageError(
                "--tasks cannot change a planned run", hint="drop --tasks (the run folder has its own)"
            )
        if req.plan is not None and shard_spec is not None:
            folder, manifest = shard_folder(req.plan, shard_spec, req.out if req.given("out") else None)
        else:
            if shard_spec is not None:
                raise UsageError("--shard goes with --plan DIR (or a fresh run), not with --resume")
            target = req.resume if req.resume is not None else req.plan
            assert target is not None
            folder, manifest = open_run(target)
        problems = compatibility_problems(
            manifest, claude, req.model if req.given("model") else None, req.models
        )
        if problems and not req.force:
            raise UsageError(
                f"{folder.root}: " + "; ".join(problems),
                hint="a run folder never mixes CLI versions or models; use a new run, or --force to record it",
            )
        info = manifest.setup
        if req.pieces is not None:
            raise UsageError(
                "--pieces cannot change a planned run", hint="drop --pieces (the folder has its own)"
            )
        catalog, cell_set = load_cells(
            info.cell_set_source or manifest.cell_set,
            Path(info.ablate_toml) if info.ablate_toml else req.ablate_toml,
            aa=any(c.aa_of for c in manifest.cells),
            manifest=manifest,
        )
        setup = load_setup(
            req.config_dir if req.given("config_dir") else Path(info.config_dir or req.config_dir),
            req.repo if req.given("repo") else Path(info.repo or req.repo),
        )
        warnings = check_locations(setup, out=None, work_dir=req.work_dir)
        plan_repo(setup, catalog, dirty=req.dirty)
        if setup.head != info.head and not req.force:
            raise UsageError(
                f"{setup.repo}: HEAD is {setup.head[:12]}, the run was planned at {str(info.head)[:12]}",
                hint="check out the planned commit, or pass --force",
            )
        tasks = load_run_tasks(folder, manifest)
        prepared = PreparedRun(folder, manifest, tasks, catalog, cell_set, setup, [], warnings)
    else:
        prepared, notes = new_run(req, claude, shard=shard_spec)
        prepared.warnings += notes
    shard = prepared.manifest.shard
    prepared.share = shard_items(prepared.folder.read_plan(), parse_shard(shard) if shard else None)
    return prepared


def new_run(
    req: RunRequest, claude: ClaudeBinary, *, shard: Shard | None = None, plan_only: bool = False
) -> tuple[PreparedRun, list[str]]:
    """Create a new run folder (``run``, ``ab``, ``plan``) and return it (its share left empty) with the notes
    on its tasks and repeats. ``plan_only`` (``ablate plan``): no check of uncommitted changes (``run --plan``
    makes it) and no no-op labels."""
    from ablate.isolate.worktree import plan_repo
    from ablate.setup.load import load_setup
    from ablate.setup.taskset import load_tasks

    if not req.tasks:
        raise UsageError("no tasks given", hint="pass --tasks DIR (e.g. --tasks tasks/)")
    catalog, cell_set = load_cells(req.cells, req.ablate_toml, aa=req.aa)
    notes: list[str] = []
    tasks = load_tasks(req.tasks, catalog, notes)
    chosen = "--adaptive" if req.adaptive else f"--repeats {req.repeats}" if req.given("repeats") else None
    repeats, said = task_repeats(tasks, req.repeats, decided_by=chosen)
    setup = load_setup(req.config_dir, req.repo)
    warnings = check_locations(setup, out=req.out, work_dir=req.work_dir)
    if not plan_only:  # uncommitted non-layer changes are refused (without --dirty) now, not later
        plan_repo(setup, catalog, dirty=req.dirty)
    seed = _seed(req, shard)
    design = None
    if req.pieces is not None:
        from ablate.run.pieces import plan_pieces

        planned = plan_pieces(  # a block's sessions per cell: tasks × models
            setup,
            catalog,
            req.pieces,
            tasks=len(tasks) * max(1, len(req.models)),
            repeats=repeats,
            repeats_given=req.given("repeats"),
            seed=seed,
            clashes=[o for o, on in (("--cells", req.given("cells")), ("--aa", req.aa)) if on],
        )
        cell_set, design, repeats = planned.cell_set, planned.record, planned.repeats
    folder, manifest = create_run(
        req.out,
        tasks=tasks,
        cell_set=cell_set.name,
        cells=list(cell_set.cells),
        repeats=repeats,
        seed=seed,
        model=req.model,
        max_turns=req.max_turns,
        claude=claude,
        timeout_s=req.timeout_s,
        setup=setup_info(setup, cell_set.source, req.ablate_toml),
        shard=shard,
        noops=None if plan_only else noop_reasons(cell_set.cells, setup, catalog),
        design=design,
        models=req.models,
    )
    prepared = PreparedRun(folder, manifest, tasks, catalog, cell_set, setup, [], warnings)
    return prepared, [*notes, *([said] if said else [])]


def with_models(req: RunRequest) -> RunRequest:
    """The request's model checked, and ``--models``: the first is the reference (``model``)."""
    if not req.model.strip():
        raise UsageError(
            "--model is empty", hint=f"pass the model every session is pinned to, e.g. {DEFAULT_MODEL}"
        )
    if req.models and req.adaptive:
        raise UsageError(
            "--models with --adaptive: the rounds decide the cells of one model",
            hint="run a fixed design (--repeats N) with --models, or one model adaptively",
        )
    if not req.models:
        return req
    several = req.models if len(req.models) > 1 else ()
    return replace(req, model=req.models[0], models=several, defaulted=req.defaulted - {"model"})


def _seed(req: RunRequest, shard: Shard | None) -> int:
    """The run's seed: ``--seed``, else a new one (a shard needs it given: every shard draws the same plan)."""
    if shard is not None and req.seed is None:
        raise UsageError(
            "--shard needs --seed", hint="every shard must draw the same plan; pass the same --seed"
        )
    return req.seed if req.seed is not None else new_seed()


@contextlib.contextmanager
def work_area(work_dir: Path | None, run_id: str) -> Iterator[Path]:
    """The folder a run's environments are built in, ``<work-dir or <temp>/ablate-envs>/<run-id>``: made on
    entry, removed on exit with whatever a backend left inside (and ``ablate-envs`` when empty)."""
    default = work_dir is None
    base = Path(tempfile.gettempdir()) / "ablate-envs" if work_dir is None else work_dir
    root = base / run_id
    root.mkdir(parents=True, exist_ok=True)
    mark_owned(root)  # a run killed with SIGKILL leaves it: the next command's sweep removes it
    try:
        yield root
    finally:
        remove_tree(root)
        if default:
            with contextlib.suppress(OSError):
                base.rmdir()  # only when empty: another run may be using it

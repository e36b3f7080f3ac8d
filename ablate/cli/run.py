"""``ablate run``, ``ablate ab``, ``ablate plan``, ``ablate merge``: thin shells over ablate.run.runner/plan/merge."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from ablate.cli.common import (
    AblateToml,
    ClaudeBin,
    ConfigDir,
    Json,
    Repo,
    cli_errors,
    default_config_dir,
    print_json,
)
from ablate.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, UsageError

app = typer.Typer()

Tasks = Annotated[
    list[Path] | None,
    typer.Option("--tasks", "-t", help="Task files or folders of *.toml task files (repeatable)."),
]
Cells = Annotated[
    str,
    typer.Option(
        "--cells", help="Cell set: a shipped name (layered, binary, extended, leave-one-in) or a .toml."
    ),
]
Repeats = Annotated[int, typer.Option("--repeats", "-n", min=1, help="Sessions per (task, cell).")]
Model = Annotated[
    str,
    typer.Option(
        "--model", "-m", envvar="ABLATE_MODEL", help="The model every session is pinned to (--model)."
    ),
]
MaxTurns = Annotated[
    int, typer.Option("--max-turns", min=1, help="--max-turns of every session (tasks may override).")
]
Jobs = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Sessions running at once.")]
Budget = Annotated[
    float | None,
    typer.Option("--budget-usd", min=0, help="Stop launching once the recorded spend reaches this many USD."),
]
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout", min=1, help="Seconds a session may run before its whole process tree is killed."
    ),
]
Out = Annotated[Path, typer.Option("--out", "-o", help="Folder that holds run folders.")]
Seed = Annotated[
    int | None, typer.Option("--seed", help="Order seed (default: a fresh one, recorded in the manifest).")
]
Resume = Annotated[
    Path | None,
    typer.Option("--resume", help="Continue this run folder: skip complete items, re-run the rest."),
]
PlanDir = Annotated[
    Path | None,
    typer.Option(
        "--plan", help="Run a folder written by `ablate plan` (with --shard: one share, in its own folder)."
    ),
]
ShardOpt = Annotated[
    str | None,
    typer.Option(
        "--shard", help="K/N: run the K-th of N deterministic shares (whole (task, repeat) blocks)."
    ),
]
Force = Annotated[
    bool, typer.Option("--force", help="Let a run folder take sessions from another claude version or model.")
]
WorkDir = Annotated[
    Path | None,
    typer.Option(
        "--work-dir",
        envvar="ABLATE_WORK_DIR",
        help="Where cell environments are built (default: the temp dir). No CLAUDE.md may sit above it.",
        show_default=False,
    ),
]
Grace = Annotated[
    float,
    typer.Option("--grace", min=0, help="After Ctrl-C, seconds running sessions get before being killed."),
]
Backoff = Annotated[
    float,
    typer.Option("--backoff", min=0.01, help="First pause (s) after a rate limit that names no reset time."),
]
Dirty = Annotated[
    bool, typer.Option("--dirty", help="Carry uncommitted changes of the repo into every cell.")
]
IsolateState = Annotated[
    bool, typer.Option("--isolate-state", help="Copy (never link) hook state folders of the config dir.")
]


def _cells(cells: str, ablate_toml: Path | None) -> tuple[Any, Any]:
    from ablate.setup.cells import load_cell_set
    from ablate.setup.layers import load_catalog

    catalog = load_catalog(ablate_toml)
    return catalog, load_cell_set(cells, catalog)


def _setup_info(setup: Any, cells_source: Path, ablate_toml: Path | None) -> dict[str, object]:
    return {
        "config_dir": str(setup.config_dir),
        "repo": str(setup.repo),
        "head": setup.head,
        "dirty": setup.dirty,
        "dirty_files": list(setup.dirty_files)[:200],
        "cell_set_source": str(cells_source),
        "ablate_toml": str(ablate_toml) if ablate_toml else None,
    }


def _err(text: str) -> None:
    typer.echo(text, err=True)


def _print_estimate(items: int, model: str, max_turns: int, observed: list[float] | None = None) -> None:
    from ablate.run.plan import estimate

    est = estimate(items, model=model, max_turns=max_turns, observed_usd=observed or [])
    cost = f"~${est.usd:.2f}" if est.usd is not None else "unknown cost"
    _err(f"plan: {est.sessions} sessions, ~{est.calls} API calls, {cost} ({est.basis})")


@app.command("plan")
@cli_errors
def plan_cmd(
    tasks: Tasks = None,
    cells: Cells = "layered",
    repeats: Repeats = 1,
    model: Model = "claude-sonnet-4-6",
    max_turns: MaxTurns = 30,
    timeout: Timeout = 1800,
    out: Out = Path("runs"),
    config_dir: ConfigDir = None,
    repo: Repo = Path("."),
    claude_bin: ClaudeBin = None,
    seed: Seed = None,
    ablate_toml: AblateToml = None,
    json: Json = False,
) -> None:
    """Plan a run without executing it: write manifest.json, plan.jsonl and the tasks to a run folder.

    Run it whole with `ablate run --plan DIR`, or in shares with `ablate run --plan DIR --shard K/N`
    (one folder per shard), then `ablate merge` the shard folders.

    Exit codes: 0 ok, 2 bad input (tasks, cells, setup, options).
    """
    from ablate.core.claude import find_claude
    from ablate.run.plan import blocks, estimate, new_seed
    from ablate.run.runner import create_run
    from ablate.setup.load import load_setup
    from ablate.setup.tasks import load_tasks

    if not tasks:
        raise UsageError("no tasks given", hint="pass --tasks DIR (e.g. --tasks tasks/)")
    catalog, cell_set = _cells(cells, ablate_toml)
    loaded = load_tasks(tasks, catalog)
    setup = load_setup(config_dir or default_config_dir(), repo)
    claude = find_claude(claude_bin)
    folder, manifest = create_run(
        out,
        tasks=loaded,
        cell_set=cell_set.name,
        cells=list(cell_set.cells),
        repeats=repeats,
        seed=seed if seed is not None else new_seed(),
        model=model,
        max_turns=max_turns,
        claude=claude,
        timeout_s=timeout,
        setup=_setup_info(setup, cell_set.source, ablate_toml),
    )
    n_blocks = len(blocks(folder.read_plan()))
    if json:
        print_json(
            {
                "folder": str(folder.root),
                "items": manifest.items,
                "blocks": n_blocks,
                "seed": manifest.seed,
                "estimate": estimate(manifest.items, model=model, max_turns=max_turns).to_json(),
            }
        )
        return
    _print_estimate(manifest.items, model, max_turns)
    typer.echo(f"{folder.root}: {manifest.items} items in {n_blocks} blocks (at most {n_blocks} shards)")


def _run(
    *,
    tasks: list[Path] | None,
    cells: str,
    repeats: int,
    model: str,
    max_turns: int,
    jobs: int,
    budget_usd: float | None,
    timeout: float,
    out: Path,
    config_dir: Path | None,
    repo: Path,
    claude_bin: Path | None,
    seed: int | None,
    resume: Path | None,
    plan: Path | None,
    shard: str | None,
    force: bool,
    work_dir: Path | None,
    grace: float,
    backoff: float,
    dirty: bool,
    isolate_state: bool,
    ablate_toml: AblateToml,
    json: bool,
    model_given: bool,
) -> None:
    from ablate.core.claude import find_claude
    from ablate.isolate.backend import ShadowEnvironments
    from ablate.run.plan import Shard, new_seed, parse_shard, shard_items
    from ablate.run.runner import (
        Runner,
        RunOptions,
        compatibility_problems,
        create_run,
        load_run_tasks,
        open_run,
        read_result,
        shard_folder,
    )
    from ablate.setup.load import load_setup
    from ablate.setup.tasks import load_tasks

    claude = find_claude(claude_bin)
    shard_spec: Shard | None = parse_shard(shard) if shard else None
    if resume is not None and plan is not None:
        raise UsageError("pass either --resume or --plan, not both")
    if resume is not None or plan is not None:
        if tasks:
            raise UsageError(
                "--tasks cannot change a planned run", hint="drop --tasks (the run folder has its own)"
            )
        if plan is not None and shard_spec is not None:
            folder, manifest = shard_folder(plan, shard_spec, out if out != Path("runs") else None)
        else:
            if shard_spec is not None:
                raise UsageError("--shard goes with --plan DIR (or a fresh run), not with --resume")
            folder, manifest = open_run(resume or plan)  # type: ignore[arg-type]
        problems = compatibility_problems(manifest, claude, model if model_given else None)
        if problems and not force:
            raise UsageError(
                f"{folder.root}: " + "; ".join(problems),
                hint="a run folder never mixes CLI versions or models; use a new run, or --force to record it",
            )
        setup_info = manifest.setup
        catalog, cell_set = _cells(
            str(setup_info.get("cell_set_source") or manifest.cell_set),
            Path(str(setup_info["ablate_toml"])) if setup_info.get("ablate_toml") else ablate_toml,
        )
        setup = load_setup(
            config_dir or Path(str(setup_info.get("config_dir") or default_config_dir())),
            repo if repo != Path(".") else Path(str(setup_info.get("repo") or ".")),
        )
        if setup.head != setup_info.get("head") and not force:
            raise UsageError(
                f"{setup.repo}: HEAD is {setup.head[:12]}, the run was planned at {str(setup_info.get('head'))[:12]}",
                hint="check out the planned commit, or pass --force",
            )
        run_tasks = load_run_tasks(folder, manifest)
    else:
        if not tasks:
            raise UsageError("no tasks given", hint="pass --tasks DIR (e.g. --tasks tasks/)")
        catalog, cell_set = _cells(cells, ablate_toml)
        run_tasks = load_tasks(tasks, catalog)
        setup = load_setup(config_dir or default_config_dir(), repo)
        if shard_spec is not None and seed is None:
            raise UsageError(
                "--shard needs --seed", hint="every shard must draw the same plan; pass the same --seed"
            )
        folder, manifest = create_run(
            out,
            tasks=run_tasks,
            cell_set=cell_set.name,
            cells=list(cell_set.cells),
            repeats=repeats,
            seed=seed if seed is not None else new_seed(),
            model=model,
            max_turns=max_turns,
            claude=claude,
            timeout_s=timeout,
            setup=_setup_info(setup, cell_set.source, ablate_toml),
            shard=shard_spec,
        )
    share = shard_items(folder.read_plan(), parse_shard(manifest.shard) if manifest.shard else None)
    todo = [p for p in share if (read_result(folder, p.item) or {}).get("complete") is not True]
    observed = [a.cost_usd for p in share for a in p.attempts if a.cost_usd]
    _print_estimate(len(todo), manifest.model, manifest.max_turns, observed)
    _err(f"run folder: {folder.root}")

    work_root = (work_dir or Path(tempfile.gettempdir()) / "ablate-envs") / folder.root.name
    backend = ShadowEnvironments(
        setup,
        catalog,
        work_root,
        isolate_state=isolate_state,
        dirty=dirty,
        base_env=dict(os.environ),
        extra_env={"CLAUDE_CODE_MAX_RETRIES": str(manifest.max_retries)},
    )
    options = RunOptions(jobs=jobs, budget_usd=budget_usd, grace_s=grace, backoff_s=backoff)
    display = _Display(enabled=not json)
    runner = Runner(
        folder,
        manifest,
        tasks=run_tasks,
        cells=list(cell_set.cells),
        backend=backend,
        options=options,
        claude=claude,
        forced=force,
        work_root=work_root,
        on_progress=display.update,
    )

    presses = 0

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        nonlocal presses
        presses += 1
        runner.request_stop(kill=presses > 1)
        if presses == 1:
            display.note(
                f"stopping: no new sessions; running ones get {grace:.0f} s (Ctrl-C again to kill them)"
            )
        else:
            display.note("killing running sessions")

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        summary = runner.run()
    finally:
        signal.signal(signal.SIGINT, previous)
        display.close()
    if json:
        print_json(summary.to_json())
    else:
        typer.echo(
            f"{summary.outcome}: {summary.done}/{summary.total} complete, {len(summary.failed)} failed, "
            f"{len(summary.pending)} not run, {summary.rate_limited} rate-limited attempts, "
            f"${summary.spend_usd:.4f} spent, {summary.elapsed_s:.1f} s ({folder.root})"
        )
        if summary.pending and summary.outcome != "finished":
            typer.echo(f"resume with: ablate run --resume {folder.root}")
    code = {"finished": EXIT_OK, "interrupted": EXIT_INTERRUPTED}.get(summary.outcome, EXIT_PARTIAL)
    if code != EXIT_OK:
        raise typer.Exit(code)


class _Display:
    """A rich progress bar on stderr, fed by the runner's progress callback."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None

    def _start(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "failed {task.fields[failed]}  rate-limited {task.fields[rl]}  running {task.fields[running]}"
            ),
            TimeElapsedColumn(),
            TextColumn("${task.fields[spend]:.4f}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task("run", total=total, failed=0, rl=0, running=0, spend=0.0)

    def update(self, p: Any) -> None:
        if not self.enabled:
            return
        if self._progress is None:
            self._start(p.total)
        desc = {"paused": "paused (rate limit)", "stopping": "stopping", "building": "building"}.get(
            p.phase, "run"
        )
        self._progress.update(
            self._task,
            completed=p.done,
            total=p.total,
            description=desc,
            failed=p.failed,
            rl=p.rate_limited,
            running=p.running,
            spend=p.spend_usd,
        )
        if p.message:
            self.note(p.message)

    def note(self, text: str) -> None:
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.console.print(text)
        else:
            _err(text)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


@app.command("run")
@cli_errors
def run_cmd(
    ctx: typer.Context,
    tasks: Tasks = None,
    cells: Cells = "layered",
    repeats: Repeats = 1,
    model: Model = "claude-sonnet-4-6",
    max_turns: MaxTurns = 30,
    jobs: Jobs = 2,
    budget_usd: Budget = None,
    timeout: Timeout = 1800,
    out: Out = Path("runs"),
    config_dir: ConfigDir = None,
    repo: Repo = Path("."),
    claude_bin: ClaudeBin = None,
    seed: Seed = None,
    resume: Resume = None,
    plan: PlanDir = None,
    shard: ShardOpt = None,
    force: Force = False,
    work_dir: WorkDir = None,
    grace: Grace = 30.0,
    backoff: Backoff = 30.0,
    dirty: Dirty = False,
    isolate_state: IsolateState = False,
    ablate_toml: AblateToml = None,
    json: Json = False,
) -> None:
    """Run every (task × cell × repeat) item with the pinned `claude -p` command, in parallel, resumably.

    Writes a run folder (manifest.json, plan.jsonl, stdout/, transcripts/, results/). Ctrl-C stops launching
    and leaves a folder `--resume` continues.

    Exit codes: 0 every item complete, 1 the run could not proceed (locked folder, incompatible CLI or
    model), 2 bad input, 3 some items failed or were not run (budget, rate limit), 130 interrupted.
    """
    _run(**_params(locals()), model_given=_given(ctx, "model"))


@app.command("ab")
@cli_errors
def ab_cmd(
    ctx: typer.Context,
    tasks: Tasks = None,
    repeats: Repeats = 1,
    model: Model = "claude-sonnet-4-6",
    max_turns: MaxTurns = 30,
    jobs: Jobs = 2,
    budget_usd: Budget = None,
    timeout: Timeout = 1800,
    out: Out = Path("runs"),
    config_dir: ConfigDir = None,
    repo: Repo = Path("."),
    claude_bin: ClaudeBin = None,
    seed: Seed = None,
    resume: Resume = None,
    plan: PlanDir = None,
    shard: ShardOpt = None,
    force: Force = False,
    work_dir: WorkDir = None,
    grace: Grace = 30.0,
    backoff: Backoff = 30.0,
    dirty: Dirty = False,
    isolate_state: IsolateState = False,
    ablate_toml: AblateToml = None,
    json: Json = False,
) -> None:
    """`ablate run` with the `binary` cell set: the whole setup (C0) against none of it (C11).

    Exit codes: as `ablate run`.
    """
    _run(**_params(locals()), cells="binary", model_given=_given(ctx, "model"))


def _params(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k != "ctx"}


def _given(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT",)


@app.command("merge")
@cli_errors
def merge_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (e.g. the shard folders) to combine.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The merged run folder to create.")],
    force: Annotated[
        bool, typer.Option("--force", help="Merge even when the manifests' identities differ.")
    ] = False,
    json: Json = False,
) -> None:
    """Combine run folders of one plan (identical manifests) into one; per item the best result wins.

    Exit codes: 0 ok, 1 the folders do not belong together (different manifests), 2 bad input.
    """
    from ablate.run.merge import merge_runs

    summary = merge_runs(runs, out, force=force)
    if json:
        print_json(summary)
    else:
        typer.echo(
            f"{out}: {summary['complete']}/{summary['items']} items complete, "
            f"{summary['results']} results from {len(runs)} folders"
        )

"""``ablate run``, ``ablate ab``, ``ablate plan``, ``ablate merge``: thin shells over ablate.run."""

from __future__ import annotations

import inspect
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from ablate.cli.common import (
    AblateToml,
    ClaudeBin,
    ConfigDir,
    IsolationOpt,
    Json,
    Repo,
    cli_errors,
    default_config_dir,
    print_json,
)
from ablate.cli.judge import AllowSameJudge, JudgeModel, Split, split_choice
from ablate.core.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, UsageError
from ablate.folder.layout import RunFolder
from ablate.grade.hook import GradingHook

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
    int | None,
    typer.Option(
        "--seed",
        min=0,
        max=2**64 - 1,
        help="Order seed, 0 to 2^64-1 (default: a fresh one, recorded in the manifest).",
    ),
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
AdaptiveOpt = Annotated[
    bool,
    typer.Option(
        "--adaptive",
        help="Run in rounds and stop each cell once decided (anytime-valid tests; see --max-repeats).",
    ),
]
MaxRepeats = Annotated[
    int,
    typer.Option("--max-repeats", min=1, help="--adaptive: rounds at most (one repeat of every task each)."),
]
MinEffect = Annotated[
    float,
    typer.Option(
        "--min-effect",
        min=0.01,
        max=0.99,
        help="--adaptive: smallest pitfall-free rate difference worth finding; smaller ones end as a draw.",
    ),
]
Alpha = Annotated[
    float,
    typer.Option("--alpha", min=0.001, max=0.5, help="--adaptive: family-wise error of the real marks."),
]


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
    from ablate.run.create import create_run
    from ablate.run.plan import blocks, estimate, new_seed
    from ablate.run.prepare import check_locations, load_cells, setup_info
    from ablate.setup.load import load_setup
    from ablate.setup.tasks import load_tasks

    if not tasks:
        raise UsageError("no tasks given", hint="pass --tasks DIR (e.g. --tasks tasks/)")
    catalog, cell_set = load_cells(cells, ablate_toml)
    loaded = load_tasks(tasks, catalog)
    setup = load_setup(config_dir or default_config_dir(), repo)
    if not model.strip():
        raise UsageError("--model is empty", hint="pass the model every session is pinned to")
    for warning in check_locations(setup, out=out, work_dir=None):
        _err(f"warning: {warning}")
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
        setup=setup_info(setup, cell_set.source, ablate_toml),
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
    isolation: str | None,
    ablate_toml: AblateToml,
    json: bool,
    model_given: bool,
    cells_given: bool = False,
    repeats_given: bool = False,
    judge_model: str | None = None,
    allow_same_judge: bool = False,
    split: str = "both",
    adaptive: bool = False,
    max_repeats: int = 20,
    min_effect: float = 0.2,
    alpha: float = 0.05,
) -> None:
    from ablate.core.claude import find_claude
    from ablate.folder.layout import write_manifest
    from ablate.folder.result import read_result
    from ablate.isolate.backend import open_backend
    from ablate.isolate.guard import changes_and_notes
    from ablate.isolate.guard import take as take_snapshot
    from ablate.isolate.namespace import choose_isolation
    from ablate.isolate.procenv import one_endpoint
    from ablate.run.adaptive import AdaptiveOptions, read_state, run_adaptive
    from ablate.run.create import open_run
    from ablate.run.prepare import RunRequest, prepare_run, work_area
    from ablate.run.scheduler import Runner, RunOptions

    if resume is not None and read_state(RunFolder(resume)) is not None:
        adaptive = True  # an adaptive run resumes adaptively, with the options it started with
    adaptive_opts = (
        AdaptiveOptions(max_repeats=max_repeats, min_effect=min_effect, alpha=alpha, budget_usd=budget_usd)
        if adaptive and resume is None
        else None
    )
    if adaptive and (plan is not None or shard is not None):
        raise UsageError("--adaptive schedules its own rounds: it cannot run a --plan or a --shard")
    if adaptive and repeats_given:
        raise UsageError(
            "--repeats and --adaptive: an adaptive run chooses its repeats",
            hint="pass --max-repeats N, the most rounds it may run",
        )
    if adaptive_opts is not None:
        repeats = max_repeats  # the folder is planned for the largest run
    # one endpoint for all cells (DESIGN §3.5): refused here, before anything is looked up or written
    endpoint = one_endpoint((config_dir or default_config_dir()).expanduser(), repo.expanduser(), os.environ)
    claude = find_claude(claude_bin)
    if judge_model is not None and resume is None and plan is None:
        from ablate.grade.judge import check_judges

        check_judges(model, [judge_model], allow_same=allow_same_judge)  # before a run folder is made
    if split_choice(split) != "both":
        if resume is not None or plan is not None:
            raise UsageError("--split picks the tasks of a new run; a resumed or planned run keeps its own")
        from ablate.setup.tasks import select_split

        tasks = select_split(tasks or [], split)
    prep = prepare_run(
        RunRequest(
            tasks=list(tasks or []),
            cells=cells,
            repeats=repeats,
            model=model,
            max_turns=max_turns,
            timeout_s=timeout,
            out=out,
            config_dir=config_dir or default_config_dir(),
            repo=repo,
            seed=seed,
            resume=resume,
            plan=plan,
            shard=shard,
            force=force,
            ablate_toml=ablate_toml,
            model_given=model_given,
            config_dir_given=config_dir is not None,
            repo_given=repo != Path("."),
            work_dir=work_dir,
            cells_given=cells_given,
            repeats_given=repeats_given,
        ),
        claude,
    )
    folder, manifest, setup, catalog, cell_set = (
        prep.folder,
        prep.manifest,
        prep.setup,
        prep.catalog,
        prep.cell_set,
    )
    if manifest.setup.get("endpoint") != endpoint.to_json():
        manifest.setup = {**manifest.setup, "endpoint": endpoint.to_json()}
        write_manifest(folder, manifest)
    run_tasks = prep.tasks
    todo = prep.todo()
    observed = [a.cost_usd for p in prep.share for a in p.attempts if a.cost_usd]
    for warning in prep.warnings:
        _err(f"warning: {warning}")
    _print_estimate(len(todo), manifest.model, manifest.max_turns, observed)
    _err(f"run folder: {folder.root}")

    chosen = choose_isolation(isolation)
    _err(f"isolation: {chosen.backend} ({chosen.reason})")
    manifest = manifest.model_copy(update={"isolation": chosen.to_json()})
    write_manifest(folder, manifest)
    with work_area(work_dir, folder.root.name) as work_root:
        options = RunOptions(jobs=jobs, budget_usd=budget_usd, grace_s=grace, backoff_s=backoff)
        display = _Display(enabled=not json)

        def make_runner() -> Runner:
            # each round's runner sees the manifest the last one wrote, and gets its own backend (a runner
            # starts by cleaning the work root, which removes what a previous backend object had built)
            f, m = open_run(folder.root)
            backend = open_backend(
                chosen.backend,
                setup,
                catalog,
                work_root,
                isolate_state=isolate_state,
                dirty=dirty,
                base_env=dict(os.environ),
                extra_env={"CLAUDE_CODE_MAX_RETRIES": str(manifest.max_retries)},
            )
            return Runner(
                f,
                m,
                tasks=run_tasks,
                cells=list(cell_set.cells),
                backend=backend,
                options=options,
                tree_hook=GradingHook(),
                claude=claude,
                forced=force,
                work_root=work_root,
                on_progress=display.update,
            )

        runner = make_runner()

        grader = _JudgeAsYouGo(folder.root, manifest.model, judge_model, allow_same_judge, display.note)

        presses = 0

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            nonlocal presses
            presses += 1
            runner.request_stop(kill=presses > 1)  # the current round's runner, with --adaptive
            if presses == 1:
                display.note(
                    f"stopping: no new sessions; running ones get {grace:.0f} s (Ctrl-C again to kill them)"
                )
            else:
                display.note("killing running sessions")

        guard = (
            take_snapshot(setup.config_dir, setup.repo, setup.home, skip=(folder.root, work_root))
            if chosen.backend == "links"
            else None
        )
        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            grader.start()
            if adaptive:
                last: list[Any] = []

                def run_items(
                    items: Any,
                ) -> str:  # the items are in plan.jsonl: the runner runs what is pending
                    nonlocal runner
                    if presses:
                        return "interrupted"
                    runner = make_runner()
                    last[:] = [runner.run()]
                    return str(last[0].outcome)

                adaptive_summary = run_adaptive(
                    folder,
                    manifest,
                    run_items,
                    adaptive_opts,
                    on_look=lambda lk: display.note(_look_line(lk)),
                )
                summary = last[0] if last else make_runner().run()
                for note in adaptive_summary.notes:
                    display.note(f"note: {note}")
            else:
                summary = runner.run()
        finally:
            grader.finish(interrupted=presses > 0)
            signal.signal(signal.SIGINT, previous)
            display.close()
        changed, guard_notes = changes_and_notes(guard) if guard is not None else ([], [])
    if guard is not None:
        _, manifest = open_run(folder.root)
        isolation_info = {**manifest.isolation, "real_files_changed": changed}
        write_manifest(folder, manifest.model_copy(update={"isolation": isolation_info}))
    for note in guard_notes:
        _err(f"note: {note}")
    for path in changed[:20]:
        _err(f"ERROR: links isolation: your real file changed during the run: {path}")
    if len(changed) > 20:
        _err(
            f"ERROR: … and {len(changed) - 20} more (all listed in manifest.json, isolation.real_files_changed)"
        )
    _print_writes(folder.root)
    if adaptive:
        _print_adaptive(adaptive_summary.to_json(), json)
    if json:
        print_json({**summary.to_json(), **({"adaptive": adaptive_summary.to_json()} if adaptive else {})})
    else:
        typer.echo(
            f"{summary.outcome}: {summary.done}/{summary.total} complete, {len(summary.failed)} failed, "
            f"{len(summary.pending)} not run, {summary.rate_limited} rate-limited attempts, "
            f"${summary.spend_usd:.4f} spent, {summary.elapsed_s:.1f} s ({folder.root})"
        )
        for item in summary.failed:
            res = read_result(folder, item)
            why = (res.error or res.status) if res is not None else "no result"
            typer.echo(f"  failed {item}: {why}")
        if summary.pending and summary.outcome != "finished":
            typer.echo(f"resume with: ablate run --resume {folder.root}")
    from ablate.cli.report import report_after_run

    report_after_run(folder.root, quiet=json)
    code = {"finished": EXIT_OK, "interrupted": EXIT_INTERRUPTED}.get(summary.outcome, EXIT_PARTIAL)
    if adaptive:
        code = EXIT_OK if adaptive_summary.finished else code if code != EXIT_OK else EXIT_PARTIAL
    if changed and code == EXIT_OK:
        code = EXIT_FAILURE
    if code != EXIT_OK:
        raise typer.Exit(code)


def _look_line(look: Any) -> str:
    counts: dict[str, int] = {}
    for v in look.cells.values():
        counts[v.decision] = counts.get(v.decision, 0) + 1
    said = ", ".join(f"{n} {d}" for d, n in sorted(counts.items()))
    return f"round {look.round}: {look.sessions} sessions, ${look.spend_usd:.4f}; {said}"


def _print_adaptive(data: dict[str, Any], json: bool) -> None:
    if json:
        return
    _err(f"adaptive: stopped ({data['stopped']}) after {data['rounds']} rounds, {data['sessions']} sessions")
    for cell, d in data["decisions"].items():
        _err(f"  {cell}: {d['reason']}")


def _print_writes(run_dir: Path) -> None:
    """What the run's sessions wrote outside their cells, per cell and folder (all of it discarded)."""
    from ablate.folder.layout import RunFolder
    from ablate.folder.result import iter_results
    from ablate.isolate.writes import run_summary_lines

    sessions = [(r.cell, r.writes) for r in iter_results(RunFolder(run_dir)) if r.writes]
    for line in run_summary_lines(sessions):
        _err(line)


class _JudgeAsYouGo:
    """``ablate run --judge-model M``: judge complete items in a background thread while the run goes on."""

    def __init__(
        self,
        run_dir: Path,
        model: str,
        judge_model: str | None,
        allow_same: bool,
        note: Any,
    ) -> None:
        self.run_dir = run_dir
        self.judge_model = judge_model
        self.note = note
        self._done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        if judge_model is not None:
            from ablate.grade.judge import check_judges, make_client

            check_judges(model, [judge_model], allow_same=allow_same)
            self._client = make_client()  # fail before the run when there is no key

    def start(self) -> None:
        if self.judge_model is not None:
            self._thread = threading.Thread(target=self._loop, name="ablate-judge-as-you-go", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        from ablate.grade.judge import JudgeOptions, judge_folder

        assert self.judge_model is not None
        options = JudgeOptions(judge_models=(self.judge_model,), allow_same_judge=True, jobs=2)
        try:
            while True:
                last = self._done.is_set()
                summary = judge_folder(self.run_dir, options, client=self._client, stop=self._stop)
                if last:
                    self.note(
                        f"judge {self.judge_model}: {summary.by_judge.get(self.judge_model)} "
                        f"({summary.pending} left; `ablate judge {self.run_dir} --judge-model "
                        f"{self.judge_model}` resumes)"
                    )
                    return
                self._done.wait(2.0)
        except BaseException as exc:  # reported after the run; the run itself is not affected
            self.error = exc

    def finish(self, *, interrupted: bool) -> None:
        if self._thread is None:
            return
        if interrupted:
            self._stop.set()
        self._done.set()
        self._thread.join()
        if self.error is not None:
            self.note(f"judge failed: {self.error}")


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
        if not self.enabled:  # --json: no bar, but what the runner says (pauses, stops) still reaches stderr
            if p.message:
                _err(p.message)
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
    isolation: IsolationOpt = None,
    ablate_toml: AblateToml = None,
    judge_model: JudgeModel = None,
    allow_same_judge: AllowSameJudge = False,
    split: Split = "both",
    adaptive: AdaptiveOpt = False,
    max_repeats: MaxRepeats = 20,
    min_effect: MinEffect = 0.2,
    alpha: Alpha = 0.05,
    json: Json = False,
) -> None:
    """Run every (task × cell × repeat) item with the pinned `claude -p` command, in parallel, resumably.

    Writes a run folder (manifest.json, plan.jsonl, stdout/, transcripts/, results/, grades/ and diffs/ for
    tasks with checks). Ctrl-C stops launching and leaves a folder `--resume` continues. With --judge-model,
    a blind judge grades complete items as the run goes (see `ablate judge`). With --adaptive the run goes in
    rounds and stops each cell once its anytime-valid test decides it (real, or no effect of interest), at
    --max-repeats, or at --budget-usd; adaptive.json records every look.

    Exit codes: 0 every item complete, 1 the run could not proceed (locked folder, incompatible CLI or
    model), 2 bad input, 3 some items failed or were not run (budget, rate limit), 130 interrupted.
    """
    _run(
        **_params(locals()),
        model_given=_given(ctx, "model"),
        cells_given=_given(ctx, "cells"),
        repeats_given=_given(ctx, "repeats"),
    )


def ab_cmd(ctx: typer.Context, **options: Any) -> None:
    """`ablate run` with the `binary` cell set: the whole setup (C0) against none of it (C11).

    Exit codes: as `ablate run`.
    """
    _run(**options, cells="binary", model_given=_given(ctx, "model"), repeats_given=_given(ctx, "repeats"))


# `ab` takes exactly `run`'s options but --cells: one set of definitions, two commands.
_RUN_SIGNATURE = inspect.signature(run_cmd, eval_str=True)  # evaluated: typer reads the Annotated options
ab_cmd.__signature__ = _RUN_SIGNATURE.replace(  # type: ignore[attr-defined]
    parameters=[p for p in _RUN_SIGNATURE.parameters.values() if p.name != "cells"]
)
app.command("ab")(cli_errors(ab_cmd))


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

"""``ablate run``, ``ab``, ``plan`` and ``merge``: thin shells over ablate.run (options →
:class:`~ablate.run.prepare.RunRequest` → :func:`~ablate.run.execute.execute` → render)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ablate.cli.common import (
    ADAPTIVE_OPTIONS,
    CELL_RUN_OPTIONS,
    SESSION_OPTIONS,
    SETUP_OPTIONS,
    AllowSameJudge,
    AllowUnpinned,
    Backoff,
    Cells,
    Dirty,
    IsolateState,
    Json,
    JudgeModel,
    Split,
    Tasks,
    adaptive_rule,
    cli_errors,
    command_options,
    given,
    one_of,
    option_group,
    print_json,
    resolve_models,
    takes,
)
from ablate.cli.judge import split_choice
from ablate.cli.run_display import (
    Display,
    JudgeAsYouGo,
    ReportWhen,
    err,
    print_estimate,
    render_execution,
    write_report as report_after,
)
from ablate.core.backoff import FIRST_PAUSE_S, BackoffPolicy
from ablate.core.constants import DEFAULT_GRACE_S, DEFAULT_MIN_EFFECT
from ablate.core.errors import EXIT_OK, EXIT_PARTIAL, UsageError

if TYPE_CHECKING:
    from ablate.folder.adaptive import AdaptiveOptions
    from ablate.run.pieces import PieceRequest
    from ablate.run.prepare import RunRequest

app = typer.Typer()

Repeats = Annotated[int, typer.Option("--repeats", "-n", min=1, help="Sessions per (task, cell).")]
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
Grace = Annotated[
    float,
    typer.Option("--grace", min=0, help="After Ctrl-C, seconds running sessions get before being killed."),
]
AllowNetwork = Annotated[
    bool,
    typer.Option(
        "--allow-network",
        help="Give sessions the host's network (loopback ports, abstract sockets, the internet) instead of a "
        "network namespace of their own that reaches only the model's API; recorded in the manifest and "
        "named in the report's caveats.",
    ),
]


ReportOpt = Annotated[
    str,
    typer.Option(
        "--report",
        envvar="ABLATE_REPORT",
        help="When the report is written: now (the default: before the command returns, its ranking printed), "
        "background (a detached process; its log is report.log) or none (`ablate report DIR` later).",
    ),
]


AaOpt = Annotated[
    bool,
    typer.Option(
        "--aa",
        help="Add an A/A cell: a second control (C0b) built and run on its own, same setup. Its differences "
        "from the control are the run's measured noise floor (in the report); a real one makes the run "
        "untrustworthy and fails `ablate gate`.",
    ),
]


PiecesOpt = Annotated[
    str | None,
    typer.Option(
        "--pieces",
        help="Attribute the result to single pieces (`ablate pieces`): all, or ID,ID,... The cells are the "
        "rows of a per-piece design (docs/PIECES.md#runs); the report gains a per-piece table.",
    ),
]
DesignOpt = Annotated[
    str | None,
    typer.Option(
        "--design",
        help="With --pieces: screening (folded-over Plackett-Burman) or one-out (default: one-out up to 3 "
        "pieces, screening beyond).",
    ),
]
MaxSessions = Annotated[
    int | None,
    typer.Option(
        "--max-sessions",
        min=1,
        help="With --pieces: the most sessions the run may plan; a design that cannot fit is refused, naming "
        "the minimum; without --repeats the run plans as many whole repeats as fit.",
    ),
]


ConfirmOpt = Annotated[
    str | None,
    typer.Option(
        "--confirm",
        help="With --pieces (screening design): pieces confirmed by a one-out stage after the screening, "
        "ID,ID,..., besides those it marks real; none: no confirmation stage (docs/PIECES.md#confirm).",
    ),
]


PairsOpt = Annotated[
    str | None,
    typer.Option(
        "--pairs",
        help="With --pieces (screening design): pairs of pieces whose interaction the stage estimates, "
        "A+B,C+D,... (each pair: the full setup, each piece removed, both removed), besides the pairs of "
        "pieces the screening marks real (docs/PIECES.md#interactions).",
    ),
]


def _planned_options(
    tasks: Tasks = None,
    cells: Cells = "layered",
    repeats: Repeats = 1,
    out: Out = Path("runs"),
    allow_unpinned_claude: AllowUnpinned = False,
    seed: Seed = None,
    aa: AaOpt = False,
    pieces: PiecesOpt = None,
    design: DesignOpt = None,
    max_sessions: MaxSessions = None,
) -> None:
    """What a new run folder is planned from (plan, run, ab)."""


PLANNED_OPTIONS = option_group(_planned_options)


@app.command("plan")
@cli_errors
@takes(PLANNED_OPTIONS, SESSION_OPTIONS, SETUP_OPTIONS)
def plan_cmd(ctx: typer.Context, json: Json = False, **options: Any) -> None:
    """Plan a run without executing it: write manifest.json, plan.jsonl and the tasks to a run folder.

    Run it whole with `ablate run --plan DIR`, or in shares with `ablate run --plan DIR --shard K/N`
    (one folder per shard), then `ablate merge` the shard folders.

    Exit codes: 0 ok, 2 bad input (tasks, cells, setup, options).
    """
    from ablate.core.claude import find_claude, require_pinned
    from ablate.run.estimate import dearest, estimate_run
    from ablate.run.plan import blocks
    from ablate.run.prepare import new_run, with_models

    o = command_options(locals())
    models = resolve_models(ctx, o)
    # plan has no --min-effect and no confirmation stage (its shards never see the whole screening), and
    # it writes a new folder: none of run's options of an existing one
    fixed = {"min_effect": DEFAULT_MIN_EFFECT, "confirm": o["pieces"] and "none", "pairs": None}
    new = dict.fromkeys(("resume", "plan", "shard", "work_dir"), None) | {"force": False, "dirty": False}
    request = with_models(_request(ctx, {**o, **fixed, **new}, list(o["tasks"] or [])))
    claude = require_pinned(find_claude(o["claude_bin"]), allowed=o["allow_unpinned_claude"])
    prepared, notes = new_run(request, claude, plan_only=True)
    for note in notes:
        err(f"note: {note}")
    for warning in prepared.warnings:
        err(f"warning: {warning}")
    folder, manifest = prepared.folder, prepared.manifest
    n_blocks = len(blocks(folder.read_plan()))
    estimate = estimate_run(manifest.items, model=dearest(models), max_turns=manifest.max_turns)
    if json:
        summary = {"folder": str(folder.root), "items": manifest.items, "blocks": n_blocks, "seed": manifest.seed}  # fmt: skip
        print_json({**summary, "estimate": estimate.to_json()})
        return
    print_estimate(estimate)
    typer.echo(f"{folder.root}: {manifest.items} items in {n_blocks} blocks (at most {n_blocks} shards)")


#: The options :class:`~ablate.run.prepare.RunRequest` takes as they are.
_RUN_REQUEST = (
    "cells", "aa", "repeats", "model", "max_turns", "out", "config_dir", "repo", "seed", "resume", "plan",
    "shard", "force", "ablate_toml", "work_dir", "dirty", "models",
)  # fmt: skip


def _request(ctx: typer.Context, o: dict[str, Any], tasks: list[Path]) -> RunRequest:
    """The options of ``run`` / ``ab`` as the library's request; "given?" is the option's parameter source."""
    from typing import get_args

    from ablate.run.prepare import Defaultable, RunRequest

    return RunRequest(
        **{k: o[k] for k in _RUN_REQUEST},
        tasks=tasks,
        timeout_s=o["timeout"],
        defaulted=frozenset(n for n in get_args(Defaultable) if not (n in ctx.params and given(ctx, n))),
        pieces=_piece_request(o),
        adaptive=bool(o.get("adaptive")),
    )


def _piece_request(o: dict[str, Any]) -> PieceRequest | None:
    """``--pieces`` / ``--design`` / ``--max-sessions`` as a request (None without --pieces)."""
    from ablate.run.pieces import PieceRequest

    if o["pieces"] is None:
        extra = [
            f"--{n.replace('_', '-')}"
            for n in ("design", "max_sessions", "confirm", "pairs")
            if o.get(n) is not None
        ]
        if extra:
            raise UsageError(
                f"{' and '.join(extra)} {'goes' if len(extra) == 1 else 'go'} with --pieces",
                hint="add --pieces all (or ID,...)",
            )
        return None
    return PieceRequest(
        o["pieces"], o["design"], o["max_sessions"], o["min_effect"], o.get("confirm"), o.get("pairs")
    )


AdaptiveOpt = Annotated[
    bool,
    typer.Option(
        "--adaptive",
        help="Run in rounds and stop each cell once decided (anytime-valid tests; see --max-repeats).",
    ),
]


def _adaptive_options(ctx: typer.Context, o: dict[str, Any]) -> AdaptiveOptions | None:
    """``--adaptive``'s options for a new run (None: fixed, or a resume), refused where they cannot apply."""
    from ablate.folder.adaptive import read_state
    from ablate.folder.layout import RunFolder

    if o["resume"] is not None and read_state(RunFolder(o["resume"])) is not None:
        o["adaptive"] = True  # an adaptive run resumes adaptively, with the options it started with
        return None
    if not o["adaptive"]:
        return None
    if o["plan"] is not None or o["shard"] is not None:
        raise UsageError("--adaptive schedules its own rounds: it cannot run a --plan or a --shard")
    if "repeats" in ctx.params and given(ctx, "repeats"):
        raise UsageError(
            "--repeats and --adaptive: an adaptive run chooses its repeats",
            hint="pass --max-repeats N, the most rounds it may run",
        )
    o["repeats"] = o["max_repeats"]  # the folder is planned for the largest run
    return adaptive_rule(o)


def _run(ctx: typer.Context, o: dict[str, Any]) -> None:
    from ablate.core.claude import find_claude, require_pinned
    from ablate.folder.limits import parse_limits
    from ablate.folder.result import read_result
    from ablate.grade.hook import GradingHook
    from ablate.grade.vet import vet_and_probe
    from ablate.run.estimate import dearest, estimate_run, probe_capture
    from ablate.run.execute import ExecuteRequest, execute, preflight
    from ablate.run.piece_confirm import confirming
    from ablate.run.prepare import prepare_run
    from ablate.run.scheduler import RunOptions

    report: ReportWhen = one_of("--report", o["report"], ("background", "now", "none"))
    pinned = resolve_models(ctx, o)  # and o["models"], o["model"] (their first)
    _piece_request(o)  # refused before anything else
    adaptive = _adaptive_options(ctx, o)
    fresh = o["resume"] is None and o["plan"] is None
    tasks = list(o["tasks"] or [])
    if split_choice(o["split"]) != "both":
        if not fresh:
            raise UsageError("--split picks the tasks of a new run; a resumed or planned run keeps its own")
        from ablate.setup.taskset import select_split

        tasks = select_split(tasks, o["split"])
    # every check that can refuse the run comes before prepare_run writes the run folder
    judge = JudgeAsYouGo(pinned, o["judge_model"] if fresh else None, o["allow_same_judge"])
    limits = parse_limits(o["limit"] or [])
    checked = preflight(
        o["config_dir"], o["repo"], isolation=o["isolation"], allow_network=o["allow_network"],
        unsealed=o["unsealed"], hide=o["hide"] or (), expose=o["expose"] or (),
    )  # fmt: skip
    simulated = checked.endpoint.simulated
    claude = require_pinned(find_claude(o["claude_bin"]), allowed=o["allow_unpinned_claude"] or not fresh)
    prep = prepare_run(_request(ctx, o, tasks), claude)
    if adaptive is not None and prep.manifest.repeats < adaptive.max_repeats:  # --pieces --max-sessions
        adaptive = adaptive.model_copy(update={"max_repeats": prep.manifest.repeats})
    if not fresh:  # a resumed or planned run is judged against its own model
        judge = JudgeAsYouGo(prep.manifest.pinned_models, o["judge_model"], o["allow_same_judge"])
    for warning in prep.warnings:
        err(f"warning: {warning}")
    done_before = [
        r for p in prep.share if (r := read_result(prep.folder, p.item)) is not None and r.complete
    ]
    print_estimate(
        estimate_run(
            len(prep.todo()),
            model=dearest(prep.manifest.pinned_models),
            max_turns=prep.manifest.max_turns,
            done=done_before,
            probe=probe_capture([prep.folder.root, o["work_dir"]], prep.setup.head),
        ),
        simulated=simulated,
    )
    err(f"run folder: {prep.folder.root}")
    err(f"isolation: {checked.isolation.backend} ({checked.isolation.reason})")
    if checked.seal_note:
        err(checked.seal_note)
    vet_and_probe(
        prep, claude, checked.isolation.backend, err,
        probe=o["probe"], work_dir=o["work_dir"], jobs=o["jobs"], allow_weak=o["allow_weak_checks"],
    )  # fmt: skip
    request = ExecuteRequest(
        claude=claude,
        preflight=checked,
        tree_hook=GradingHook(),
        options=RunOptions(
            jobs=o["jobs"],
            budget_usd=o["budget_usd"],
            grace_s=o["grace"],
            backoff=BackoffPolicy(first_s=o["backoff"]),
            limits=limits,
        ),
        **{k: o[k] for k in ("work_dir", "isolate_state", "allow_network", "dirty")},
        forced=o["force"],
    )
    display = Display(enabled=not o["json"], simulated=simulated)
    judge.start(prep.folder.root, display.note)
    done = None
    rounds = None
    try:
        if o["adaptive"]:
            from ablate.run.adaptive import execute_adaptive

            done, rounds = execute_adaptive(
                prep, request, adaptive, on_progress=display.update, on_note=display.note
            )
            if done.exit_code == EXIT_OK and not rounds.finished:  # stopped undecided: partial (exit 3)
                done = dataclasses.replace(done, exit_code=EXIT_PARTIAL)
        else:
            stage = confirming(prep.folder, prep.manifest, display.note)
            done = execute(prep, request, on_progress=display.update, on_note=display.note, rounds=stage)
    finally:
        judge.finish(interrupted=done is None or done.interrupted)
        display.close()
    render_execution(done, json=o["json"], adaptive=rounds, simulated=simulated)
    report_after(prep.folder.root, report, quiet=o["json"])
    if done.exit_code != EXIT_OK:
        raise typer.Exit(done.exit_code)


@app.command("run")
@cli_errors
@takes(PLANNED_OPTIONS, SESSION_OPTIONS, SETUP_OPTIONS, CELL_RUN_OPTIONS, ADAPTIVE_OPTIONS)
def run_cmd(
    ctx: typer.Context,
    resume: Resume = None,
    plan: PlanDir = None,
    shard: ShardOpt = None,
    force: Force = False,
    grace: Grace = DEFAULT_GRACE_S,
    backoff: Backoff = FIRST_PAUSE_S,
    dirty: Dirty = False,
    isolate_state: IsolateState = False,
    allow_network: AllowNetwork = False,
    judge_model: JudgeModel = None,
    allow_same_judge: AllowSameJudge = False,
    split: Split = "both",
    adaptive: AdaptiveOpt = False,
    confirm: ConfirmOpt = None,
    pairs: PairsOpt = None,
    report: ReportOpt = "now",
    json: Json = False,
    **options: Any,
) -> None:
    """Run every (task × cell × repeat) item with the pinned `claude -p` command, in parallel, resumably.

    Writes a run folder (manifest.json, plan.jsonl, stdout/, transcripts/, results/, grades/ and diffs/ for
    tasks with checks). Ctrl-C stops launching and leaves a folder `--resume` continues. With --judge-model,
    a blind judge grades complete items as the run goes (see `ablate judge`). With --adaptive the run goes in
    rounds and stops each cell once its anytime-valid test decides it (real, or no effect of interest), at
    --max-repeats, or at --budget-usd; adaptive.json records every look, and --resume continues the same
    analysis. With --pieces the cells are a per-piece design's rows (--design, --max-sessions) and the
    report estimates every piece's effect (docs/PIECES.md#runs).

    Exit codes: 0 every item complete, 1 the run could not proceed (locked folder, incompatible CLI or
    model) or your real files changed during it, 2 bad input, 3 some items failed or were not run (budget,
    rate limit), 130 interrupted.
    """
    _run(ctx, command_options(locals()))


def ab_cmd(ctx: typer.Context, **options: Any) -> None:
    """`ablate run` with the `binary` cell set: the whole setup (C0) against none of it (C11).

    Exit codes: as `ablate run`.
    """
    if options.get("pieces") is not None:
        raise UsageError(
            "`ablate ab` compares the whole setup with none of it", hint="use `ablate run --pieces`"
        )
    _run(ctx, command_options({**options, "cells": "binary"}))


# `ab` takes exactly `run`'s options but --cells: one set of definitions, two commands.
_RUN_SIGNATURE = inspect.signature(run_cmd, eval_str=True)  # evaluated: typer reads the Annotated options
ab_cmd.__signature__ = _RUN_SIGNATURE.replace(  # type: ignore[attr-defined]
    parameters=[p for p in _RUN_SIGNATURE.parameters.values() if p.name != "cells"]
)
app.command("ab")(cli_errors(ab_cmd))


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
    from ablate.grade.record import carry_grades
    from ablate.run.merge import merge_runs

    summary = merge_runs(runs, out, force=force, carry=[carry_grades])
    if json:
        print_json(summary)
    else:
        typer.echo(
            f"{out}: {summary['complete']}/{summary['items']} items complete, "
            f"{summary['results']} results from {len(runs)} folders"
        )

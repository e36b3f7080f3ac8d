"""``ablate compare``: a thin shell over :mod:`ablate.compare` (claude-code sessions go through
:func:`ablate.run.execute.execute`, like ``ablate run``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from ablate.cli.common import (
    ADAPTIVE_OPTIONS,
    CELL_RUN_OPTIONS,
    SESSION_OPTIONS,
    SETUP_OPTIONS,
    Json,
    Tasks,
    adaptive_rule,
    cli_errors,
    command_options,
    given,
    print_json,
    resolve_models,
    takes,
)
from ablate.cli.run_display import err, say_changed
from ablate.core.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_PARTIAL, EXIT_USAGE, UsageError

if TYPE_CHECKING:
    from ablate.compare.model import CompareReport
    from ablate.folder.adaptive import AdaptiveOptions

app = typer.Typer()

Executors = ("claude-code", "api", "sim")


def check_base_url(value: str) -> str:
    """``value`` when it is an http(s) URL with a host; else a located :class:`UsageError` (exit 2)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and " " not in value
        parts.port  # noqa: B018  (a bad port raises ValueError)
    except ValueError:
        ok = False
    if not ok:
        raise UsageError(
            f"--base-url {value!r}: not an http(s) URL", hint="e.g. --base-url https://api.anthropic.com"
        )
    return value


def _executor(o: dict[str, Any], seed: int, cc: dict[str, Any]) -> Any:
    """The executor ``--executor`` names, from the command's options (``cc``: the claude-code executor's)."""
    from ablate.compare.executors import ApiExecutor, ClaudeCodeExecutor, ClaudeCodeOptions, SimExecutor

    name, model, max_tokens, sim_script, base_url = (
        o[k] for k in ("executor", "model", "max_tokens", "sim_script", "base_url")
    )
    if base_url is not None:
        check_base_url(base_url)
    if name == "sim":
        from ablate.core.resources import data_dir

        script = sim_script or data_dir("shadow") / "sim" / "compare-layout.toml"
        if not script.is_file():
            raise UsageError(f"--sim-script {script}: no such file")
        return SimExecutor(script=script, model=model, seed=seed, max_tokens=max_tokens)
    if sim_script is not None:
        raise UsageError("--sim-script goes with --executor sim")
    if name == "api":
        return ApiExecutor(
            model=model,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL"),
            api_key=os.environ.get("ANTHROPIC_API_KEY"),
            max_tokens=max_tokens,
            seed=seed,
        )
    if name == "claude-code":
        return ClaudeCodeExecutor(ClaudeCodeOptions(model=model, seed=seed, **cc))
    raise UsageError(f"--executor {name!r}: expected one of {', '.join(Executors)}")


def _resumed_seed(resume: Path, executor: str, seed: int | None) -> int:
    """The seed of the compare folder ``resume`` continues (from its run folder's manifest)."""
    if executor != "claude-code":
        raise UsageError(f"--resume goes with --executor claude-code, not {executor}")
    if not (resume / "plan.jsonl").is_file():
        raise UsageError(
            f"--resume {resume}: not a compare folder (no plan.jsonl)", hint="pass <out>/compare-…"
        )
    manifests = sorted(resume.glob("run/*/manifest.json"))
    if not manifests:
        raise UsageError(
            f"--resume {resume}: no session was started there (no run/ folder)", hint="start a new compare"
        )
    recorded = int(orjson.loads(manifests[-1].read_bytes())["seed"])
    if seed is not None and seed != recorded:
        raise UsageError(f"--seed {seed}: {resume} was planned with seed {recorded}", hint="drop --seed")
    return recorded


def _check_same_plan(resume: Path, prep: Any) -> None:
    rows = [orjson.loads(line) for line in (resume / "plan.jsonl").read_bytes().splitlines() if line.strip()]
    if [(r["item"], r["order"]) for r in rows] != [(i.item, i.order) for i in prep.items]:
        raise UsageError(
            f"--resume {resume}: the arms and tasks given plan other items than the folder's plan.jsonl",
            hint="pass the very arms, tasks, --tier/--repeats and --block of the interrupted compare",
        )


def _adaptive_options(ctx: typer.Context, o: dict[str, Any], resume: Path | None) -> AdaptiveOptions | None:
    """``--adaptive``'s stopping rule, refused where it cannot apply; a resumed adaptive comparison keeps the
    rule it started with (read from its run folder), whatever is given now."""
    from ablate.folder.adaptive import read_state
    from ablate.folder.layout import RunFolder

    if resume is not None:
        runs = sorted(p.parent for p in resume.glob("run/*/manifest.json"))
        state = read_state(RunFolder(runs[-1])) if runs else None
        if state is not None:
            return state.options
        if o["adaptive"] and runs:
            raise UsageError(
                f"--resume {resume} --adaptive: that comparison ran a fixed design",
                hint="resume it without --adaptive, or start a new adaptive comparison",
            )
    if not o["adaptive"]:
        return None
    for name, why in (("repeats", "--repeats"), ("tier", "--tier")):
        if given(ctx, name):
            raise UsageError(
                f"{why} and --adaptive: an adaptive comparison chooses its repeats round by round",
                hint="drop " + why + "; pass --max-repeats N, the most rounds it may run",
            )
    if o["executor"] != "claude-code":
        raise UsageError(
            f"--adaptive with --executor {o['executor']}: only the claude-code executor runs in rounds",
            hint="drop --executor (claude-code is the default) or drop --adaptive",
        )
    return adaptive_rule(o)


def _check_probe(ctx: typer.Context, executor: str) -> None:
    """``--probe``/``--no-probe`` given go with the claude-code executor, the only one in cells."""
    source = ctx.get_parameter_source("probe")
    if executor != "claude-code" and source is not None and source.name == "COMMANDLINE":
        raise UsageError(
            f"--probe/--no-probe with --executor {executor}: only the claude-code executor runs cells to probe",
            hint="drop the option, or run with --executor claude-code",
        )


def _confirm(spends: bool, yes: bool) -> None:
    if not spends or yes:
        return
    if not sys.stdin.isatty():
        err(
            "error: refusing to start without confirmation: no terminal to ask on, and these sessions are billed"
            "\n  hint: pass --yes to start anyway"
        )
        raise typer.Exit(EXIT_USAGE)
    if not typer.confirm("start?", default=False, err=True):
        err("not started")
        raise typer.Exit(EXIT_USAGE)


def _finish(folder: Path, report: CompareReport, *, json: bool) -> None:
    from ablate.compare.render import summary_lines

    execution = report.execution
    for line in execution.get("writes") or []:
        err(line)
    changed = execution.get("real_files_changed") or []
    say_changed((execution.get("isolation") or {}).get("backend", ""), changed)
    if json:
        print_json(report.to_json())
    else:
        for line in summary_lines(report):
            typer.echo(line)
        typer.echo(f"report: {folder / 'compare.md'}")
    if changed:
        raise typer.Exit(EXIT_FAILURE)
    if execution.get("run_outcome") == "interrupted":
        err(
            f"interrupted: the report covers the items that finished; resume with: ablate compare … --resume {folder}"
        )
        raise typer.Exit(EXIT_INTERRUPTED)
    stopped = (execution.get("adaptive") or {}).get("stopped")
    if report.excluded.count or stopped in ("budget", "rate-limited"):
        raise typer.Exit(EXIT_PARTIAL)


LayerOpt = Annotated[
    str, typer.Option("--layer", help="The file layer the arms replace (claude-code executor).")
]
TierOpt = Annotated[
    str, typer.Option("--tier", help="smoke (5 repeats) or rigorous (30); sets the repeats floor.")
]
RepeatsOpt = Annotated[
    int | None,
    typer.Option("--repeats", "-n", min=1, help="Repeats per (task, arm); at least the tier's floor."),
]
BlockOpt = Annotated[
    str | None,
    typer.Option(
        "--block",
        help="With ONE file: run the layout experiment (original, block moved to the end, block duplicated).",
    ),
]
RolesOpt = Annotated[
    str | None,
    typer.Option(
        "--roles",
        help="With three files of a layout experiment: the role of each, in order (e.g. original,moved,duplicated). Without it the roles are recognised from the content.",
    ),
]
ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor", help="claude-code (the real CLI in cells), api (just the model), sim (free dry run)."
    ),
]
MaxTokens = Annotated[int, typer.Option("--max-tokens", min=1, help="max_tokens of each api/sim request.")]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed", help="Order and session-id seed (default: a fresh one, recorded).", show_default=False
    ),
]
OutOpt = Annotated[
    Path, typer.Option("--out", "-o", help="Runs folder: holds compare folders and the ledger.")
]
ResumeOpt = Annotated[
    Path | None,
    typer.Option(
        "--resume",
        help="Continue this interrupted compare folder (claude-code; pass the same arms and tasks).",
    ),
]
SimScript = Annotated[
    Path | None,
    typer.Option(
        "--sim-script", help="Sim script for --executor sim (default: shadow/sim/compare-layout.toml)."
    ),
]
BaseUrl = Annotated[
    str | None,
    typer.Option("--base-url", help="API endpoint for --executor api (default: $ANTHROPIC_BASE_URL)."),
]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Start without asking (required without a terminal).")]
AdaptiveOpt = Annotated[
    bool,
    typer.Option(
        "--adaptive",
        help="Run in rounds (one repeat of every task per round) and stop each arm once the anytime-valid "
        "test against the first arm decides it: real, or no effect of interest. claude-code executor; "
        "replaces --tier/--repeats.",
    ),
]


@app.command("compare")
@cli_errors
@takes(SESSION_OPTIONS, SETUP_OPTIONS, CELL_RUN_OPTIONS, ADAPTIVE_OPTIONS, jobs=1)
def compare_cmd(
    ctx: typer.Context,
    arms: Annotated[
        list[str],
        typer.Argument(
            help="Two or more arms, each PATH or NAME=PATH, optionally with @move:BLOCK or @duplicate:BLOCK (BLOCK: a heading, or marker:NAME). The first arm is the baseline."
        ),
    ],
    tasks: Tasks = None,
    layer: LayerOpt = "user-claude-md",
    tier: TierOpt = "smoke",
    repeats: RepeatsOpt = None,
    block: BlockOpt = None,
    roles: RolesOpt = None,
    executor: ExecutorOpt = "claude-code",
    max_tokens: MaxTokens = 1024,
    seed: SeedOpt = None,
    out: OutOpt = Path("runs"),
    resume: ResumeOpt = None,
    sim_script: SimScript = None,
    base_url: BaseUrl = None,
    adaptive: AdaptiveOpt = False,
    yes: Yes = False,
    json: Json = False,
    **options: Any,
) -> None:
    """Head-to-head versions of a file (is my new CLAUDE.md better?) and layout experiments (did moving a
    rule to the end help, or was it the repetition?). All arms run the same tasks, in one sweep, paired on
    (task, repeat) blocks; writes <out>/<compare-id>/compare.json and compare.md and counts every run in
    <out>/compare-ledger.jsonl. The claude-code executor runs exactly as `ablate run` does (isolation
    backend, endpoint check, the guard over your real files, Ctrl-C, `--resume`), and first probes the arms'
    cells for free: an arm whose file does not reach the model stops it before any paid session
    (probe.json in the run folder; --no-probe skips the probe and compare.md says so).

    With --adaptive the arms run in rounds instead of a tier's fixed repeats: after every round each arm is
    tested against the first one with an anytime-valid test (valid however often it is looked at) and stops
    once decided: real (Holm-adjusted anytime p ≤ --alpha), no effect of interest (tests against an effect
    of --min-effect or more, each way, both reject it), or undecided at --max-repeats or --budget-usd. The first
    arm runs while any arm needs it. compare.json's `sequential` block holds every look and each arm's
    decision and reason; compare.md says how it stopped; --resume continues the same analysis. Example:
    `ablate compare old.md new.md --tasks tasks/ --adaptive --max-repeats 12 --min-effect 0.3`.

    Exit codes: 0 ok, 1 failure (also: your real files changed during the run, or the probe found an arm's
    cell unfaithful), 2 bad input (e.g. --repeats
    below the tier's floor, --adaptive with --repeats, no --yes without a terminal), 3 finished but some
    items were not answered (or an adaptive comparison stopped at the budget or a rate limit), 130
    interrupted.
    """
    _compare(ctx, command_options(locals()))


#: The options the claude-code executor takes as they are (:class:`~ablate.compare.executors.ClaudeCodeOptions`).
_CC_OPTIONS = (
    "config_dir", "repo", "layer", "claude_bin", "max_turns", "jobs", "work_dir", "ablate_toml", "budget_usd",
    "isolation", "unsealed", "probe", "allow_weak_checks",
)  # fmt: skip
#: The options :class:`~ablate.compare.core.CompareRequest` takes as they are.
_REQUEST_OPTIONS = (
    "tier", "repeats", "block", "roles", "layer", "executor", "model", "max_turns", "max_tokens",
)  # fmt: skip


def _compare(ctx: typer.Context, o: dict[str, Any]) -> None:
    from ablate.cli.run_display import Display
    from ablate.compare.core import CompareRequest, prepare_compare, run_compare
    from ablate.compare.tiers import resolve_tier
    from ablate.folder.limits import parse_limits
    from ablate.run.plan import new_seed

    resolve_tier(o["tier"], o["repeats"])  # the floor is checked before anything is read
    pinned = resolve_models(ctx, o)  # o["model"]: the first
    several = pinned if len(pinned) > 1 else ()
    resume: Path | None = o["resume"]
    adaptive = _adaptive_options(ctx, o, resume)
    out: Path = o["out"]
    if resume is not None:
        seed = _resumed_seed(resume, o["executor"], o["seed"])
        if given(ctx, "out") and out.resolve() != resume.resolve().parent:
            raise UsageError(f"--out {out} and --resume {resume}: the compare folder is not in --out")
        out = resume.parent
    else:
        seed = o["seed"] if o["seed"] is not None else new_seed()
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"--out {out}: is a file, not a folder", hint="pass the folder that holds compare runs"
        )
    _check_probe(ctx, o["executor"])
    display = Display(enabled=not o["json"])
    ex = _executor(
        o,
        seed,
        {
            **{k: o[k] for k in _CC_OPTIONS},
            "timeout_s": o["timeout"],
            "hide": tuple(o["hide"] or ()),
            "expose": tuple(o["expose"] or ()),
            "limits": parse_limits(o["limit"] or []),
            "models": several,
            "on_progress": display.update,
            "on_note": display.note,
        },
    )
    display.simulated = ex.simulated
    req = CompareRequest(
        **{k: o[k] for k in _REQUEST_OPTIONS},
        arms=list(o["arms"]),
        tasks=list(o["tasks"] or []),
        seed=seed,
        out=out,
        adaptive=adaptive,
        models=several,
    )
    prep = prepare_compare(req, ex)
    if resume is not None:
        prep.compare_id = resume.name
        _check_same_plan(resume, prep)
    _announce(prep, ex)
    _confirm(ex.spends, o["yes"])
    try:
        folder, report = run_compare(prep, ex, resume=resume is not None)
    finally:
        display.close()
    _finish(folder, report, json=o["json"])


def _announce(prep: Any, ex: Any) -> None:
    size = (
        f"{prep.tier.repeats} repeats ({prep.tier.name} tier)"
        if prep.request.adaptive is None
        else f"at most {prep.tier.repeats} rounds (adaptive: each arm stops once decided)"
    )
    err(f"compare: {len(prep.arms)} arms × {len(prep.tasks)} tasks × {size}")
    for a in prep.arms:
        err(f"  {a.name}: {a.variant.describe()} (sha256 {a.fingerprint[:16]})")
    err(f"plan: {prep.estimate.line()}")
    for n in prep.notes:
        err(f"note: {n}")
    chosen = getattr(ex, "preflight", None)
    if chosen is not None:
        err(f"isolation: {chosen.isolation.backend} ({chosen.isolation.reason})")
        if chosen.seal_note:
            err(chosen.seal_note)

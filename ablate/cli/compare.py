"""``ablate compare``: a thin shell over :mod:`ablate.compare`."""

from __future__ import annotations

import os
import signal
import sys
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
from ablate.core.errors import EXIT_INTERRUPTED, EXIT_PARTIAL, EXIT_USAGE, UsageError

app = typer.Typer()

Executors = ("claude-code", "api", "sim")


def _err(text: str) -> None:
    typer.echo(text, err=True)


def _executor(
    name: str,
    *,
    model: str,
    seed: int,
    max_tokens: int,
    sim_script: Path | None,
    base_url: str | None,
    cc: dict[str, Any],
) -> Any:
    from ablate.compare.executors import ApiExecutor, ClaudeCodeExecutor, ClaudeCodeOptions, SimExecutor

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


@app.command("compare")
@cli_errors
def compare_cmd(
    arms: Annotated[
        list[str],
        typer.Argument(
            help="Two or more arms, each PATH or NAME=PATH, optionally with @move:BLOCK or @duplicate:BLOCK (BLOCK: a heading, or marker:NAME). The first arm is the baseline.",
            show_default=False,
        ),
    ],
    tasks: Annotated[
        list[Path] | None, typer.Option("--tasks", "-t", help="Task files or folders (repeatable).")
    ] = None,
    layer: Annotated[
        str, typer.Option("--layer", help="The file layer the arms replace (claude-code executor).")
    ] = "user-claude-md",
    tier: Annotated[
        str, typer.Option("--tier", help="smoke (5 repeats) or rigorous (30); sets the repeats floor.")
    ] = "smoke",
    repeats: Annotated[
        int | None,
        typer.Option(
            "--repeats",
            "-n",
            min=1,
            help="Repeats per (task, arm); at least the tier's floor.",
            show_default=False,
        ),
    ] = None,
    block: Annotated[
        str | None,
        typer.Option(
            "--block",
            help="With ONE file: run the layout experiment (original, block moved to the end, block duplicated).",
            show_default=False,
        ),
    ] = None,
    roles: Annotated[
        str | None,
        typer.Option(
            "--roles",
            help="With three files of a layout experiment: the role of each, in order (e.g. original,moved,duplicated). Without it the roles are recognised from the content.",
            show_default=False,
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="claude-code (the real CLI in cells), api (just the model), sim (free dry run).",
        ),
    ] = "claude-code",
    model: Annotated[
        str, typer.Option("--model", "-m", envvar="ABLATE_MODEL", help="The pinned model.")
    ] = "claude-sonnet-4-6",
    max_turns: Annotated[
        int, typer.Option("--max-turns", min=1, help="--max-turns of each claude-code session.")
    ] = 30,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=1, help="max_tokens of each api/sim request.")
    ] = 1024,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Order and session-id seed (default: a fresh one, recorded).", show_default=False
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Runs folder: holds compare folders and the ledger.")
    ] = Path("runs"),
    sim_script: Annotated[
        Path | None,
        typer.Option(
            "--sim-script",
            help="Sim script for --executor sim (default: shadow/sim/compare-layout.toml).",
            show_default=False,
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="API endpoint for --executor api (default: $ANTHROPIC_BASE_URL).",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Parallel claude-code sessions.")] = 1,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds per claude-code session.")
    ] = 1800,
    budget_usd: Annotated[
        float | None,
        typer.Option(
            "--budget-usd",
            min=0,
            help="Stop launching claude-code sessions at this spend.",
            show_default=False,
        ),
    ] = None,
    work_dir: Annotated[
        Path | None,
        typer.Option(
            "--work-dir",
            envvar="ABLATE_WORK_DIR",
            help="Where cell environments are built.",
            show_default=False,
        ),
    ] = None,
    config_dir: ConfigDir = None,
    repo: Repo = Path("."),
    claude_bin: ClaudeBin = None,
    ablate_toml: AblateToml = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Start without asking (required without a terminal).")
    ] = False,
    json: Json = False,
) -> None:
    """Head-to-head versions of a file (is my new CLAUDE.md better?) and layout experiments (did moving a
    rule to the end help, or was it the repetition?). All arms run the same tasks, in one sweep, paired on
    (task, repeat) blocks; writes <out>/<compare-id>/compare.json and compare.md and counts every run in
    <out>/compare-ledger.jsonl.

    Exit codes: 0 ok, 1 failure, 2 bad input (e.g. --repeats below the tier's floor, no --yes without a
    terminal), 3 finished but some items were not answered, 130 interrupted.
    """
    from ablate.compare.core import CompareRequest, prepare_compare, run_compare
    from ablate.compare.render import summary_lines
    from ablate.compare.tiers import resolve_tier
    from ablate.run.plan import new_seed

    resolve_tier(tier, repeats)  # the floor is checked before anything is read
    seed = seed if seed is not None else new_seed()
    ex = _executor(
        executor,
        model=model,
        seed=seed,
        max_tokens=max_tokens,
        sim_script=sim_script,
        base_url=base_url,
        cc={
            "config_dir": config_dir or default_config_dir(),
            "repo": repo,
            "layer": layer,
            "claude_bin": claude_bin,
            "max_turns": max_turns,
            "timeout_s": timeout,
            "jobs": jobs,
            "work_dir": work_dir,
            "ablate_toml": ablate_toml,
            "budget_usd": budget_usd,
        },
    )
    req = CompareRequest(
        arms=list(arms),
        tasks=list(tasks or []),
        tier=tier,
        repeats=repeats,
        block=block,
        roles=roles,
        layer=layer,
        executor=executor,
        model=model,
        max_turns=max_turns,
        max_tokens=max_tokens,
        seed=seed,
        out=out,
    )
    prep = prepare_compare(req, ex)
    _err(
        f"compare: {len(prep.arms)} arms × {len(prep.tasks)} tasks × {prep.tier.repeats} repeats ({prep.tier.name} tier)"
    )
    for a in prep.arms:
        _err(f"  {a.name}: {a.variant.describe()} (sha256 {a.fingerprint[:16]})")
    _err(f"plan: {prep.estimate.line()}")
    for n in prep.notes:
        _err(f"note: {n}")
    if ex.spends and not yes:
        if not sys.stdin.isatty():
            _err(
                "error: refusing to start without confirmation: no terminal to ask on, and these sessions are billed"
                "\n  hint: pass --yes to start anyway"
            )
            raise typer.Exit(EXIT_USAGE)
        if not typer.confirm("start?", default=False, err=True):
            _err("not started")
            raise typer.Exit(EXIT_USAGE)
    presses = 0

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        nonlocal presses
        presses += 1
        if not hasattr(ex, "request_stop"):
            raise KeyboardInterrupt
        ex.request_stop(kill=presses > 1)
        _err(
            "stopping: no new sessions (Ctrl-C again to kill the running ones)" if presses == 1 else "killing"
        )

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        folder, report = run_compare(prep, ex)
    finally:
        signal.signal(signal.SIGINT, previous)
    if json:
        print_json(report.to_json())
    else:
        for line in summary_lines(report):
            typer.echo(line)
        typer.echo(f"report: {folder / 'compare.md'}")
    if report.execution.get("run_outcome") == "interrupted":
        _err(f"interrupted: the report covers the items that finished ({folder})")
        raise typer.Exit(EXIT_INTERRUPTED)
    if report.excluded.count:
        raise typer.Exit(EXIT_PARTIAL)

"""``ablate demo``: the whole product on the bundled example setup, with no API key and no cost."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from ablate.cli.common import ClaudeBin, cli_errors
from ablate.core.errors import AblateError

app = typer.Typer()


def _step(title: str, args: list[str], env: dict[str, str], *, ok: tuple[int, ...] = (0,)) -> None:
    typer.secho(f"\n== {title}", bold=True)
    typer.secho("$ ablate " + " ".join(shlex.quote(a) for a in args), fg=typer.colors.CYAN)
    proc = subprocess.run([sys.executable, "-m", "ablate", *args], env=env, stdin=subprocess.DEVNULL)
    if proc.returncode not in ok:
        raise AblateError(f"`ablate {args[0]}` exited {proc.returncode}; see its output above")


@app.command("demo")
@cli_errors
def demo_cmd(
    out: Annotated[
        Path, typer.Option("--out", help="Folder for the example setup, the run folder and the environments.")
    ] = Path(".cache/demo"),
    claude_bin: ClaudeBin = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Sessions run at once.")] = 3,
) -> None:
    """Run ablate end to end on the bundled example setup, with no API key and no cost.

    It lays out a realistic example setup (a config dir with CLAUDE.md, imported axioms and lessons, skills,
    hooks, auto-memory; a repository with MEMORY.md, runbooks, decisions, findings, handoffs), then shows
    `ablate layers`, `ablate cells`, `ablate probe` (the real claude CLI against the capture endpoint), an
    `ablate run` of the twelve layered cells on the six example tasks against a simulated, setup-sensitive
    model (shadow/sim/demo.toml, whose answers depend on which layers reached it: a known ground truth; it
    also plays the blind judge), and a per-cell summary of the results, checks and verdicts. Everything stays under --out; your own ~/.claude is never read.

    Exit codes: 0 ok, 1 a step failed, 2 bad input (no claude binary, --out not a demo folder).
    """
    from tabulate import tabulate

    from ablate.core.claude import find_claude
    from ablate.core.resources import data_dir
    from ablate.run.demo import prepare_demo_folder, summarise_results
    from ablate.setup.examples import materialise_example
    from ablate.sim import SimServer

    claude = find_claude(claude_bin)
    root = prepare_demo_folder(out)
    example = materialise_example(root / "setup")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env.update(HOME=str(example.home), ABLATE_CLAUDE_BIN=str(claude.path), PYTHONUNBUFFERED="1")
    typer.echo(f"example setup: config dir {example.config_dir}\n               repo       {example.repo}")
    where = ["--config-dir", str(example.config_dir), "--repo", str(example.repo)]
    started = time.monotonic()
    _step("What is in this setup?", ["layers", *where], env)
    _step("What would each cell strip?", ["cells", "layered", *where], env)
    _step(
        "Prove what reaches the model in every cell (real claude CLI, capture endpoint, no cost)",
        ["probe", *where, "--jobs", str(jobs)],
        env,
    )
    runs = root / "runs"
    with SimServer(data_dir("shadow") / "sim" / "demo.toml", log_path=root / "sim-requests.jsonl") as sim:
        run_env = {**env, "ANTHROPIC_BASE_URL": sim.base_url, "ANTHROPIC_API_KEY": "sk-ablate-demo"}
        _step(
            "Run the ablation: 12 cells x 6 tasks against a simulated, setup-sensitive model (it also plays the judge)",
            [
                "run",
                "--tasks",
                str(data_dir("tasks")),
                "--cells",
                "layered",
                "--repeats",
                "1",
                "--model",
                "claude-sonnet-4-6",
                "--max-turns",
                "8",
                "--jobs",
                str(jobs),
                "--seed",
                "7",
                "--out",
                str(runs),
                "--work-dir",
                str(root / "envs"),
                "--judge-model",
                "claude-haiku-4-5",
                *where,
            ],
            run_env,
        )
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    typer.secho("\n== Per-cell outcomes (descriptive only: one repeat, no statistics)", bold=True)
    from ablate.grade.summary import grade_summary

    graded = {g.cell: g for g in grade_summary(run_dir)}
    rows = [
        [
            s.cell,
            f"{s.complete}/{s.items}",
            ", ".join(f"{k} x{v}" for k, v in sorted(s.pitfall_hits.items())) or "-",
            f"{graded[s.cell].checks_passed}/{graded[s.cell].checked}" if s.cell in graded else "-",
            f"{graded[s.cell].judge_pass}/{graded[s.cell].judged}" if s.cell in graded else "-",
            f"{s.mean_turns:.1f}" if s.mean_turns is not None else "-",
            f"{s.cost_usd:.4f}",
        ]
        for s in summarise_results(run_dir)
    ]
    typer.echo(
        tabulate(
            rows,
            headers=[
                "cell",
                "complete",
                "pitfall hits",
                "checks passed",
                "judge pass",
                "mean turns",
                "cost USD (simulated)",
            ],
        )
    )
    typer.echo(
        "\nThe simulated model's ground truth (shadow/sim/demo.toml): C1, C6 and C11 hurt greet-exclaim, C8 and "
        "C11 hurt no-framework, C11 hurts deploy-command and typed-farewell, C4 and C11 hurt release-notes, C5 "
        "and C11 hurt deterministic-tests; C1 and C3 cost deploy-command an extra call."
    )
    typer.echo(f"\nrun folder: {run_dir}\ndemo finished in {time.monotonic() - started:.0f} s")

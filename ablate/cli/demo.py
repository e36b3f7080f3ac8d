"""``ablate demo``: the whole product on the bundled example setup, with no API key and no cost."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from ablate.cli.common import ClaudeBin, Jobs, Unsealed, cli_errors
from ablate.core.constants import DEFAULT_MODEL
from ablate.core.errors import AblateError

if TYPE_CHECKING:
    from ablate.run.demo import DemoDesign

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
    jobs: Jobs = 3,
    repeats: Annotated[
        int | None,
        typer.Option(
            "--repeats",
            "-n",
            min=1,
            help="Repeats per (task, cell). Default: what recovers the planted truth with 99% probability.",
        ),
    ] = None,
    with_ab: Annotated[
        bool,
        typer.Option("--with-ab", help="Also run `ablate ab` (setup on against off) on all three tasks."),
    ] = False,
    examples: Annotated[
        Path | None,
        typer.Option(
            "--examples", help="Copy the reports into this folder as the *_example.md files (make examples)."
        ),
    ] = None,
    aa: Annotated[
        bool,
        typer.Option(
            "--aa/--no-aa",
            help="Add the A/A control C0b (`run --aa`: a second C0, built and run on its own) whose "
            "difference from C0 is the report's measured noise floor (default); --no-aa runs the planted cells only.",
        ),
    ] = True,
    unsealed: Unsealed = False,
) -> None:
    """Run ablate end to end on the bundled example setup, with no API key and no cost.

    It lays out a realistic example setup (a config dir with CLAUDE.md, imported axioms and lessons, skills,
    hooks, auto-memory; a repository with MEMORY.md, runbooks, decisions, findings, handoffs), then shows
    `ablate layers`, `ablate cells` and an `ablate run` of the demo cell set (which first probes every cell:
    the real claude CLI against the capture endpoint) (two planted layers, one null layer, one no-op cell) on two tasks
    against a simulated model whose outcome rates depend on which layers reached it (shadow/sim/demo.toml: a
    known, probabilistic ground truth), with enough repeats to recover that truth with 99% probability
    (reports marked at alpha 0.01).
    With --aa (the default) the run adds C0b, a second control built and run on its own: the report's noise
    floor (how often two identical setups' outcomes flip, how far their metrics spread); C0b counts in the
    primary family, so the repeats are chosen with it there. The same seed gives the same numbers, byte for
    byte (the model's draws are keyed by task, cell and repeat). Its last lines say, from report.json, which
    planted facts the report recovered, and the noise floor C0b measured. Everything stays under --out; your
    own ~/.claude is never read.

    Exit codes: 0 ok, 1 a step failed or a planted fact was not recovered, 2 bad input (no claude binary,
    --out not a demo folder, sessions that cannot be sealed here without --unsealed).
    """
    from ablate.core.claude import find_claude
    from ablate.folder.layout import RunFolder
    from ablate.isolate.detect import require_sealed
    from ablate.isolate.registry import choose_isolation
    from ablate.run.demo import AA_RATES, demo_design, prepare_demo_folder, write_demo_cells
    from ablate.setup.examples import materialise_example

    said = require_sealed(choose_isolation(None), unsealed=unsealed)  # refused before anything is laid out
    if said:
        typer.echo(said, err=True)
    claude = find_claude(claude_bin)
    root = prepare_demo_folder(out)
    example = materialise_example(root / "setup")
    cells = write_demo_cells(root)
    design = demo_design(AA_RATES) if aa else demo_design()
    n = repeats or design.repeats
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env.update(HOME=str(example.home), ABLATE_CLAUDE_BIN=str(claude.path), PYTHONUNBUFFERED="1")
    typer.echo(f"example setup: config dir {example.config_dir}\n               repo       {example.repo}")
    where = ["--config-dir", str(example.config_dir), "--repo", str(example.repo)]
    started = time.monotonic()
    _step("What is in this setup?", ["layers", *where], env)
    _step("What would each cell strip?", ["cells", str(cells), *where], env)
    _say_design(design, n, aa=aa)
    runs, ab_runs = root / "runs", root / "runs-ab"
    run_where = [*where, *(["--unsealed"] if unsealed else [])]
    _run_sessions(root, env, run_where, cells, n, jobs=jobs, repeats=repeats, with_ab=with_ab, aa=aa)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    run = RunFolder(run_dir)
    if examples is not None:
        _copy_example(run_dir, examples, "layered_ablation_example")
        if with_ab:
            (ab_dir,) = [p for p in ab_runs.iterdir() if p.is_dir()]
            _copy_example(ab_dir, examples, "binary_ab_example")
    typer.echo(f"\ndemo finished in {time.monotonic() - started:.0f} s")
    typer.secho(f"report: {run.report_html}", bold=True)
    _say_truth(orjson.loads(run.report_json.read_bytes()), run_dir, n, design, aa=aa)


def _say_design(design: DemoDesign, n: int, *, aa: bool) -> None:
    """The planted truth and what the design's repeats find of it, before the run."""
    from ablate.run.demo import AA_CELL, DEMO_ALPHA, PLANTED_WITH, PLANTED_WITHOUT, RECOVERY_SIMS

    typer.echo(
        f"\nPlanted truth: a task's pitfall-free rate is {PLANTED_WITH:.0%} with the layer it needs and "
        f"{PLANTED_WITHOUT:.0%} without. With {design.repeats} repeats the report's primary family "
        f"({design.comparisons} comparisons, Holm at {DEMO_ALPHA}) recovers the whole planted truth (both "
        f"planted layers real, the null layer{f' and {AA_CELL}' if aa else ''} not) with probability "
        f"{design.recovery.everything:.1%}, and finds the planted layers in {design.recovery.effects:.1%} of "
        f"runs (computed by simulating the design {RECOVERY_SIMS:,} times). Running {n} repeats."
        + (
            f" {AA_CELL} is a second control (--aa), built and run on its own: its difference from C0 is "
            "the run's measured noise floor, never a layer's effect."
            if aa
            else ""
        )
    )


def _say_truth(report: dict[str, Any], run_dir: Path, n: int, design: DemoDesign, *, aa: bool) -> None:
    """The planted facts as report.json reads them (and the noise floor); raises when one was missed."""
    from ablate.run.demo import AA_CELL, noise_floor_lines, planted_facts

    facts = planted_facts(report, aa=aa)
    typer.echo("\nThe planted truth (shadow/sim/demo.toml), as report.json reads:")
    for fact in facts:
        typer.echo(f"  {'recovered' if fact.recovered else 'MISSED'}: {fact.claim} ({fact.found})")
    missed = [f.claim for f in facts if not f.recovered]
    if missed and n < design.repeats:
        typer.echo(
            f"  ({n} repeats, fewer than the design's {design.repeats}: misses are expected, not checked)"
        )
    if aa:
        typer.echo(f"The measured noise floor ({AA_CELL} against C0, the same setup built and run twice):")
        for line in noise_floor_lines(report):
            typer.echo(f"  {line}")
    if missed and n >= design.repeats:
        raise AblateError(
            f"the demo's report did not recover {len(missed)} planted fact(s): {'; '.join(missed)}",
            hint=f"{run_dir / 'report.md'} shows the comparisons; the design recovers everything in "
            f"{design.recovery.everything:.1%} of runs",
        )


def _run_sessions(
    root: Path,
    env: dict[str, str],
    where: list[str],
    cells: Path,
    n: int,
    *,
    jobs: int,
    repeats: int | None,
    with_ab: bool,
    aa: bool,
) -> None:
    """The paid part, at no cost: the layered run (and the plain A/B) against the simulated model."""
    from ablate.core.resources import data_dir
    from ablate.run.demo import AB_CONTROL, AB_RATES, DEMO_TASKS, demo_design
    from ablate.sim import SimServer

    def args(tasks: Sequence[str], repeats: int, out: str, envs: str, *cells: str) -> list[str]:
        # --report none: written next, at the design's alpha, by `ablate report` (a fixed run's is at 0.05)
        return [
            *[a for t in tasks for a in ("--tasks", str(data_dir("tasks") / f"{t}.toml"))], *cells,
            "--repeats", str(repeats), "--model", DEFAULT_MODEL, "--max-turns", "8", "--jobs", str(jobs),
            "--seed", "7", "--report", "none", "--out", str(root / out), "--work-dir", str(root / envs), *where,
        ]  # fmt: skip

    with SimServer(data_dir("shadow") / "sim" / "demo.toml", log_path=root / "sim-requests.jsonl") as sim:
        run_env = {**env, "ANTHROPIC_BASE_URL": sim.base_url, "ANTHROPIC_API_KEY": "sk-ablate-demo"}
        _step(
            f"Probe every cell, then run the ablation: {5 + int(aa)} cells x {len(DEMO_TASKS)} tasks x {n} repeats "
            f"against the simulated model{' (C0b: the A/A control)' if aa else ''}",
            ["run", *args(DEMO_TASKS, n, "runs", "envs", "--cells", str(cells), *(["--aa"] if aa else []))],
            run_env,
        )
        _report_step(root / "runs", env)
        if with_ab:
            ab_tasks = tuple(AB_RATES["C11"])
            ab_repeats = repeats or demo_design(AB_RATES, helps=("C11",), control=AB_CONTROL).repeats
            _step(
                f"The plain A/B: setup on (C0) against off (C11), {len(ab_tasks)} tasks x {ab_repeats} repeats",
                ["ab", *args(ab_tasks, ab_repeats, "runs-ab", "envs-ab")],
                run_env,
            )
            _report_step(root / "runs-ab", env)


def _report_step(runs: Path, env: dict[str, str]) -> None:
    """The run's report, before anything reads it, at the alpha the demo's design is computed for."""
    from ablate.run.demo import DEMO_ALPHA

    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    _step(
        f"The report, marking real at alpha {DEMO_ALPHA} (the level the demo's design is computed for)",
        ["report", str(run_dir), "--alpha", str(DEMO_ALPHA)],
        env,
    )


def _copy_example(run_dir: Path, dest: Path, name: str) -> None:
    """Copy a run's report.md (and its plot) into ``dest`` as ``<name>.md`` / ``<name>.png``."""
    import shutil

    from ablate.folder.layout import RunFolder

    dest.mkdir(parents=True, exist_ok=True)
    run = RunFolder(run_dir)
    md = run.report_md.read_text()
    png = run.plots_dir / "forest.png"
    if png.exists():
        shutil.copyfile(png, dest / f"{name}.png")
        md = md.replace("(plots/forest.png)", f"({name}.png)")
    header = (
        f"<!-- Generated by `make examples` (ablate demo) from {run_dir.name}; do not edit by hand. -->\n"
    )
    (dest / f"{name}.md").write_text(header + md)
    typer.echo(f"example: {dest / f'{name}.md'}")

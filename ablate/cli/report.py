"""``ablate report``, ``ablate show`` and ``ablate diff``: thin shells over :mod:`ablate.report` (write a run's
report, the sessions behind a verdict, two runs compared)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import click
import typer

from ablate.cli.common import Json, cli_errors, print_json

if TYPE_CHECKING:
    from ablate.report import WrittenReport

app = typer.Typer()

Formats = Annotated[
    str, typer.Option("--format", "-f", help="Comma-separated formats to write: md, json, html.")
]
Alpha = Annotated[
    float,
    typer.Option(
        "--alpha", help="Family-wise error rate: Holm-adjusted p at or below it marks a difference real."
    ),
]
Control = Annotated[
    str | None,
    typer.Option(
        "--control", help="The cell every other cell is compared with (default: the set's control)."
    ),
]

Primary = Annotated[
    str | None,
    typer.Option(
        "--primary",
        help="The primary metric (its own Holm family, pooled, one comparison per cell): pitfall-free (default; "
        "the grader score when the tasks have graders and no pitfalls) or any other metric of the report "
        "(checks, score, judge, turns, tool-calls, cost, ...; an unknown name lists them all).",
    ),
]


def summary_lines(written: WrittenReport) -> list[str]:
    """The one-screen summary printed after a report is written: the answer first (the ranking or the
    per-piece table, one sentence per verdict), then the run, what qualifies the answer and the files."""
    r = written.report
    from ablate.folder.layout import UNSEALED
    from ablate.report.cost_per_pass import per_pass_line
    from ablate.report.terminal import answer_text

    lines: list[str] = []
    if any(c.id == UNSEALED for c in r.caveats):
        lines.append(
            "UNSEALED (--unsealed): sessions shared the host's network and sockets (the first caveat)"
        )
    lines += [
        *answer_text(r),
        per_pass_line(r),
        f"{r.run.id}: {r.n.tasks} tasks × {r.n.repeats} repeats, {r.n.complete}/{r.n.items} complete, "
        f"{r.n.excluded} excluded; model {r.run.model} "
        + ("(verified)" if r.run.model_verified else "(NOT verified)"),
    ]
    if r.n.repeats < 2:
        lines.append("one repeat: only the pooled comparisons can be real (see the one-repeat caveat)")
    lines.append(f"primary metric: {r.primary_metric}")
    lines += [f"  {f.message}" for f in r.holdout] + [f"  no-op {c.cell}: {c.reason}" for c in r.no_op_cells]
    lines.append(f"{len(r.caveats)} caveats: " + ", ".join(c.id for c in r.caveats))
    return lines + [
        f"{fmt:>5}: {written.paths[fmt]}" for fmt in ("md", "json", "html") if fmt in written.paths
    ]


@app.command("report")
@cli_errors
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="The run folder (runs/<run-id>).")],
    formats: Formats = "md,json,html",
    alpha: Alpha = 0.05,
    control: Control = None,
    primary: Primary = None,
    json: Json = False,
) -> None:
    """Write the report of a run folder: report.md, report.json, report.html and plots/ (no model calls).

    Every layer's marginal contribution per metric, pooled and per task (Δ, interval, p, Holm-adjusted p,
    real?) in two Holm families (the pooled primary metric; everything else), the ranking with its draw
    group, run-to-run spread and power, real regressions, the dev/holdout check, dead layers, and the
    mandatory caveats computed from the run. It can be rebuilt at any time from the folder alone.

    Exit codes: 0 ok, 1 the folder cannot be reported on, 2 bad input (no such folder, bad
    --format/--alpha/--control/--primary).
    """
    from ablate.core.errors import NotFound
    from ablate.report import parse_formats, write_report

    if not run_dir.is_dir():
        raise NotFound(f"{run_dir}: no such run folder", hint="pass runs/<run-id> as written by `ablate run`")
    fmts = parse_formats(formats)
    written = write_report(
        run_dir,
        formats=fmts,
        alpha=alpha,
        control=control,
        primary=primary,
        progress=None if json else (lambda m: typer.echo(m, err=True)),
    )
    if json:
        print_json(
            {k: str(v) for k, v in written.paths.items()} | {"report": written.report.model_dump(mode="json")}
        )
        return
    for line in summary_lines(written):
        typer.echo(line)


def report_after_run(run_dir: Path, *, quiet: bool = False) -> None:
    """Write the report at the end of `ablate run` / `ablate ab`; a report problem never changes the run's exit
    status (the results are safe on disk, `ablate report RUN_DIR` rebuilds it)."""
    from ablate.core.errors import AblateError
    from ablate.report import write_report

    try:
        written = write_report(run_dir)
    except (AblateError, ValueError, OSError) as exc:
        typer.echo(f"warning: no report written: {exc}\n  rebuild it with: ablate report {run_dir}", err=True)
        return
    if not quiet:
        for line in summary_lines(written):
            typer.echo(line)


@app.command("show")
@cli_errors
def show_cmd(
    run_dir: Annotated[Path, typer.Argument(help="The run folder (runs/<run-id>).")],
    cell: Annotated[
        str | None, typer.Option("--cell", help="Show a pair of this cell (with the control).")
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", help="The pair's task (default: the first flipped pair).")
    ] = None,
    repeat: Annotated[
        int | None, typer.Option("--repeat", help="The pair's repeat (default: its first flip).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="In a run of several models (`--models`): this model's sessions (default: the first's).",
        ),
    ] = None,
    json: Json = False,
) -> None:
    """Look at the sessions behind a verdict: the answer and each cell's flipped pairs (the control passed and
    the cell failed, or the reverse), or with --cell one pair side by side — the prompt, every turn's text and
    tool calls, the final answers, each check and pitfall, and the context diff (what the model received
    differently). Pages when long on a terminal.

    Exit codes: 0 shown, 2 bad input (not a run folder; a cell, task, repeat or model not in it).
    """
    from ablate.report.pairs_text import show

    shown = show(run_dir, cell, task, repeat, shutil.get_terminal_size().columns, model)
    for note in shown.notes:
        typer.echo(note, err=True)
    if json:
        print_json(shown.data | {"notes": shown.notes})
    elif sys.stdout.isatty() and len(shown.lines) > shutil.get_terminal_size().lines:
        click.echo_via_pager("\n".join(shown.lines) + "\n")
    else:
        typer.echo("\n".join(shown.lines))


@app.command("diff")
@cli_errors
def diff_cmd(
    run_a: Annotated[Path, typer.Argument(help="The earlier run folder (the baseline).")],
    run_b: Annotated[Path, typer.Argument(help="The later run folder, of the same cells and tasks.")],
    alpha: Annotated[
        float, typer.Option("--alpha", min=0.001, max=0.5, help="Family-wise error over the cells (Holm).")
    ] = 0.05,
    json: Json = False,
) -> None:
    """Two runs of the same cells and tasks, cell by cell: each run's pitfall-free effect, the change with an
    interval and a test valid for independent runs (Holm over cells), and the verdicts that changed.

    Exit codes: 0 compared, 2 bad input (not run folders, different cells or tasks).
    """
    from ablate.core.errors import NotFound
    from ablate.folder.layout import RunFolder
    from ablate.report.rundiff import diff_runs, render_text

    for run in (run_a, run_b):
        if not RunFolder(run).has_manifest:
            raise NotFound(
                f"{run}: not a run folder (no manifest.json)", hint="pass two folders `ablate run` wrote"
            )
    result = diff_runs(run_a, run_b, alpha=alpha)
    if json:
        print_json(result.to_json())
    else:
        typer.echo(render_text(result))

"""``ablate diff``: a thin shell over :mod:`ablate.report.rundiff`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ablate.cli.common import Json, cli_errors, print_json
from ablate.core.errors import NotFound

app = typer.Typer()


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

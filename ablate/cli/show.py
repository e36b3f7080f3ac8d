"""``ablate show``: a thin shell over :func:`ablate.report.pairs_text.show`."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Annotated

import click
import typer

from ablate.cli.common import Json, cli_errors, print_json

app = typer.Typer()


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
    json: Json = False,
) -> None:
    """Look at the sessions behind a verdict: the answer and each cell's flipped pairs (the control passed and
    the cell failed, or the reverse), or with --cell one pair side by side — the prompt, every turn's text and
    tool calls, the final answers, each check and pitfall, and the context diff (what the model received
    differently). Pages when long on a terminal.

    Exit codes: 0 shown, 2 bad input (not a run folder; a cell, task or repeat not in it).
    """
    from ablate.report.pairs_text import show

    shown = show(run_dir, cell, task, repeat, shutil.get_terminal_size().columns)
    for note in shown.notes:
        typer.echo(note, err=True)
    if json:
        print_json(shown.data | {"notes": shown.notes})
    elif sys.stdout.isatty() and len(shown.lines) > shutil.get_terminal_size().lines:
        click.echo_via_pager("\n".join(shown.lines) + "\n")
    else:
        typer.echo("\n".join(shown.lines))

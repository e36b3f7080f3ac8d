"""``ablate doctor``: would a run here be isolated and authenticated, and what to do if not."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ablate.cli.common import (
    AblateToml,
    Cells,
    ClaudeBin,
    ConfigDir,
    Json,
    cli_errors,
    default_config_dir,
    print_json,
)
from ablate.core.errors import EXIT_FAILURE, NotFound

app = typer.Typer()


@app.command("doctor")
@cli_errors
def doctor_cmd(
    config_dir: ConfigDir = None,
    claude_bin: ClaudeBin = None,
    work_dir: Annotated[
        Path, typer.Option("--work-dir", help="Where cell environments would be built (its free space).")
    ] = Path("."),
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            envvar="ABLATE_REPO",
            help="The repository a run would use (default: the current folder): each cell's login is "
            "checked in the config dir a run would build for it.",
        ),
    ] = None,
    cells: Cells = "layered",
    ablate_toml: AblateToml = None,
    json_out: Json = False,
) -> None:
    """Check this machine before a first run: platform, the isolation backend that will run and why,
    user-namespace and overlay support, bubblewrap, the pinned claude CLI and its version, the auth method
    (yours, and each cell's as a run checks it before its first session), the endpoint and the work folder's free space, with the fix for each problem.

    Exit codes: 0 a run here would be isolated and authenticated, 1 otherwise.
    """
    from ablate.isolate.doctor import diagnose, render

    if not work_dir.is_dir():
        raise NotFound(
            f"--work-dir {work_dir}: no such folder", hint="name an existing folder (or create it first)"
        )
    doc = diagnose(
        config_dir or default_config_dir(),
        work_dir.resolve(),
        claude_bin=claude_bin,
        repo=repo,
        cells=cells,
        ablate_toml=ablate_toml,
    )
    if json_out:
        print_json(doc)
    else:
        typer.echo(render(doc))
    if not doc["ok"]:
        raise typer.Exit(EXIT_FAILURE)

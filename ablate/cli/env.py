"""``ablate env build|clean``: materialise one cell to inspect it or run the CLI in it by hand."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from ablate.cli.common import AblateToml, ConfigDir, Json, Repo, cli_errors, default_config_dir, print_json

app = typer.Typer(
    help=(
        "Build the shadow environment of one ablation cell (shadow home + config dir + private checkout of HEAD), "
        "or remove every environment ablate built under a folder."
    ),
    no_args_is_help=True,
)

Out = Annotated[
    Path, typer.Option("--out", help="Folder to build the cell in (as <out>/cNN; must not exist yet).")
]
Cells = Annotated[
    str, typer.Option("--cells", help="Cell set: a shipped name (layered, extended, ...) or a .toml.")
]
IsolateState = Annotated[
    bool,
    typer.Option(
        "--isolate-state", help="Copy large unknown config folders (hook state) instead of linking them."
    ),
]
Dirty = Annotated[
    bool, typer.Option("--dirty", help="Copy uncommitted non-layer changes of the repo into the checkout.")
]


@app.command()
@cli_errors
def build(
    cell: Annotated[str, typer.Argument(help="Cell id in the set (C0, C4, C11, ...).")],
    out: Out,
    config_dir: ConfigDir = None,
    repo: Repo = Path("."),
    cells: Cells = "layered",
    isolate_state: IsolateState = False,
    dirty: Dirty = False,
    json_out: Json = False,
    ablate_toml: AblateToml = None,
) -> None:
    """Build one cell and print CLAUDE_CONFIG_DIR, its cwd and an `env -i ... claude` line to run by hand.

    The cell is built exactly as `ablate run` builds it: a shadow home, a fresh config dir with the cell's
    layers stripped, and a private checkout of HEAD with your live layer files overlaid.

    Exit codes: 0 ok, 1 unsafe (an instruction file above --out), 2 bad input (missing config dir or repo,
    not a git work tree, uncommitted non-layer changes without --dirty, unknown cell, existing folder).
    """
    from ablate.isolate.environment import build_environment, is_secret
    from ablate.setup.cells import load_cell_set
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import load_setup

    catalog = load_catalog(ablate_toml)
    resolved = load_cell_set(cells, catalog).get(cell)
    setup = load_setup(config_dir or default_config_dir(), repo)
    env = build_environment(setup, catalog, resolved, out, isolate_state=isolate_state, dirty=dirty)
    if json_out:
        print_json(env.to_json())
        return
    typer.echo(f"cell {resolved.id} ({resolved.label}) built in {env.root}")
    typer.echo(f"CLAUDE_CONFIG_DIR={env.config_dir}")
    typer.echo(f"cwd: {env.cwd}")
    for leak in env.leaks:
        typer.echo(f"leak [{leak.kind}] {leak.path}: {leak.detail}")
    for note in env.notes:
        typer.echo(f"note: {note}")
    assigns = " ".join(f'{k}="${k}"' if is_secret(k) else f"{k}={shlex.quote(v)}" for k, v in env.env.items())
    typer.echo("run by hand (secrets are taken from your shell):")
    typer.echo(
        f"  cd {shlex.quote(str(env.cwd))} && env -i {assigns} claude -p --model claude-sonnet-4-6 "
        "--permission-mode bypassPermissions 'PROMPT' < /dev/null"
    )
    typer.echo(f"remove it with: ablate env clean {shlex.quote(str(env.root.parent))}")


@app.command("clean")
@cli_errors
def clean_cmd(
    folder: Annotated[Path, typer.Argument(help="Folder whose ablate environments are removed.")] = Path("."),
    json_out: Json = False,
) -> None:
    """Remove every environment ablate built under FOLDER, checkout included (idempotent; crash recovery).

    Exit codes: 0 ok (also when there was nothing to remove), 2 FOLDER does not exist or is a file.
    """
    from ablate.core.errors import NotFound, UsageError
    from ablate.isolate.environment import clean

    if not folder.exists():
        raise NotFound(
            f"{folder}: no such folder", hint="pass the --out (or --work-dir) the cells were built in"
        )
    if not folder.is_dir():
        raise UsageError(f"{folder}: is a file, not a folder")

    removed = clean(folder)
    if json_out:
        print_json({"removed": removed})
        return
    for path in removed:
        typer.echo(f"removed {path}")
    typer.echo(f"{len(removed)} environment(s) removed under {folder}")

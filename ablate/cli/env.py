"""``ablate env build|clean``: materialise one cell to inspect it or run the CLI in it by hand."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from ablate.cli.common import (
    MODEL,
    SETUP_OPTIONS,
    Cells,
    Dirty,
    IsolateState,
    IsolationOpt,
    Json,
    Unsealed,
    cli_errors,
    load_setup_options,
    print_json,
    takes,
)

app = typer.Typer(
    help=(
        "Build one ablation cell as `ablate run` builds it (namespace where it works, else links), "
        "or remove every environment ablate built under a folder."
    ),
    no_args_is_help=True,
)

Out = Annotated[
    Path, typer.Option("--out", help="Folder to build the cell in (as <out>/s00; must not exist yet).")
]


@app.command()
@cli_errors
@takes(SETUP_OPTIONS)
def build(
    cell: Annotated[str, typer.Argument(help="Cell id in the set (C0, C4, C11, ...).")],
    out: Out,
    cells: Cells = "layered",
    isolate_state: IsolateState = False,
    dirty: Dirty = False,
    isolation: IsolationOpt = None,
    unsealed: Unsealed = False,
    json_out: Json = False,
    **options: Any,
) -> None:
    """Build one cell exactly as `ablate run` builds it, and print how to run the CLI in it by hand.

    The backend is chosen as for `ablate run` (namespace where it works, else links) and recorded in the
    output. links: a shadow home and config dir with the cell's layers stripped, and a private checkout of
    HEAD with your live layer files overlaid, in <out>/s00. namespace: the cell's layers under <out> and a
    view of your real paths that only the printed command line enters (nothing you run outside it sees the
    cell).

    Exit codes: 0 ok, 1 unsafe (an instruction file above --out), 2 bad input (missing config dir or repo,
    not a git work tree, uncommitted non-layer changes without --dirty, unknown cell, an --out that exists and is not an empty folder,
    unknown or unavailable --isolation, a cell that could not be sealed here without --unsealed).
    """
    import os

    from ablate.core.errors import OutputExists
    from ablate.isolate.auth import moved_login_key
    from ablate.isolate.backend import BackendOptions
    from ablate.isolate.registry import choice_json, open_backend
    from ablate.run.execute import preflight
    from ablate.setup.cells import load_cell_set

    catalog, setup = load_setup_options(options)
    resolved = load_cell_set(cells, catalog).get(cell)
    # its printed command is not sealed (see below): whatever endpoint it names stays reachable
    checked = preflight(
        setup.config_dir, setup.repo, isolation=isolation, allow_network=True, unsealed=unsealed
    )
    if checked.seal_note:
        typer.echo(checked.seal_note, err=True)
    if os.path.lexists(out) and (not out.is_dir() or any(out.iterdir())):
        raise OutputExists(
            f"{out}: already exists" + ("" if out.is_dir() else " and is not a folder"),
            hint="pick a new or empty --out (a built cell is removed with `ablate env clean`)",
        )
    # a command to run by hand: not sealed (no forwarder outlives ablate)
    if moved := moved_login_key(os.environ, setup.config_dir)[1]:
        typer.echo(
            f"note: the cell's account state leaves out your /login key ({moved}): run the command "
            "with ANTHROPIC_API_KEY set to it, as a run's sessions are",
            err=True,
        )
    backend_options = BackendOptions(
        isolate_state=isolate_state, dirty=dirty, base_env=dict(os.environ), sealed=False
    )
    backend = open_backend(checked.isolation.backend, setup, catalog, out, backend_options)
    env = backend.build(resolved, 0)
    argv = [
        "claude", "-p", "--model", MODEL, "--permission-mode", "bypassPermissions", "--", "PROMPT",
    ]  # fmt: skip
    command = backend.command(env, argv)
    info = backend.describe(env)
    if json_out:
        to_json = getattr(env, "to_json", None)
        doc = (
            to_json() if callable(to_json) else {"cell": {"id": resolved.id, "label": resolved.label}, **info}
        )
        doc.update({"isolation": choice_json(checked.isolation), "root": str(env.root), "command": command})
        doc.setdefault("config_dir", str(env.config_dir))
        doc.setdefault("cwd", str(env.cwd))
        print_json(doc)
        return
    _print_built(resolved, env, choice_json(checked.isolation), info, command)


def _print_built(
    resolved: Any, env: Any, isolation: dict[str, Any], info: dict[str, Any], command: list[str]
) -> None:
    from ablate.isolate.environment import is_secret

    typer.echo(f"cell {resolved.id} ({resolved.label}) built in {env.root}")
    typer.echo(f"isolation: {isolation['backend']} ({isolation['reason']})")
    typer.echo(f"CLAUDE_CONFIG_DIR={env.env.get('CLAUDE_CONFIG_DIR', env.config_dir)}")
    typer.echo(f"cwd: {env.cwd}")
    for leak in info.get("leaks", []):
        typer.echo(f"leak [{leak.get('kind')}] {leak.get('path')}: {leak.get('detail')}")
    for note in info.get("notes", []):
        typer.echo(f"note: {note}")
    assigns = " ".join(f'{k}="${k}"' if is_secret(k) else f"{k}={shlex.quote(v)}" for k, v in env.env.items())
    typer.echo("run by hand (secrets are taken from your shell):")
    line = " ".join(shlex.quote(a) for a in command).replace(" PROMPT", " 'PROMPT'")
    typer.echo(f"  cd {shlex.quote(str(env.cwd))} && env -i {assigns} {line} < /dev/null")
    typer.echo(f"remove it with: ablate env clean {shlex.quote(str(Path(env.root).parent))}")


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

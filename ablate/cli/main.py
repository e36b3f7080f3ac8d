"""The ``ablate`` command: composes one typer app per command group."""

from __future__ import annotations

import typer

from ablate import __version__

app = typer.Typer(
    name="ablate",
    help=(
        "Measure whether a Claude Code setup helps, and which layer of it earns its keep.\n\n"
        "ablate builds a faithful shadow environment per ablation cell (C0 = everything, Cn = one layer "
        "removed, C11 = nothing), runs pinned `claude -p` sessions on representative tasks, mines the "
        "transcripts and ranks layers by marginal contribution.\n\n"
        "Exit codes: 0 ok, 1 domain failure, 2 bad input, 3 finished with some failed items, 130 interrupted."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ablate {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print ablate's version and exit."
    ),
) -> None:
    """Measure whether a Claude Code setup helps, and which layer of it earns its keep."""


def _compose() -> None:
    # Each command group lives in its own module and exposes ``app``; adding it without a name merges its
    # commands at the top level, adding it with a name makes a sub-group (``ablate env build``).
    import importlib

    for module, name in _GROUPS:
        try:
            mod = importlib.import_module(f"ablate.cli.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ablate.cli.{module}":
                continue  # group not built yet
            raise
        if name:
            app.add_typer(mod.app, name=name)
        else:
            app.add_typer(mod.app)


#: (module, sub-group name or None for top-level commands)
_GROUPS: list[tuple[str, str | None]] = [
    ("inventory", None),  # ablate layers, ablate cells
    ("env", "env"),  # ablate env build|clean
    ("sim", "sim"),  # ablate sim serve
    ("probe", None),  # ablate probe
    ("mine", None),  # ablate mine, ablate recover
    ("run", None),  # ablate run, ablate ab, ablate plan, ablate merge
    ("report", None),  # ablate report
    ("demo", None),  # ablate demo
]
_compose()


def main() -> None:
    """Console-script entry point."""
    app()

"""The ``ablate`` command: composes one typer app per command group."""

from __future__ import annotations

import importlib
import os
import sys

import typer

from ablate import PINNED_CLAUDE_VERSION, __version__

app = typer.Typer(
    name="ablate",
    help=(
        "Measure whether a Claude Code setup helps, and which layer of it earns its keep.\n\n"
        "ablate builds a faithful shadow environment per ablation cell (C0 = everything, Cn = one layer "
        "removed, C11 = nothing), proves for free what reaches the model in each (`ablate probe`), runs "
        "pinned `claude -p` sessions on representative tasks (`ablate run`) and mines the transcripts "
        "(`ablate mine`). Try `ablate demo`: no API key, no cost.\n\n"
        "Exit codes: 0 ok, 1 domain failure, 2 bad input, 3 finished with some failed items, 4 gate "
        "inconclusive, 130 interrupted."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ablate {__version__} (Claude Code {PINNED_CLAUDE_VERSION} pinned)")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print ablate's version and exit."
    ),
) -> None:
    """Measure whether a Claude Code setup helps, and which layer of it earns its keep."""
    from ablate.core.tempwork import sweep

    sweep()  # the work folders (and mounts) of ablate processes that were killed, e.g. with SIGKILL
    # A run's manifest counts the claude starts of its own invocation, not of one before it in this process. A
    # process that never loaded the counter's module counted none, and `mine` never loads it (it loads pydantic).
    if (claude := sys.modules.get("ablate.core.claude")) is not None:
        claude.take_starts()


#: Each command group lives in its own module and exposes ``app``: (module, sub-group name, its top-level
#: commands). Added without a name, its commands sit at the top level (``ablate layers``); with a name, it is a
#: sub-group (``ablate env build``). ``tests/test_cli_groups.py`` holds this table to the modules' commands.
GROUPS: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
    ("inventory", None, ("layers", "cells")),
    ("doctor", None, ("doctor",)),
    ("env", "env", ()),  # build | clean
    ("sim", "sim", ()),  # serve | check
    ("probe", None, ("probe", "pieces")),
    ("mine", None, ("mine", "recover", "usage")),
    ("run", None, ("plan", "run", "ab", "merge")),
    ("report", None, ("report", "show", "diff")),
    ("demo", None, ("demo",)),
    ("judge", None, ("judge",)),
    ("compare", None, ("compare",)),
    ("gate", None, ("gate",)),
    ("ci", "ci", ()),  # init github | k8s
    ("tasks", "tasks", ()),  # suggest, check
)
_added: set[str] = set()


def add_groups(argv: list[str] | None = None) -> typer.Typer:
    """``app`` with the group that holds the command ``argv`` names, or with every group (no command, an
    unknown one, ``--help``). Importing a group's module is most of a command's start (all of them: ~0.12 s
    of ~0.35 s), so ``main`` imports only the one it runs."""
    word = next((a for a in argv or [] if not a.startswith("-")), None)
    chosen = [g for g in GROUPS if word is not None and word in (g[1], *g[2])] or GROUPS
    for module, name, _ in chosen:
        if module in _added:
            continue
        group: typer.Typer = importlib.import_module(f"ablate.cli.{module}").app
        # Plain help (click's formatter) for every command: it rewraps each paragraph at word boundaries
        # (rich help kept the docstrings' line breaks and wrapped again mid-phrase) and shows flags
        # without a "<bool>" type.
        for sub in (group, *(g.typer_instance for g in group.registered_groups)):
            if sub is not None:
                sub.rich_markup_mode = None
        app.add_typer(group, name=name)
        _added.add(module)
    return app


def main() -> None:
    """Console-script entry point, on one OpenBLAS thread: numpy's and scipy's each spin one per core as they
    load (``ablate report`` 2.79 → 2.55 CPU-s); sessions never get it (an allow-list: ``ablate.isolate.procenv``)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    add_groups(sys.argv[1:])()

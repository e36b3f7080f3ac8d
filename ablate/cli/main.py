"""The ``ablate`` command: composes one typer app per command group."""

from __future__ import annotations

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


from ablate.cli import (  # noqa: E402  (after app, by design)
    ci,
    compare,
    demo,
    diff,
    doctor,
    env,
    gate,
    inventory,
    judge,
    mine,
    pieces,
    probe,
    report,
    run,
    show,
    sim,
    tasks,
    usage,
)

# Each command group lives in its own module and exposes ``app``. Added without a name, its commands sit at
# the top level (``ablate layers``); with a name, it is a sub-group (``ablate env build``).
app.add_typer(inventory.app)  # ablate layers, ablate cells
app.add_typer(doctor.app)  # ablate doctor
app.add_typer(env.app, name="env")  # ablate env build | clean
app.add_typer(sim.app, name="sim")  # ablate sim serve | check
app.add_typer(probe.app)  # ablate probe
app.add_typer(pieces.app)  # ablate pieces
app.add_typer(mine.app)  # ablate mine, ablate recover
app.add_typer(run.app)  # ablate run, ab, plan, merge
app.add_typer(report.app)  # ablate report
app.add_typer(show.app)  # ablate show
app.add_typer(demo.app)  # ablate demo
app.add_typer(judge.app)  # ablate judge
app.add_typer(compare.app)  # ablate compare
app.add_typer(gate.app)  # ablate gate
app.add_typer(diff.app)  # ablate diff
app.add_typer(ci.app, name="ci")  # ablate ci init github | k8s
app.add_typer(usage.app)  # ablate usage
app.add_typer(tasks.app, name="tasks")  # ablate tasks suggest

# Plain help (click's formatter) for every command: it rewraps each paragraph at word boundaries (rich help
# kept the docstrings' line breaks and wrapped again mid-phrase) and shows flags without a "<bool>" type.
for _typer in [app, *(g.typer_instance for g in app.registered_groups)]:
    if _typer is not None:
        _typer.rich_markup_mode = None


def main() -> None:
    """Console-script entry point."""
    app()

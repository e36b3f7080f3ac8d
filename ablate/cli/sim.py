"""``ablate sim``: run the simulated Anthropic endpoint, and check sim scripts."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from ablate.cli.common import Json, cli_errors, print_json
from ablate.core.errors import NotFound, UsageError

app = typer.Typer(
    help=(
        "The simulated Anthropic Messages endpoint: the real `claude` CLI talks to it through "
        "ANTHROPIC_BASE_URL, with no network and no API key. It records every request (JSONL) and answers "
        "from a script of rules (capture mode without one: a short fixed answer)."
    ),
    no_args_is_help=True,
)

ScriptOpt = Annotated[
    Path | None,
    typer.Option(
        "--script",
        help="A sim script (.toml or .json). Default: capture mode, every request gets a short answer.",
    ),
]
Port = Annotated[
    int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1; 0 lets the OS choose a free one.")
]
Log = Annotated[
    Path | None,
    typer.Option("--log", help="Append one JSON line per request here. Default: ./sim-requests.jsonl."),
]
Seed = Annotated[int, typer.Option("--seed", help="Run seed for the script's probability rules.")]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@app.command()
@cli_errors
def serve(
    script: ScriptOpt = None, port: Port = 0, log: Log = None, seed: Seed = 0, json: Json = False
) -> None:
    """Serve on 127.0.0.1 until Ctrl-C; print the base URL for ANTHROPIC_BASE_URL.

    Exit codes: 130 stopped by Ctrl-C or SIGTERM (the normal end), 2 bad input (invalid script, port in use).
    """
    from ablate.sim import SimServer

    log_path = (log or Path("sim-requests.jsonl")).resolve()
    if log_path.is_dir():
        raise UsageError(f"--log {log}: is a folder", hint="pass a file path, e.g. --log sim-requests.jsonl")
    if not log_path.parent.is_dir():
        raise NotFound(
            f"--log {log}: folder {log_path.parent} does not exist", hint="create it or pick another path"
        )
    # A server stops on Ctrl-C or SIGTERM, even when started in the background (where SIGINT is ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    with SimServer(script, log_path=log_path, seed=seed, port=port) as sim:
        if json:
            print_json({"url": sim.base_url, "port": sim.port, "log": str(log_path), "seed": seed})
        else:
            typer.echo(sim.base_url)
            typer.echo(f"logging requests to {log_path}; Ctrl-C to stop", err=True)
        threading.Event().wait()


@app.command()
@cli_errors
def check(
    script: Annotated[Path, typer.Argument(help="The sim script to validate (.toml or .json).")],
    json: Json = False,
) -> None:
    """Validate a sim script and list its rules.

    Exit codes: 0 valid, 2 invalid (one `file: field: message` line per problem).
    """
    from ablate.sim import load_script

    parsed = load_script(script)
    names = [r.name for r in parsed.rules]
    if json:
        print_json({"script": str(script), "ok": True, "rules": names})
    else:
        typer.echo(f"{script}: ok, {len(names)} rule(s): {', '.join(names) or '(none)'}")

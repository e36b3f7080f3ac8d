"""Options shared by every command, declared once, and the one place library errors become exit codes."""

from __future__ import annotations

import errno
import functools
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import orjson
import typer

from ablate.core.constants import DEFAULT_JOBS, DEFAULT_MODEL, MAX_TIMEOUT_S, MAX_TURNS
from ablate.core.errors import DISK_FULL_HINT, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, AblateError
from ablate.core.fsutil import disk_full_message, is_disk_full

P = ParamSpec("P")
R = TypeVar("R")


def cell_set_names() -> str:
    """The shipped cell sets, for help texts (cheap: no spec parsing at start-up)."""
    from ablate.core.resources import data_dir

    return ", ".join(sorted(p.stem for p in data_dir("cells").glob("*.toml")))


def default_config_dir() -> Path:
    """The user's Claude config dir: ``$CLAUDE_CONFIG_DIR`` if set, else ``~/.claude``."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env).expanduser() if env else Path.home() / ".claude"


ConfigDir = Annotated[
    Path | None,
    typer.Option(
        "--config-dir",
        envvar="ABLATE_CONFIG_DIR",
        help="The Claude config dir to ablate (read only). Default: $CLAUDE_CONFIG_DIR, else ~/.claude.",
        show_default=False,
    ),
]
Repo = Annotated[
    Path,
    typer.Option(
        "--repo",
        envvar="ABLATE_REPO",
        help="The git repository the tasks run in (read only; each cell works in a private detached checkout of HEAD).",
    ),
]
IsolationOpt = Annotated[
    str | None,
    typer.Option(
        "--isolation",
        help="namespace (every session in its own copy-on-write view at your real paths; the "
        "default wherever user namespaces, or root, allow it) or links (a shadow home and config dir, each "
        "session under a write fence: bubblewrap on Linux, sandbox-exec on macOS; the fallback). "
        "`ablate doctor` says which runs here and why.",
    ),
]


# --adaptive's stopping rule (run, ab, compare)
MaxRepeats = Annotated[
    int,
    typer.Option(
        "--max-repeats",
        min=1,
        help="--adaptive: rounds at most (one repeat of every task each); what is still undecided then stops.",
    ),
]
MinEffect = Annotated[
    float,
    typer.Option(
        "--min-effect",
        min=0.01,
        max=0.99,
        help="--adaptive: the pitfall-free rate difference the run is sized to find; an effect at least this "
        "large is called a draw at most 5% of the time, a smaller one is not reliably a draw: at 20 rounds of "
        "5 tasks (measured, benchmarks/bench_min_effect.py) Δ 0 ends a draw 50% and undecided 50% of the "
        "time, Δ 0.1 a draw 25%, undecided 70%, real 5%.",
    ),
]
Alpha = Annotated[
    float,
    typer.Option(
        "--alpha",
        min=0.001,
        max=0.5,
        help="--adaptive: family-wise error of the real marks (Holm over every comparison with the control).",
    ),
]
Jobs = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Sessions running at once.")]
"""``--jobs`` of every command that runs sessions; its default is :data:`JOBS`."""
JOBS = DEFAULT_JOBS
Model = Annotated[
    str,
    typer.Option(
        "--model", "-m", envvar="ABLATE_MODEL", help="The model every session is pinned to (--model)."
    ),
]
"""``--model`` of every command that runs sessions; its default is :data:`MODEL`."""
MODEL = DEFAULT_MODEL
MaxTurns = Annotated[
    int,
    typer.Option(
        "--max-turns", min=1, max=MAX_TURNS, help="--max-turns of every session (tasks may override)."
    ),
]


def _finite(value: float) -> float:
    if math.isnan(value):
        raise typer.BadParameter("not a number")
    return value


Timeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=1,
        max=MAX_TIMEOUT_S,
        callback=_finite,
        help="Seconds a session may run before its whole process tree is killed (at most a week).",
    ),
]
Budget = Annotated[
    float | None,
    typer.Option(
        "--budget-usd",
        min=0,
        help="Stop launching once the recorded spend reaches this many USD.",
        show_default=False,
    ),
]
WorkDir = Annotated[
    Path | None,
    typer.Option(
        "--work-dir",
        envvar="ABLATE_WORK_DIR",
        help="Where cell environments are built (default: the temp dir). No CLAUDE.md may sit above it.",
        show_default=False,
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
AllowUnpinned = Annotated[
    bool,
    typer.Option(
        "--allow-unpinned-claude",
        help="Run a claude binary that is not the pinned version (recorded as pinned: false; its figures are "
        "not comparable with pinned runs). Without it such a binary is refused.",
    ),
]
ClaudeBin = Annotated[
    Path | None,
    typer.Option(
        "--claude-bin",
        envvar="ABLATE_CLAUDE_BIN",
        help="The claude binary to run. Default: `claude` on PATH.",
        show_default=False,
    ),
]
AblateToml = Annotated[
    Path | None,
    typer.Option(
        "--ablate-toml",
        envvar="ABLATE_TOML",
        help="Extra layers and cells (ablate.toml). Default: ./ablate.toml when it exists.",
        show_default=False,
    ),
]
ProbeOpt = Annotated[
    bool,
    typer.Option(
        "--probe/--no-probe",
        envvar="ABLATE_PROBE",
        help="Probe every cell for free (real CLI, capture endpoint) before the first paid session and refuse "
        "to start when one is unfaithful; the proof is kept as probe.json. --no-probe skips it; the report "
        "says so.",
    ),
]


def given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given (command line or environment), not left at its default."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def print_json(obj: object) -> None:
    """Print ``obj`` as indented JSON on stdout."""
    typer.echo(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


#: A path given to ablate that it cannot use as asked (a bad input, exit 2), and what to do about it.
PATH_ERRORS = {
    errno.EROFS: "the path is on a read-only file system: choose a writable folder",
    errno.EACCES: "you may not write (or read) there: choose a folder of your own",
    errno.EPERM: "you may not write (or read) there: choose a folder of your own",
    errno.ENOTDIR: "a file stands where a folder is expected: give a folder",
    errno.EISDIR: "a folder stands where a file is expected: give a file",
    errno.ELOOP: "a symbolic link loop: give the real path",
    errno.EEXIST: "something already exists there: give a new path",
    errno.ENAMETOOLONG: "the path is too long: give a shorter one",
}


def cli_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Map :class:`AblateError` to ``error: ...`` on stderr and its exit code; Ctrl-C to 130; a full file
    system (``ENOSPC``, ``EDQUOT``) anywhere to a located error naming its mount point, exit 1; a path it
    cannot use as asked (read-only, a file for a folder, a link loop: :data:`PATH_ERRORS`) to exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except AblateError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except OSError as exc:
            if is_disk_full(exc):
                said = disk_full_message(
                    exc, kept="every file written before is complete (writes are atomic)"
                )
                typer.echo(f"error: {said}\n  hint: {DISK_FULL_HINT}", err=True)
                raise typer.Exit(EXIT_FAILURE) from None
            hint = PATH_ERRORS.get(exc.errno or 0)
            if hint is None or not exc.filename:
                raise
            typer.echo(f"error: {exc.filename}: {exc.strerror}\n  hint: {hint}", err=True)
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper

"""Options shared by every command, declared once, and the one place library errors become exit codes."""

from __future__ import annotations

import errno
import functools
import inspect
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import orjson
import typer

from ablate.core.constants import (
    DEFAULT_JOBS,
    DEFAULT_MAX_TURNS,
    DEFAULT_MIN_EFFECT,
    DEFAULT_MODEL,
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    MAX_TURNS,
)
from ablate.core.errors import (
    DISK_FULL_HINT,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    AblateError,
    UsageError,
)
from ablate.core.fsutil import disk_full_message, is_disk_full

if TYPE_CHECKING:
    from ablate.folder.adaptive import AdaptiveOptions
    from ablate.setup.layers import Catalog
    from ablate.setup.load import Setup

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S", bound=str)


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
Cells = Annotated[
    str,
    typer.Option(
        "--cells",
        "-c",
        help=f"Cell set: a shipped name ({cell_set_names()}), several joined by + (layered+leave-one-in), or "
        "a .toml file.",
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

Unsealed = Annotated[
    bool,
    typer.Option(
        "--unsealed",
        help="Run sessions even where they cannot be sealed (no bubblewrap, or bubblewrap cannot make its "
        "namespaces): they then share the host's network and sockets. Without it such a run is refused, "
        "saying why and how to fix it. Recorded in the manifest, said first in the report and the summary; "
        "`ablate gate` then passes the run only with --allow-unsealed. Where sessions can be sealed they are, "
        "--unsealed or not.",
    ),
]
HideOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--hide",
        help="A file or folder sessions read as empty, besides the credential files hidden by default (ssh "
        "and gpg keys, cloud, registry, netrc, gh and git credentials: docs/ARCHITECTURE.md#secrets); "
        "absolute, ~/... or relative to your home (repeatable; recorded in the manifest).",
    ),
]
ExposeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--expose",
        help="A hidden credential path (or a folder holding some) sessions may read after all, e.g. ~/.ssh "
        "(repeatable; recorded in the manifest and said in the report).",
    ),
]


LimitOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--limit",
        metavar="WHAT=SIZE",
        help="A per-session limit, over its default (repeatable): disk=2GiB (bytes written in the view), "
        "memory=4GiB, processes=1024 (tasks at once), stdout=16MiB, stderr=16MiB, request=32MiB (one "
        "request body through the relay), forwarder_memory=256MiB. A session over one is stopped and its item "
        "fails with limit:WHAT; the run goes on. Recorded in the manifest (isolation.limits).",
    ),
]


Dirty = Annotated[
    bool,
    typer.Option(
        "--dirty", help="Carry the repo's uncommitted non-layer changes into every cell's checkout."
    ),
]
IsolateState = Annotated[
    bool,
    typer.Option(
        "--isolate-state",
        help="Copy (never link) large unknown config folders (hook state) of the config dir.",
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
JOBS = DEFAULT_JOBS
Model = Annotated[
    str,
    typer.Option(
        "--model", "-m", envvar="ABLATE_MODEL", help="The model every session is pinned to (--model)."
    ),
]
MODEL = DEFAULT_MODEL
Models = Annotated[
    str | None,
    typer.Option(
        "--models",
        help="Models as a factor, M1,M2,...: every (task, repeat) block runs every cell on every model in one "
        "shuffled sweep, each session pinned to its model; the report gives each model's answer and whether "
        "the model changes it (the first model is the reference). Not with --model.",
    ),
]
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
    typer.Option("--budget-usd", min=0, help="Stop launching once the recorded spend reaches this many USD."),
]
WorkDir = Annotated[
    Path | None,
    typer.Option(
        "--work-dir",
        envvar="ABLATE_WORK_DIR",
        help="Where cell environments are built (default: the temp dir). No CLAUDE.md may sit above it.",
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
    ),
]
AblateToml = Annotated[
    Path | None,
    typer.Option(
        "--ablate-toml",
        envvar="ABLATE_TOML",
        help="Extra layers and cells (ablate.toml). Default: ./ablate.toml when it exists.",
    ),
]
WithMcp = Annotated[
    bool,
    typer.Option(
        "--with-mcp",
        help="Also start MCP servers (real processes) and check their tools (`ablate pieces`: with --measure).",
    ),
]
Backoff = Annotated[
    float,
    typer.Option("--backoff", min=0.01, help="First pause (s) after a rate limit that names no reset time."),
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

AllowWeakChecks = Annotated[
    bool,
    typer.Option(
        "--allow-weak-checks",
        help="Run tasks whose checks all pass on the untouched checkout or fail on their reference (refused "
        "otherwise, exit 2, before any session); the manifest records them and the report says so.",
    ),
]

Tasks = Annotated[
    list[Path] | None,
    typer.Option(
        "--tasks",
        "-t",
        help="Task files, folders of *.toml task files, or plugin-eval suites (a plugin folder, its evals/, "
        "an evals.json) (repeatable).",
    ),
]
# the judge's options, of judge and of run and ab (judging as the run goes)
JudgeModel = Annotated[
    str | None,
    typer.Option(
        "--judge-model",
        envvar="ABLATE_JUDGE_MODEL",
        help="The judge model (must differ from the model under test unless --allow-same-judge).",
    ),
]
AllowSameJudge = Annotated[
    bool,
    typer.Option("--allow-same-judge", help="Let the model under test judge its own answers (a known bias)."),
]
Split = Annotated[str, typer.Option("--split", help="Tasks to use: dev, holdout or both.")]


def _setup_options(
    config_dir: ConfigDir = None, repo: Repo = Path("."), ablate_toml: AblateToml = None
) -> None:
    """The options that name the setup a command reads (layers, pieces, probe, env build, plan, run, compare)."""


def _session_options(
    model: Model = MODEL,
    models: Models = None,
    max_turns: MaxTurns = DEFAULT_MAX_TURNS,
    timeout: Timeout = DEFAULT_TIMEOUT_S,
    claude_bin: ClaudeBin = None,
) -> None:
    """The options every session is started with (plan, run, ab, compare)."""


def _cell_run_options(
    jobs: Jobs = JOBS,
    budget_usd: Budget = None,
    work_dir: WorkDir = None,
    isolation: IsolationOpt = None,
    unsealed: Unsealed = False,
    hide: HideOpt = None,
    expose: ExposeOpt = None,
    probe: ProbeOpt = True,
    allow_weak_checks: AllowWeakChecks = False,
    limit: LimitOpt = None,
) -> None:
    """How the sessions of a run are run in cells (run, ab, compare)."""


def _probe_options(
    claude_bin: ClaudeBin = None, with_mcp: WithMcp = False, isolation: IsolationOpt = None
) -> None:
    """How the free probe starts the real CLI in cells (probe, pieces --measure)."""


def _adaptive_options(
    max_repeats: MaxRepeats = 20, min_effect: MinEffect = DEFAULT_MIN_EFFECT, alpha: Alpha = 0.05
) -> None:
    """--adaptive's stopping rule (run, ab, compare)."""


def option_group(template: Callable[..., None]) -> tuple[inspect.Parameter, ...]:
    """The options ``template`` declares (its parameters), to give commands with :func:`takes`."""
    return tuple(inspect.signature(template, eval_str=True).parameters.values())


SETUP_OPTIONS = option_group(_setup_options)
SESSION_OPTIONS = option_group(_session_options)
CELL_RUN_OPTIONS = option_group(_cell_run_options)
ADAPTIVE_OPTIONS = option_group(_adaptive_options)
PROBE_OPTIONS = option_group(_probe_options)


def takes(*groups: tuple[inspect.Parameter, ...], **defaults: object) -> Callable[[F], F]:
    """Give a command the options of ``groups`` (in its signature, before its own optional ones; received in
    its ``**options``); ``defaults`` sets a group option's default for this command."""

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        shared = [p.replace(default=defaults.get(p.name, p.default)) for group in groups for p in group]
        unknown = set(defaults) - {p.name for p in shared}
        if unknown:
            raise TypeError(f"{fn.__name__}: defaults for options it does not take: {sorted(unknown)}")
        required = [p for p in own if p.default is inspect.Parameter.empty]
        optional = [p for p in own if p.default is not inspect.Parameter.empty]
        fn.__signature__ = sig.replace(parameters=required + shared + optional)  # type: ignore[attr-defined]
        return fn

    return decorate


def command_options(local: dict[str, Any]) -> dict[str, Any]:
    """A command's options as one dict (``locals()`` and ``**options``), --config-dir defaulted."""
    own = {k: v for k, v in local.items() if k not in ("ctx", "options")}
    merged = {**own, **local.get("options", {})}
    if "config_dir" in merged:
        merged["config_dir"] = merged["config_dir"] or default_config_dir()
    return merged


def load_setup_options(o: dict[str, Any]) -> tuple[Catalog, Setup]:
    """The layer catalog (--ablate-toml) and the setup (--config-dir, --repo) that :data:`SETUP_OPTIONS` name."""
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import load_setup

    catalog = load_catalog(o["ablate_toml"])
    return catalog, load_setup(o["config_dir"] or default_config_dir(), o["repo"])


def resolve_models(ctx: typer.Context, o: dict[str, Any]) -> tuple[str, ...]:
    """The models sessions are pinned to: --models (kept in ``o`` as a tuple, --model set to its first), else
    --model's; both together is a :class:`UsageError`."""
    from ablate.core.pricing import parse_models

    if o["models"] is not None and given(ctx, "model"):
        raise UsageError(
            "--models and --model (or $ABLATE_MODEL) together",
            hint="drop --model: --models names every model",
        )
    models = () if o["models"] is None else tuple(parse_models(o["models"]))
    o["models"], o["model"] = models, models[0] if models else o["model"]
    return models or (o["model"],)


def adaptive_rule(o: dict[str, Any]) -> AdaptiveOptions:
    """--adaptive's stopping rule from :data:`ADAPTIVE_OPTIONS` and --budget-usd."""
    from ablate.folder.adaptive import AdaptiveOptions

    return AdaptiveOptions(
        max_repeats=o["max_repeats"], min_effect=o["min_effect"], alpha=o["alpha"], budget_usd=o["budget_usd"]
    )


def one_of(option: str, value: str, choices: tuple[S, ...]) -> S:
    """``value`` as the one of ``choices`` it names; else a located :class:`UsageError` (exit 2)."""
    for choice in choices:
        if value == choice:
            return choice
    raise UsageError(f"{option} {value!r}: expected {', '.join(choices[:-1])} or {choices[-1]}")


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
    """Map :class:`AblateError` to ``error: ...`` and its exit code; Ctrl-C to 130; a full file system to a
    located error, exit 1; a path it cannot use as asked (:data:`PATH_ERRORS`) to exit 2."""

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

"""The isolation backends' interface: what every stage needs from a backend and the environments it builds.

The runner runs ``backend.command(env, argv)`` with ``env.env`` in ``env.cwd``, reads and writes the session's
tree only through ``backend.checkout(env)`` and copies the transcript from ``env.config_dir``. What a backend
*is* is a :class:`BackendKind`, listed in :mod:`ablate.isolate.registry`; nothing outside ``isolate/`` names
one (docs/EXTENDING.md#adding-an-isolation-backend).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias, TypeVar

from ablate.isolate.secrets import Secrets
from ablate.setup.cells import ResolvedCell
from ablate.setup.layers import Catalog, Layer, LayerFiles, resolve_layer
from ablate.setup.load import Leak, Setup


class CellEnv(Protocol):
    """What the runner and the probe need from a built cell environment (one session slot)."""

    @property
    def root(self) -> Path:
        """The slot's own folder (the session's layer lives on its file system)."""

    @property
    def config_dir(self) -> Path:
        """Where the session's config-dir writes land, seen from outside (transcripts are found here)."""

    @property
    def session_config_dir(self) -> Path:
        """The config dir as the session sees it (``CLAUDE_CONFIG_DIR`` inside the session)."""

    @property
    def config_source(self) -> Path:
        """Where ablate built the cell's config dir, before any session (the probe neutralises it there)."""

    @property
    def cwd(self) -> Path:
        """The session's working directory as the session sees it."""

    @property
    def home(self) -> Path: ...
    @property
    def memory_slug(self) -> str: ...
    @property
    def leaks(self) -> list[Leak]: ...
    @property
    def mismatches(self) -> dict[str, list[str]]:
        """Kept layer id → its files that differ from the setup's (the cell is not faithful)."""

    env: dict[str, str]
    """The session's whole process environment (secrets included: never written out as is)."""

    def checkout_layer(self, layer: Layer, memory_slug: str) -> LayerFiles:
        """The repo layer ``layer`` as the cell's session finds it in its working tree."""


EnvT = TypeVar("EnvT", bound=CellEnv)


@dataclass(frozen=True)
class CellConfig:
    """A cell's config dir as its backend built it for the run (:meth:`Backend.cell_config`)."""

    path: Path
    mismatches: dict[str, list[str]]
    """Kept config layer id → its files that differ from the setup's (the cell is not faithful)."""


class Backend(Protocol[EnvT]):
    """Builds, resets, retargets and removes the environments of type ``EnvT``; runs commands in them."""

    def build(self, cell: ResolvedCell, slot: int) -> EnvT: ...
    def cell_config(self, cell: ResolvedCell) -> CellConfig:
        """``cell``'s config dir, built once per backend: the run's login and fidelity checks read it before
        any session (docs/ARCHITECTURE.md#environments says what the sessions reuse of it)."""
        ...

    def prepare(self, cells: Sequence[ResolvedCell]) -> None:
        """Build ahead what ``cells`` share between their sessions, together where that is cheaper (a backend
        with nothing to share does nothing); ``build`` still builds whatever was not prepared."""

    def reset(self, env: EnvT) -> None:
        """Discard whatever the last session did (the environment is as freshly built)."""

    def retarget(self, env: EnvT, cell: ResolvedCell) -> None:
        """Turn an idle environment into a fresh one for ``cell`` (no new checkout)."""

    def teardown(self, env: EnvT) -> None: ...
    def describe(self, env: EnvT) -> dict[str, Any]:
        """fingerprints, leaks, notes and the redacted env, for the manifest."""

    def clean(self) -> None:
        """Remove what a crashed run left in the work root."""

    def close(self) -> None:
        """Release what the backend shares between environments (after the last teardown)."""

    def command(self, env: EnvT, argv: list[str]) -> list[str]:
        """The command line that runs ``argv`` in ``env`` (inside its view, or under its fence)."""

    def after_session(self, env: EnvT) -> dict[str, Any] | None:
        """Called once a session ended, before the next reset: what it wrote outside its cell (discarded)."""

    def stripped_paths(self, env: EnvT) -> list[str]:
        """Repo paths the cell strips (what :func:`ablate.isolate.gitreads.git_history_reads` looks for)."""

    def checkout(self, env: EnvT) -> AbstractContextManager[Path]:
        """The session's working tree as ablate may read and write it from outside the session (seed files,
        grading); ``env.cwd`` may be a path only the session sees (a view at the user's real repository)."""


#: What the stages that do not care which environments a backend builds hold (the runner, the pool).
EnvBackend: TypeAlias = Backend[Any]


@dataclass(frozen=True)
class BackendOptions:
    """How a run wants its environments built and run; every backend takes these (and may ignore some)."""

    isolate_state: bool = False
    """Give each cell fresh account state instead of a copy of the user's (``--isolate-state``)."""
    dirty: bool = False
    """Uncommitted non-layer changes are part of every cell (``--dirty``)."""
    base_env: Mapping[str, str] | None = None
    """The environment the allow-list picks from (None: ablate's own)."""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """Variables every session gets on top of the allow-listed environment."""
    allow_network: bool = False
    """Sessions keep the host's network (``--allow-network``)."""
    sealed: bool = True
    """False: commands meant to be run by hand after ablate exited (no forwarder to reach, no seccomp
    filter; the host's network)."""
    secrets: Secrets = field(default_factory=Secrets)
    """The credential paths sessions read as empty (``--hide``/``--expose``)."""
    programs: tuple[Path, ...] = ()
    """What the sessions run (the CLI): a view that hides the folder it is in shows that folder."""


# ---------------------------------------------------------------------------------------------------------
# What a backend is, as data (the registry lists these)


@dataclass(frozen=True)
class Capabilities:
    """What a backend guarantees, read by the stages that must not name it (run, probe, report)."""

    real_paths: bool
    """Sessions see the user's own paths (home, repository, config dir): a cell's first request can equal
    the user's own byte for byte, so the probe checks fidelity exactly and the report compares each
    session's context with the probe's; cells' config dirs are built as seen at the real path."""
    copy_on_write: bool
    """Every write of a session lands in a layer of its own that a reset discards; False: some trees are
    linked and a write through them reaches the real files (said in the report's caveats)."""
    lock: str
    """What a locked session cannot do (the manifest's ``isolation.locked``), in words for people."""


@dataclass(frozen=True)
class Support:
    """Whether a backend works on this machine, tried for real, and how it runs here."""

    ok: bool
    reason: str
    mode: str = ""
    """How it runs here (the manifest's ``isolation.mode``: ``root``, ``user-namespace``, ``fenced`` …)."""
    locked: bool = False
    """Its sessions run under bubblewrap (or sandbox-exec): :attr:`Capabilities.lock` holds."""


@dataclass(frozen=True)
class BackendKind:
    """One isolation backend: its name (``--isolation NAME``, the manifest's ``isolation.backend``), what it
    guarantees, whether it works here, how one is made, and what the report's caveats say of it."""

    name: str
    summary: str
    """One line: what a session sees (``--isolation`` and ``ablate doctor``)."""
    capabilities: Capabilities
    support: Callable[[], Support]
    """Whether it works here (cached by the backend: called at every choice)."""
    factory: Callable[[Setup, Catalog, Path, BackendOptions], EnvBackend]
    """Makes the backend (its class): ``factory(setup, catalog, work_root, options)``."""
    auto: bool = True
    """Chosen without ``--isolation`` where it works (in the registry's order); False: only when asked."""
    caveat: str = ""
    """What the report's isolation caveat says of it: what reaches the real files ("" nothing)."""
    unremoved: tuple[str, ...] = ()
    """Leaks it cannot remove, named in the caveat (the network is added when sessions were not sealed)."""


# ---------------------------------------------------------------------------------------------------------
# Helpers every backend shares


def stripped_repo_paths(setup: Setup, catalog: Catalog, cell: ResolvedCell | None) -> list[str]:
    """The repo entries (live tree and HEAD) of every repo layer ``cell`` strips or replaces."""
    if cell is None:
        return []
    gone = set(cell.stripped) | set(cell.replace)
    out: set[str] = set()
    for layer in catalog:
        if layer.side != "repo" or layer.id not in gone:
            continue
        out.update(resolve_layer(layer, setup.repo, memory_slug=setup.memory_slug).entries)
        out.update(layer.patterns(setup.memory_slug))
    return sorted(p.rstrip("/") for p in out if "*" not in p)

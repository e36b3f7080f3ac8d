"""The isolation backends' interface: what the runner needs from a built cell environment.

A backend builds, resets, retargets and removes cell environments (docs/ARCHITECTURE.md#environments). The runner knows nothing else
about isolation: it runs ``env.env`` in ``env.cwd`` and copies the transcript from ``env.config_dir``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

import orjson

from ablate.isolate.credentials import CopyBack, copy_back, read_session_file
from ablate.setup.cells import ResolvedCell


class CellEnv(Protocol):
    """What the runner needs from a built cell environment (``ablate.isolate.environment.CellEnvironment``)."""

    @property
    def root(self) -> Path: ...
    @property
    def config_dir(self) -> Path: ...
    @property
    def cwd(self) -> Path: ...
    @property
    def env(self) -> dict[str, str]: ...


class EnvBackend(Protocol):
    """Builds, resets, retargets and removes cell environments."""

    def build(self, cell: ResolvedCell, slot: int) -> CellEnv: ...
    def reset(self, env: CellEnv) -> None: ...
    def retarget(self, env: CellEnv, cell: ResolvedCell) -> None:
        """Turn an idle environment into a fresh one for ``cell`` (no new checkout)."""
        ...

    def teardown(self, env: CellEnv) -> None: ...
    def describe(self, env: CellEnv) -> dict[str, Any]:
        """fingerprints, leaks, notes and the redacted env, for the manifest."""
        ...

    def clean(self) -> None:
        """Remove what a crashed run left in the work root."""
        ...

    def command(self, env: CellEnv, argv: list[str]) -> list[str]:
        """The command line that runs ``argv`` in ``env`` (``namespace``: inside the session's view)."""
        ...

    def after_session(self, env: CellEnv) -> dict[str, Any] | None:
        """Called once a session ended, before the next reset: what it wrote outside its cell (discarded)."""
        ...

    def stripped_paths(self, env: CellEnv) -> list[str]:
        """Repo paths the cell strips (what :func:`ablate.isolate.gitreads.git_history_reads` looks for)."""
        ...

    def checkout(self, env: CellEnv) -> AbstractContextManager[Path]:
        """The session's working tree as ablate may read and write it from outside the session (seed files,
        grading): ``env.cwd`` for ``links``; a mount of the session's view for ``namespace`` (its ``cwd`` is
        the user's real repository path, which ablate never writes)."""
        ...


class ShadowEnvironments:
    """The real backend: :mod:`ablate.isolate.environment` shadows (config dir + home + private checkout)."""

    def __init__(
        self,
        setup: Any,
        catalog: Any,
        work_root: Path,
        *,
        isolate_state: bool = False,
        dirty: bool = False,
        base_env: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        allow_network: bool = False,
        sealed: bool = True,
    ) -> None:
        self.allow_network, self.sealed = allow_network, sealed
        self.setup = setup
        self.catalog = catalog
        self.work_root = work_root
        self.isolate_state = isolate_state
        self.dirty = dirty
        self.base_env = dict(base_env) if base_env is not None else None
        self.extra_env = dict(extra_env or {})
        self._logins: dict[str, bytes | None] = {}
        """Config dir -> the ``.credentials.json`` its session started with (None: no login file)."""

    def build(self, cell: ResolvedCell, slot: int) -> CellEnv:
        from ablate.isolate.environment import build_environment

        self.work_root.mkdir(parents=True, exist_ok=True)
        env: CellEnv = build_environment(
            self.setup,
            self.catalog,
            cell,
            self.work_root,
            slot=slot,
            # one folder per concurrent session, named by slot only (s00, s01, ...): an environment serves
            # every cell in turn, and every cell's sessions see the very same paths (they reach the prompt)
            name=f"s{slot:02d}",
            isolate_state=self.isolate_state,
            dirty=self.dirty,
            base_env=self.base_env,
            extra_env=self.extra_env,
        )
        return env

    def reset(self, env: CellEnv) -> None:
        from ablate.isolate.environment import CellEnvironment, reset_environment

        assert isinstance(env, CellEnvironment)
        reset_environment(env)

    def retarget(self, env: CellEnv, cell: ResolvedCell) -> None:
        from ablate.isolate.environment import CellEnvironment, retarget_environment

        assert isinstance(env, CellEnvironment)
        retarget_environment(env, self.setup, self.catalog, cell)

    def teardown(self, env: CellEnv) -> None:
        from ablate.isolate.environment import CellEnvironment, teardown_environment

        assert isinstance(env, CellEnvironment)
        teardown_environment(env)

    def describe(self, env: CellEnv) -> dict[str, Any]:
        from ablate.isolate.environment import redacted_env

        return {
            "fingerprints": _jsonable(getattr(env, "fingerprints", {})),
            "leaks": _jsonable(getattr(env, "leaks", [])),
            "notes": [str(n) for n in getattr(env, "notes", [])],
            "env": dict(redacted_env(env.env)),
        }

    def clean(self) -> None:
        from ablate.isolate.environment import clean

        if self.work_root.exists():
            clean(self.work_root)

    def command(self, env: CellEnv, argv: list[str]) -> list[str]:
        """Under bubblewrap's write fence wherever it works (:func:`ablate.isolate.fence.fenced`): the
        session can write its own cell folder and nothing else; a write through a link into the home fails."""
        from ablate.isolate.fence import fenced
        from ablate.isolate.shadow_home import CREDENTIALS
        from ablate.isolate.worktree import objects_dir

        setup = self.setup
        visible = [setup.home, setup.config_dir, setup.repo, objects_dir(setup.repo)]
        # the login the session starts with, kept where it cannot write: what a refresh is checked against
        self._logins[str(env.config_dir)] = _login_bytes(env.config_dir / CREDENTIALS)
        return fenced(
            argv,
            root=env.root,
            cwd=env.cwd,
            visible=visible,
            network=self.allow_network,
            sealed=self.sealed,
        )

    def after_session(self, env: CellEnv) -> dict[str, Any] | None:
        """The writes the fence refused (which paths, how often) and what became of the session's login
        (copied back as a refresh, or discarded and why); without a fence only the login, or None when it
        was untouched: what an unfenced session writes through a link is seen only by the run's
        before/after listing."""
        from ablate.isolate.fence import denied_writes, fence_support

        login = self._copy_back_login(env)
        support = fence_support()
        if not support.ok:
            said = login.discarded or login.copied
            return {"discarded": False, "credentials": login.to_json()} if said else None
        homes = (Path(getattr(env, "home", env.config_dir.parent)), Path(self.setup.home))
        denied = denied_writes(env.config_dir, homes=homes)
        return {"fence": support.name, "denied": denied, "discarded": False, "credentials": login.to_json()}

    def _copy_back_login(self, env: CellEnv) -> CopyBack:
        """The session's ``.credentials.json`` copied back when it is a refresh of the login it started
        with (:mod:`ablate.isolate.credentials`), to the real file, every cell's copy and their pristine
        copies (a reset restores those)."""
        from ablate.isolate.environment import PRISTINE
        from ablate.isolate.shadow_home import CREDENTIALS

        rel = (env.config_dir / CREDENTIALS).relative_to(Path(getattr(env, "home", env.config_dir.parent)))
        copies = [
            p
            for root in sorted(self.work_root.iterdir())
            for p in (root / "home" / rel, root / PRISTINE / "home" / rel)
            if p.is_file() and not p.is_symlink()
        ]
        stored = self._logins.pop(str(env.config_dir), None)
        return copy_back(
            env.config_dir / CREDENTIALS, stored, Path(self.setup.config_dir) / CREDENTIALS, copies
        )

    def stripped_paths(self, env: CellEnv) -> list[str]:
        return stripped_repo_paths(self.setup, self.catalog, getattr(env, "cell", None))

    def checkout(self, env: CellEnv) -> AbstractContextManager[Path]:
        return nullcontext(env.cwd)


def stripped_repo_paths(setup: Any, catalog: Any, cell: ResolvedCell | None) -> list[str]:
    """The repo entries (live tree and HEAD) of every repo layer ``cell`` strips or replaces."""
    from ablate.setup.layers import resolve_layer

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


def _jsonable(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value, default=_default))


def _default(obj: Any) -> Any:
    to_json = getattr(obj, "to_json", None)
    if callable(to_json):
        return to_json()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "__dataclass_fields__"):
        return {k: getattr(obj, k) for k in obj.__dataclass_fields__}
    return str(obj)


def open_backend(
    backend: str,
    setup: Any,
    catalog: Any,
    work_root: Path,
    *,
    isolate_state: bool = False,
    dirty: bool = False,
    base_env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    allow_network: bool = False,
    sealed: bool = True,
) -> EnvBackend:
    """The one place a backend object is made, by the name :func:`~ablate.isolate.namespace.choose_isolation`
    chose (``namespace`` or ``links``). Callers never construct a backend class themselves. ``allow_network``:
    sessions keep the host's network; ``sealed=False``: commands meant to be run by hand, after ablate has
    exited (no forwarder to reach, no seccomp filter; the host's network)."""
    from ablate.isolate.namespace import NamespaceEnvironments

    kinds: dict[str, type[ShadowEnvironments] | type[NamespaceEnvironments]] = {
        "namespace": NamespaceEnvironments,
        "links": ShadowEnvironments,
    }
    if backend not in kinds:
        raise ValueError(f"unknown isolation backend {backend!r}")
    made: EnvBackend = kinds[backend](
        setup,
        catalog,
        work_root,
        isolate_state=isolate_state,
        dirty=dirty,
        base_env=base_env,
        extra_env=extra_env,
        allow_network=allow_network,
        sealed=sealed,
    )
    return made


def _login_bytes(path: Path) -> bytes | None:
    data = read_session_file(path) if os.path.lexists(path) else None
    return data if isinstance(data, bytes) else None

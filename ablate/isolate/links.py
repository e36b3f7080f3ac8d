"""The ``links`` isolation backend (docs/ARCHITECTURE.md#backend-links): a shadow home, config dir and private
checkout per slot (:mod:`ablate.isolate.environment`), each session under a write fence wherever one works
(:mod:`ablate.isolate.fence`); without one, a write through a link reaches the real file and only the run's
before/after listing sees it. The fallback where ``namespace`` does not work (macOS, locked-down Linux).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ablate.folder.session import CredentialsCopy
from ablate.isolate import environment
from ablate.isolate.backend import (
    BackendKind,
    BackendOptions,
    Capabilities,
    CellConfig,
    Support,
    stripped_repo_paths,
)
from ablate.isolate.credentials import copy_back, read_session_file
from ablate.isolate.environment import PRISTINE, CellEnvironment, build_environment, redacted_env
from ablate.isolate.faithful import CopyPrint, setup_prints
from ablate.isolate.fence import denied_writes, fence_support
from ablate.isolate.seal import fenced
from ablate.isolate.shadow_home import CREDENTIALS
from ablate.isolate.shadowfs import remove_path
from ablate.isolate.worktree import objects_dir
from ablate.setup.cells import ResolvedCell
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup, resolve_layers


class LinksEnvironments:
    """The ``links`` backend: :mod:`ablate.isolate.environment` shadows."""

    def __init__(
        self, setup: Setup, catalog: Catalog, work_root: Path, options: BackendOptions = BackendOptions()
    ) -> None:
        self.setup, self.catalog, self.work_root, self.options = setup, catalog, work_root, options
        self._logins: dict[str, bytes | None] = {}
        """Config dir -> the ``.credentials.json`` its session started with (None: no login file)."""
        self._configs: dict[str, CellConfig] = {}

    def prepare(self, cells: Sequence[ResolvedCell]) -> None:
        """Nothing to share: each slot is built whole, at its own path."""

    def cell_config(self, cell: ResolvedCell) -> CellConfig:
        """Built once under ``configs/``, for the run's checks: a slot's sessions hold a config dir built at
        the slot's own path (which reaches the prompt: every cell's sessions see the same slot paths)."""
        if cell.id not in self._configs:
            home = self.work_root / "configs" / cell.dirname
            home.mkdir(parents=True, mode=0o700)
            self._configs[cell.id] = environment.build_cell_config(
                self.setup, self.catalog, cell, home / ".claude", self._wanted,
                isolate_state=self.options.isolate_state, at_real_path=False, home=home,
            )[0]  # fmt: skip
        return self._configs[cell.id]

    @functools.cached_property
    def _wanted(self) -> dict[str, CopyPrint]:
        """The setup's layer prints, read once."""
        return setup_prints(self.setup, self.catalog, resolve_layers(self.setup, self.catalog))

    def build(self, cell: ResolvedCell, slot: int) -> CellEnvironment:
        self.work_root.mkdir(parents=True, exist_ok=True)
        return build_environment(
            self.setup,
            self.catalog,
            cell,
            self.work_root,
            slot=slot,
            # one folder per concurrent session, named by slot only (s00, s01, ...): an environment serves
            # every cell in turn, and every cell's sessions see the very same paths (they reach the prompt)
            name=f"s{slot:02d}",
            isolate_state=self.options.isolate_state,
            dirty=self.options.dirty,
            base_env=self.options.base_env,
            extra_env=self.options.extra_env,
        )

    def reset(self, env: CellEnvironment) -> None:
        environment.reset_environment(env)

    def retarget(self, env: CellEnvironment, cell: ResolvedCell) -> None:
        environment.retarget_environment(env, self.setup, self.catalog, cell)

    def teardown(self, env: CellEnvironment) -> None:
        environment.teardown_environment(env)

    def describe(self, env: CellEnvironment) -> dict[str, Any]:
        return {
            "fingerprints": dict(env.fingerprints),
            "leaks": [asdict(leak) for leak in env.leaks],
            "notes": [str(n) for n in env.notes],
            "env": dict(redacted_env(env.env)),
        }

    def clean(self) -> None:
        environment.clean(self.work_root)

    def close(self) -> None:
        """Remove the cells' config dirs of the checks (nothing else is shared between slots)."""
        remove_path(self.work_root / "configs")

    def command(self, env: CellEnvironment, argv: list[str]) -> list[str]:
        """Under the write fence wherever it works (:func:`ablate.isolate.seal.fenced`)."""
        setup = self.setup
        visible = [setup.home, setup.config_dir, setup.repo, objects_dir(setup.repo)]
        # the login the session starts with, kept where it cannot write: what a refresh is checked against
        login = env.config_dir / CREDENTIALS
        data = read_session_file(login) if os.path.lexists(login) else None
        self._logins[str(env.config_dir)] = data if isinstance(data, bytes) else None
        return fenced(
            argv,
            root=env.root,
            cwd=env.cwd,
            visible=visible,
            network=self.options.allow_network,
            sealed=self.options.sealed,
            hidden=self.options.secrets.paths(Path(setup.home)),
        )

    def after_session(self, env: CellEnvironment) -> dict[str, Any] | None:
        """The writes the fence refused and what became of the session's login; unfenced, only the login (None
        when untouched): what it writes through a link only the run's before/after listing sees."""
        login = self._copy_back_login(env)
        said = {"discarded": False, "credentials": login.model_dump(mode="json")}
        support = fence_support()
        if not support.ok:
            return said if login.discarded or login.copied else None
        denied = denied_writes(env.config_dir, homes=(env.home, Path(self.setup.home)))
        return {"fence": support.name, "denied": denied, **said}

    def _copy_back_login(self, env: CellEnvironment) -> CredentialsCopy:
        """The session's refreshed login copied back to the real file and every cell's (pristine) copy."""
        rel = (env.config_dir / CREDENTIALS).relative_to(env.home)
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

    def stripped_paths(self, env: CellEnvironment) -> list[str]:
        return stripped_repo_paths(self.setup, self.catalog, env.cell)

    def checkout(self, env: CellEnvironment) -> AbstractContextManager[Path]:
        """The private checkout itself: the session sees it at the same path."""
        return nullcontext(env.cwd)


def support() -> Support:
    """``links`` works everywhere; its sessions are locked where a write fence works."""
    fence = fence_support()
    if fence.ok:
        return Support(
            True, f"sessions fenced ({fence.reason}; read-only outside their cell)", "fenced", True
        )
    return Support(True, f"NOT fenced: {fence.reason}", "unfenced", False)


KIND = BackendKind(
    name="links",
    summary="a shadow home and config dir, each session under a write fence: bubblewrap on Linux, "
    "sandbox-exec on macOS; the fallback",
    capabilities=Capabilities(
        real_paths=False, copy_on_write=False, lock="write nothing outside its cell (read-only elsewhere)"
    ),
    support=support,
    factory=LinksEnvironments,
    caveat="in links mode big trees are linked, not copied: writes through them reach the real files "
    "(every manifest cell lists them)",
    unremoved=("managed settings", "ancestor CLAUDE.md"),
)

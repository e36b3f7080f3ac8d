"""The worked example of docs/EXTENDING.md#adding-an-isolation-backend (there ``ablate/isolate/plaincopy.py``),
kept as a module the tests register."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ablate.core.slug import slug
from ablate.isolate import shadowfs
from ablate.isolate.backend import (
    BackendKind,
    BackendOptions,
    Capabilities,
    CellConfig,
    Support,
    stripped_repo_paths,
)
from ablate.isolate.environment import CellEnvironment, build_cell_config, build_config_dir, strip_layer
from ablate.isolate.faithful import setup_prints
from ablate.isolate.procenv import process_env, redacted_env
from ablate.setup.cells import ResolvedCell
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup, resolve_layers


class PlainCopyEnvironments:
    """A :class:`~ablate.isolate.backend.Backend` of :class:`CellEnvironment`: copies, rebuilt at reset."""

    def __init__(
        self, setup: Setup, catalog: Catalog, work_root: Path, options: BackendOptions = BackendOptions()
    ) -> None:
        self.setup, self.catalog, self.work_root, self.options = setup, catalog, work_root, options
        self._configs: dict[str, CellConfig] = {}

    def cell_config(self, cell: ResolvedCell) -> CellConfig:
        """Built once under ``configs/`` for the run's login and fidelity checks."""
        if cell.id not in self._configs:
            home = self.work_root / "configs" / cell.dirname
            home.mkdir(parents=True, mode=0o700)
            wanted = setup_prints(self.setup, self.catalog, resolve_layers(self.setup, self.catalog))
            self._configs[cell.id] = build_cell_config(
                self.setup, self.catalog, cell, home / ".claude", wanted,
                isolate_state=self.options.isolate_state, at_real_path=False, home=home,
            )[0]  # fmt: skip
        return self._configs[cell.id]

    def build(self, cell: ResolvedCell, slot: int) -> CellEnvironment:
        root = self.work_root / f"s{slot:02d}"
        if os.path.lexists(root):
            shadowfs.remove_path(root)
        repo = root / "repo" / self.setup.repo.name
        shutil.copytree(self.setup.repo, repo, symlinks=True)
        memory_slug = slug(str(repo))
        for layer in self.catalog:  # the repo layers the cell strips or replaces, in its copy
            if layer.side == "repo" and layer.id in cell.stripped:
                strip_layer(repo, layer, memory_slug)
            if layer.side == "repo" and layer.id in cell.replace:
                shadowfs.put(repo, layer.patterns(memory_slug)[0], cell.replace[layer.id])
        home = root / "home"
        home.mkdir()
        config = home / ".claude"
        report = build_config_dir(
            self.setup,
            self.catalog,
            cell,
            config,
            memory_slug=memory_slug,
            isolate_state=self.options.isolate_state,
            home=home,
        )
        base_env = os.environ if self.options.base_env is None else self.options.base_env
        tmp = root / "tmp"
        tmp.mkdir()
        env = process_env(
            base_env, home=home, config_dir=config, tmpdir=tmp, extra_env=self.options.extra_env
        )
        return CellEnvironment(
            cell=cell,
            root=root,
            home=home,
            config_dir=config,
            cwd=repo,
            env=env,
            fingerprints={},
            leaks=list(report.leaks),
            notes=list(report.notes),
            slot=slot,
            repo=self.setup.repo,
            memory_slug=memory_slug,
        )

    def prepare(self, cells: Sequence[ResolvedCell]) -> None:
        pass  # nothing shared between slots: each copy is built whole

    def reset(self, env: CellEnvironment) -> None:
        self.retarget(env, env.cell)

    def retarget(self, env: CellEnvironment, cell: ResolvedCell) -> None:
        vars(env).update(vars(self.build(cell, env.slot or 0)))

    def teardown(self, env: CellEnvironment) -> None:
        shadowfs.remove_path(env.root)

    def describe(self, env: CellEnvironment) -> dict[str, Any]:
        return {
            "fingerprints": {},
            "leaks": [asdict(leak) for leak in env.leaks],
            "notes": list(env.notes),
            "env": dict(redacted_env(env.env)),
        }

    def clean(self) -> None:
        if self.work_root.exists():
            shadowfs.remove_path(self.work_root)

    def close(self) -> None:
        """Nothing is shared between slots."""

    def command(self, env: CellEnvironment, argv: list[str]) -> list[str]:
        return list(argv)  # no lock: the session runs as it is

    def after_session(self, env: CellEnvironment) -> dict[str, Any] | None:
        return None  # what it wrote is in its copy, discarded at reset; outside it, only the listing sees

    def stripped_paths(self, env: CellEnvironment) -> list[str]:
        return stripped_repo_paths(self.setup, self.catalog, env.cell)

    def checkout(self, env: CellEnvironment) -> AbstractContextManager[Path]:
        return nullcontext(env.cwd)


KIND = BackendKind(
    name="plaincopy",
    summary="a plain copy of the config dir and the repository per session slot; sessions not locked",
    capabilities=Capabilities(real_paths=False, copy_on_write=False, lock="nothing (not locked)"),
    support=lambda: Support(True, "a plain copy works everywhere; sessions NOT locked", "unlocked", False),
    factory=PlainCopyEnvironments,
    auto=False,  # only with --isolation plaincopy
    caveat="in plaincopy mode sessions are not locked: a write to a path outside the copy reaches the real file",
    unremoved=("managed settings", "ancestor CLAUDE.md"),
)

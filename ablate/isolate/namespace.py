"""The ``namespace`` isolation backend (docs/ARCHITECTURE.md#backend-namespace): every session in its own
copy-on-write view of the machine at the real paths, one upper folder per area (``sNN/up/<area>``,
:data:`AREAS`) that a reset discards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ablate.core.errors import AblateError, UsageError
from ablate.core.fsutil import atomic_write_json
from ablate.core.mounts import mounts_under, unmount, unmount_all_under
from ablate.core.tempwork import disown_mount, own_mount
from ablate.folder.layout import TMP_EMPTY
from ablate.folder.session import CredentialsCopy
from ablate.isolate import nsexec, shadowfs, worktree
from ablate.isolate.backend import BackendKind, BackendOptions, Capabilities, CellConfig, stripped_repo_paths
from ablate.isolate.credentials import copy_back
from ablate.isolate.detect import namespace_check
from ablate.isolate.environment import build_cell_config, refuse_inside_setup
from ablate.isolate.faithful import CopyPrint, kept_mismatches, mismatch_lines, setup_prints
from ablate.isolate.nslower import RepoLower, build_repo_layers, build_repo_lower
from ablate.isolate.procenv import process_env, redacted_env
from ablate.isolate.seal import program_folders, view_command
from ablate.isolate.shadow_home import CREDENTIALS, ConfigReport
from ablate.isolate.writes import session_writes
from ablate.setup.cells import ResolvedCell
from ablate.setup.layers import Catalog, Layer, LayerFiles
from ablate.setup.load import Leak, Setup, ancestor_leaks, fixed_leaks, resolve_layers

NAME = "namespace"
NSEXEC = Path(nsexec.__file__).resolve()
MARKER = ".ablate-env"
#: The areas of a session's view, in mount order after ``/tmp``; their upper folders are ``up/<area>``.
AREAS = ("tmp", "home", "repo", "objects", "config")


# ---------------------------------------------------------------------------------------------------------
# Views: the mounts of one session


@dataclass(frozen=True)
class Mount:
    target: str
    lower: tuple[str, ...]
    upper: str
    work: str


def area_mount(root: Path, area: str, target: str | Path, *lower: str | Path) -> Mount:
    """The overlay of one area of the view at ``root``: ``lower`` at ``target``, written to ``up/<area>``."""
    return Mount(str(target), tuple(map(str, lower)), str(root / "up" / area), str(root / "wk" / area))


def mounts_below_tmp() -> list[str]:
    """Mounts below the host's ``/tmp`` (an AppImage's ``/tmp/.mount_*``) that keep an ordinary user's view from
    showing it: in a user namespace an overlay whose lower folder has a mount below it is refused (EINVAL)."""
    if os.geteuid() == 0:
        return []
    top = os.path.realpath("/tmp")
    return [p for p in mounts_under(top) if p != top]


def tmp_note(below: Sequence[str]) -> str:
    """What a cell says when its sessions saw an empty ``/tmp`` instead of the host's."""
    return (
        f"{TMP_EMPTY}: the host's has file systems mounted below it ({', '.join(below[:3])}), which a user "
        "namespace cannot show through an overlay; every session of the run saw the same empty /tmp"
    )


def tmp_area(
    root: Path, below: Sequence[str], targets: Sequence[str | Path], programs: Sequence[Path] = ()
) -> list[Mount]:
    """The ``/tmp`` of the view at ``root``: the host's, copy-on-write, or where mounts ``below`` it keep it out
    (:func:`mounts_below_tmp`; a backend reads it once, for all its cells) an empty folder holding the mount
    points of the view's ``targets`` under ``/tmp``, and read-only the folders there its ``programs`` run from
    (:func:`~ablate.isolate.seal.program_folders`) that no target shows (an overlay with no upper: two lowers)."""
    if not below:
        return [area_mount(root, "tmp", "/tmp", "/tmp")]
    inside, folders = shadowfs.is_inside, {str(f) for f in program_folders(programs)}
    shown = sorted(f for f in folders if inside(f, "/tmp") and not any(inside(f, str(t)) for t in targets))
    empty, nothing = root / "empty-tmp", root / "empty"
    for folder in (empty, nothing):
        shadowfs.remove_path(folder)
        folder.mkdir(parents=True)
    for target in (*targets, *shown):
        if inside(str(target), "/tmp"):
            (empty / os.path.relpath(target, "/tmp")).mkdir(parents=True, exist_ok=True)
    return [area_mount(root, "tmp", "/tmp", empty), *(Mount(f, (f, str(nothing)), "", "") for f in shown)]


def order_mounts(mounts: list[Mount]) -> list[Mount]:
    """``/tmp`` first, then shallower targets before deeper ones (a repo under the home after the home)."""
    return sorted(mounts, key=lambda m: (m.target != "/tmp", m.target.count("/"), m.target))


def write_spec(path: Path, mounts: list[Mount], cwd: Path) -> None:
    atomic_write_json(path, {"mounts": [asdict(m) for m in order_mounts(mounts)], "cwd": str(cwd)})


@contextmanager
def held_view(spec: Path, mounts: list[Mount]) -> Iterator[int]:
    """``mounts`` held by a helper process in a namespace of its own (an ordinary user cannot mount in
    ablate's): the helper's pid, whose ``/proc/<pid>/root`` shows them, until the block ends."""
    write_spec(spec, mounts, Path(mounts[0].target))
    proc = subprocess.Popen(
        [sys.executable, "-I", str(NSEXEC), "--hold", str(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        if proc.stdout.readline().strip() != "ready":
            proc.wait(timeout=30)
            raise AblateError(f"mounting {mounts[0].target} failed: {proc.stderr.read().strip()[-300:]}")
        yield proc.pid
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def fresh_uppers(root: Path, areas: tuple[str, ...] = AREAS) -> None:
    """Empty upper and work folders for every area (the reset: whatever a session wrote is discarded)."""
    for part in ("up", "wk"):
        shadowfs.remove_path(root / part)
        for area in areas:
            (root / part / area).mkdir(parents=True, mode=0o700)


# ---------------------------------------------------------------------------------------------------------
# Cells and sessions


@dataclass
class CellLayers:
    """What one cell adds to the run's lower layers."""

    config: Path
    repo: Path
    fingerprints: dict[str, str]
    notes: list[str]
    leaks: list[Leak]
    repo_layers: dict[str, dict[str, Any]]
    """Repo layer id → {present, entries, fingerprint, digests} in the cell's merged view."""
    mismatches: dict[str, list[str]] = field(default_factory=dict)
    """Kept layer id → its files that differ from the setup's (not faithful)."""


class ViewAtRealPaths:
    """What every view at the real paths shares: its spec, its upper folders and the paths they stand for."""

    root: Path
    spec: Path
    home: Path
    repo: Path
    real_config: Path

    @property
    def cwd(self) -> Path:
        return self.repo

    @property
    def config_dir(self) -> Path:
        """Where the session's config-dir writes land, seen from outside (transcripts are found here)."""
        return self.root / "up" / "config"

    network: bool = False
    """The session keeps the host's network (``--allow-network``)."""
    sealed: bool = True
    """False: a command to run by hand after ablate exits (no forwarder, the host's network)."""
    hidden: tuple[Path, ...] = ()
    """Credential paths shown empty (:mod:`ablate.isolate.secrets`)."""

    def wrap(self, argv: list[str]) -> list[str]:
        shown = list(self.shown_as().values())
        return view_command(
            self.spec,
            argv,
            writable=shown,
            cwd=self.cwd,
            network=self.network,
            sealed=self.sealed,
            hidden=self.hidden,
        )

    def upper(self, area: str) -> Path:
        return self.root / "up" / area

    def shown_as(self) -> dict[str, Path]:
        """Area → the real path its upper folder stands for."""
        return {
            "tmp": Path("/tmp"),
            "home": self.home,
            "repo": self.repo,
            "objects": self.repo / ".git" / "objects",
            "config": self.real_config,
        }


@dataclass
class NamespaceCellEnv(ViewAtRealPaths):
    """One session slot: a cell's view at the real paths (what the runner and the probe drive)."""

    cell: ResolvedCell
    root: Path
    slot: int
    home: Path
    repo: Path
    real_config: Path
    env: dict[str, str]
    spec: Path
    layers: CellLayers
    memory_slug: str = ""

    @property
    def session_config_dir(self) -> Path:
        """The session sees its config dir at the real path."""
        return self.real_config

    @property
    def config_source(self) -> Path:
        """The cell's config dir as built (the lower layer of the session's config view)."""
        return self.layers.config

    def checkout_layer(self, layer: Layer, memory_slug: str) -> LayerFiles:
        """The repo layer as the session finds it: resolved in the cell's merged view when the cell was
        built (the view is mounted only for its sessions)."""
        seen = self.layers.repo_layers.get(layer.id, {})
        lf = LayerFiles(layer=layer, base=self.cwd, entries=list(seen.get("entries", [])))
        lf.fingerprint = str(seen.get("fingerprint", ""))
        lf.files = [rel for rel in seen.get("digests", {}) if "#" not in rel]  # ``file#key``: a JSON key
        if seen.get("present") and not lf.entries:
            lf.entries = ["?"]
        return lf

    @property
    def leaks(self) -> list[Leak]:
        return self.layers.leaks

    @property
    def mismatches(self) -> dict[str, list[str]]:
        return self.layers.mismatches


class NamespaceEnvironments:
    """The ``namespace`` backend: a :class:`~ablate.isolate.backend.Backend` of :class:`NamespaceCellEnv`."""

    def __init__(
        self, setup: Setup, catalog: Catalog, work_root: Path, options: BackendOptions = BackendOptions()
    ) -> None:
        self.setup, self.catalog, self.options = setup, catalog, options
        self.work_root = Path(os.path.abspath(work_root))
        self._lock = threading.Lock()
        self._lower: RepoLower | None = None
        self._cells: dict[str, CellLayers] = {}
        self._repos: dict[str, tuple[Path, dict[str, Any]]] = {}
        """A cell's worktree operations (JSON) → its repo layer and what the layer resolution saw there."""
        self._configs: dict[str, tuple[CellConfig, ConfigReport, dict[str, CopyPrint]]] = {}
        self._prints: dict[str, CopyPrint] | None = None
        """The setup's layer prints, read once: what every cell's kept layers must equal."""
        self.below_tmp = mounts_below_tmp()
        """Mounts that keep the host's ``/tmp`` from the views, read once: every cell shows the same ``/tmp``."""
        refuse_inside_setup(setup, self.work_root, hint="pick another work dir")

    @property
    def base_env(self) -> Mapping[str, str]:
        """What the sessions' allow-listed environment is picked from (ablate's own unless given)."""
        return os.environ if self.options.base_env is None else self.options.base_env

    # -- lower layers, built once ------------------------------------------------------------------------

    @property
    def shared(self) -> Path:
        return self.work_root / "ns-shared"

    def lower(self) -> RepoLower:
        with self._lock:
            return self._lower_locked()

    def _lower_locked(self) -> RepoLower:
        if self._lower is None:
            self._setup_prints_locked()
            self._lower = build_repo_lower(
                self.setup, self.catalog, self.shared / "lower", dirty=self.options.dirty
            )
        return self._lower

    def _setup_prints_locked(self) -> dict[str, CopyPrint]:
        """The first call makes the shared folder."""
        if self._prints is None:
            self.shared.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.shared / MARKER, {"created": time.time(), "backend": NAME})
            self._prints = setup_prints(self.setup, self.catalog, resolve_layers(self.setup, self.catalog))
        return self._prints

    def cell_config(self, cell: ResolvedCell) -> CellConfig:
        """``cell``'s config dir, built once: the lower layer every view of the cell shows at the real path."""
        with self._lock:
            return self._config_locked(cell)[0]

    def _config_locked(self, cell: ResolvedCell) -> tuple[CellConfig, ConfigReport, dict[str, CopyPrint]]:
        if cell.id not in self._configs:
            wanted = self._setup_prints_locked()
            cdir = self.shared / "cells" / cell.dirname
            shadowfs.remove_path(cdir)
            cdir.mkdir(parents=True)
            self._configs[cell.id] = build_cell_config(
                self.setup, self.catalog, cell, cdir / "config", wanted,
                isolate_state=self.options.isolate_state, at_real_path=True,
            )  # fmt: skip
        return self._configs[cell.id]

    def prepare(self, cells: Sequence[ResolvedCell]) -> None:
        """Every cell's repo layer not built yet, all in one :mod:`ablate.isolate.cowlayer` process: a
        process costs ~0.3 CPU-s (its imports, measured), per cell the largest part of building one."""
        with self._lock:
            self._build_cells(list({c.id: c for c in cells if c.id not in self._cells}.values()))

    def cell_layers(self, cell: ResolvedCell) -> CellLayers:
        with self._lock:
            if cell.id not in self._cells:
                self._build_cells([cell])
            return self._cells[cell.id]

    def _build_cells(self, cells: list[ResolvedCell]) -> None:
        """The cells' repo layers, each distinct one built once: a layer is read-only, so cells whose worktree
        operations agree (every cell that changes only the config dir) share it."""
        if not cells:
            return
        lower = self._lower_locked()
        repo_layers = [layer.model_dump(mode="json") for layer in self.catalog if layer.side == "repo"]
        keys: dict[str, str] = {}
        items: dict[str, dict[str, Any]] = {}
        for cell in cells:
            ops = worktree.worktree_ops(self.setup, lower.plan, cell, lower.path, lower.pristine)
            keys[cell.id] = key = json.dumps(ops, sort_keys=True)
            cdir = self._config_locked(cell)[0].path.parent
            if key not in self._repos and key not in items:
                items[key] = {
                    "lower": [str(lower.path)],
                    "upper": str(cdir / "repo"),
                    "work": str(cdir / "repo.work"),
                    "mnt": str(cdir / "mnt"),
                    "pristine": str(lower.pristine),
                    "ops": ops,
                    "memory_slug": self.setup.memory_slug,
                    "resolve": repo_layers,
                    "report": str(cdir / "repo-layers.json"),
                }
        if items:
            build_repo_layers(list(items.values()), self.shared / "cowlayer.json")
        for key, item in items.items():
            self._repos[key] = (
                Path(item["upper"]),
                json.loads(Path(item["report"]).read_text(encoding="utf-8")),
            )
        for cell in cells:
            self._cells[cell.id] = self._cell_layers(cell, lower, *self._repos[keys[cell.id]])

    def _cell_layers(
        self, cell: ResolvedCell, lower: RepoLower, repo: Path, seen: dict[str, Any]
    ) -> CellLayers:
        """A cell's layers once its repo layer is built: the prints its files must match, its notes, its leaks."""
        built, report, base = self._config_locked(cell)
        setup, cdir = self.setup, built.path.parent
        prints = dict(base)
        for layer in self.catalog:
            if layer.side == "repo":
                got = seen.get(layer.id, {})  # each file's digest too: a mismatch names the files that differ
                prints[layer.id] = (str(got.get("fingerprint", "")), dict(got.get("digests", {})))
        fingerprints = {lid: fp for lid, (fp, _digests) in prints.items()}
        notes = list(report.notes) + list(lower.plan.notes)
        if self.options.dirty:
            notes.append("built with --dirty: uncommitted non-layer changes are part of every cell")
        mismatches = kept_mismatches(self._setup_prints_locked(), cell, prints)
        notes.extend(mismatch_lines(mismatches))
        if self.below_tmp:
            notes.append(tmp_note(self.below_tmp))
        leaks = [*report.leaks, *ancestor_leaks(setup.repo, config_dir=setup.config_dir), *fixed_leaks(setup)]
        return CellLayers(cdir / "config", repo, fingerprints, notes, leaks, seen, mismatches)

    # -- EnvBackend ----------------------------------------------------------------------------------------

    def build(self, cell: ResolvedCell, slot: int) -> NamespaceCellEnv:
        if not 0 <= slot <= 99:
            raise UsageError(f"slot {slot}: must be between 0 and 99")
        layers = self.cell_layers(cell)
        root = self.work_root / f"s{slot:02d}"
        shadowfs.remove_path(root)
        root.mkdir(parents=True)
        atomic_write_json(root / MARKER, {"created": time.time(), "backend": NAME})
        env = process_env(
            self.base_env,
            home=self.setup.home,
            config_dir=self.setup.config_dir,
            tmpdir="/tmp",  # the view's own /tmp: private and writable
            extra_env=self.options.extra_env,
        )
        cenv = NamespaceCellEnv(
            cell=cell,
            root=root,
            slot=slot,
            home=self.setup.home,
            repo=self.setup.repo,
            real_config=self.setup.config_dir,
            env=env,
            spec=root / "view.json",
            layers=layers,
            memory_slug=self.setup.memory_slug,
        )
        cenv.network, cenv.sealed = self.options.allow_network or not self.options.sealed, self.options.sealed
        cenv.hidden = tuple(self.options.secrets.paths(self.setup.home))
        self._write_view(cenv)
        fresh_uppers(root)
        return cenv

    def _repo_mounts(self, env: NamespaceCellEnv, target: Path) -> list[Mount]:
        """The cell's repo layer over the pristine checkout at ``target``, the user's objects under it."""
        lower = self.lower()
        return [
            area_mount(env.root, "repo", target, env.layers.repo, lower.path),
            area_mount(env.root, "objects", target / ".git" / "objects", lower.objects),
        ]

    def _write_view(self, env: NamespaceCellEnv) -> None:
        mounts = [
            *tmp_area(env.root, self.below_tmp, (env.home, env.repo, env.real_config), self.options.programs),
            area_mount(env.root, "home", env.home, env.home),
            *self._repo_mounts(env, env.repo),
            area_mount(env.root, "config", env.real_config, env.layers.config),
        ]
        write_spec(env.spec, mounts, env.repo)

    def reset(self, env: NamespaceCellEnv) -> None:
        fresh_uppers(env.root)

    def retarget(self, env: NamespaceCellEnv, cell: ResolvedCell) -> None:
        env.layers = self.cell_layers(cell)
        env.cell = cell
        self._write_view(env)
        fresh_uppers(env.root)

    def teardown(self, env: NamespaceCellEnv) -> None:
        shadowfs.remove_path(env.root)

    def command(self, env: NamespaceCellEnv, argv: list[str]) -> list[str]:
        return env.wrap(argv)

    @contextmanager
    def checkout(self, env: NamespaceCellEnv) -> Iterator[Path]:
        """The session's working tree as ablate seeds and grades it from outside: the same overlay, mounted at
        ``<slot>/merged`` for the duration (never the real path); as an ordinary user in a holding process's
        namespace, reached through its ``/proc/<pid>/root``."""
        merged = env.root / "merged"
        merged.mkdir(exist_ok=True)
        mounts = self._repo_mounts(env, merged)
        if os.geteuid() != 0:
            with held_view(env.root / "merged.json", mounts) as pid:
                yield Path(f"/proc/{pid}/root{merged}")
            return
        # as root the view is mounted in ablate's own namespace (git and the checks read it at its path);
        # its owner file lets the next ablate command unmount it if this runner is killed
        own_mount(merged)
        nsexec.mount_overlay(merged.as_posix(), list(mounts[0].lower), mounts[0].upper, mounts[0].work)
        objects = mounts[1].target
        try:
            nsexec.mount_overlay(objects, list(mounts[1].lower), mounts[1].upper, mounts[1].work)
        except OSError:
            unmount(str(merged))
            disown_mount(merged)
            raise
        try:
            yield merged
        finally:
            unmount(objects)
            unmount(str(merged))
            disown_mount(merged)

    def stripped_paths(self, env: NamespaceCellEnv) -> list[str]:
        return stripped_repo_paths(self.setup, self.catalog, env.cell)

    def after_session(self, env: NamespaceCellEnv) -> dict[str, Any]:
        """What the session wrote outside its cell, after a refreshed login was copied back."""
        login = copy_back_credentials(env)
        writes = session_writes(env).model_dump(mode="json", exclude_none=True, exclude={"denied"})
        return {**writes, "credentials": login.model_dump(mode="json")}

    def describe(self, env: NamespaceCellEnv) -> dict[str, Any]:
        lower = self.lower()
        return {
            "isolation": NAME,
            "fingerprints": dict(env.layers.fingerprints),
            "leaks": [asdict(leak) for leak in env.leaks],
            "notes": list(env.layers.notes),
            "mismatches": dict(env.mismatches),
            "env": dict(redacted_env(env.env)),
            "branch": lower.branch,
        }

    def clean(self) -> None:
        for path in (self.shared, *sorted(self.work_root.glob("s[0-9][0-9]"))):
            if (path / MARKER).is_file():
                # a runner killed while it graded a session's view left that view mounted here
                unmount_all_under(str(path))
                shadowfs.remove_path(path)

    def close(self) -> None:
        """Remove the run's lower layers (after the last teardown)."""
        shadowfs.remove_path(self.shared)


def copy_back_credentials(env: NamespaceCellEnv) -> CredentialsCopy:
    """Copy a refreshed ``.credentials.json`` back (:mod:`ablate.isolate.credentials`), else say why not."""
    lower = env.layers.config / CREDENTIALS
    stored = lower.read_bytes() if lower.is_file() and not lower.is_symlink() else None
    copies = env.layers.config.parent.parent.glob(f"*/config/{CREDENTIALS}")
    return copy_back(env.upper("config") / CREDENTIALS, stored, env.real_config / CREDENTIALS, copies)


KIND = BackendKind(
    name=NAME,
    summary="every session in its own copy-on-write view at your real paths; the default wherever user "
    "namespaces, or root, allow it",
    capabilities=Capabilities(
        real_paths=True,
        copy_on_write=True,
        lock="undo its view, reach a process outside it or regain a capability",
    ),
    support=namespace_check,
    factory=NamespaceEnvironments,
)

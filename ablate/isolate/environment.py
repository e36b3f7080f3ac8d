"""The environment builder (docs/ARCHITECTURE.md#environments): a cell as a shadow home + a private checkout.

A cell root ``<out>/<cNN>[-sNN]/`` (equal-length names: the paths reach the prompt) holds ``.ablate-env``
(written first, so `ablate env clean` finds a half-built cell), ``environment.json``, ``home/`` (the shadow
HOME: ``.claude`` is CLAUDE_CONFIG_DIR), ``wt/<repo-name>/`` (the session's cwd) and ``.pristine/`` (for
cheap resets). Config side: :mod:`ablate.isolate.shadow_home`; repo side: :mod:`ablate.isolate.worktree`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ablate import __version__
from ablate.core.errors import OutputExists, UnsafeEnvironment, UsageError
from ablate.core.fsutil import atomic_write_json
from ablate.core.slug import slug
from ablate.isolate import piece_ops, shadow_home, shadowfs, worktree
from ablate.isolate.backend import CellConfig
from ablate.isolate.faithful import (
    CopyPrint,
    cell_prints,
    config_prints,
    kept_mismatches,
    mismatch_lines,
    setup_prints,
)

# the one process-environment allow-list (docs/ARCHITECTURE.md#process-env); re-exported for this module's callers
from ablate.isolate.procenv import (
    is_secret as is_secret,
    process_env as process_env,
    redacted_env as redacted_env,
)
from ablate.setup.cells import ResolvedCell
from ablate.setup.layers import Catalog, Layer, LayerFiles, resolve_layer
from ablate.setup.load import Leak, Setup, ancestor_leaks, fixed_leaks, parse_imports, resolve_layers

SCHEMA_VERSION = 1
MARKER = ".ablate-env"
MANIFEST = "environment.json"
PRISTINE = ".pristine"

# ---------------------------------------------------------------------------------------------------------
# The environment


@dataclass
class CellEnvironment:
    """One materialised cell: where it lives, how to run the CLI in it, and what it contains."""

    cell: ResolvedCell
    root: Path
    """``<out>/<cell.dirname>[-s<slot>]``."""
    home: Path
    """The shadow home (``HOME``)."""
    config_dir: Path
    """``home/.claude``, absolute (``CLAUDE_CONFIG_DIR``)."""
    cwd: Path
    """The private detached checkout the session runs in."""
    env: dict[str, str]
    """The full explicit process environment (docs/ARCHITECTURE.md#one-endpoint); secrets included: never write it out as is."""
    fingerprints: dict[str, str]
    """Layer id → fingerprint of what this cell contains ("" when absent); comparable with the setup's."""
    leaks: list[Leak] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    slot: int | None = None
    head: str = ""
    """The commit the worktree is a checkout of."""
    repo: Path | None = None
    """The user's repository."""
    dirty: bool = False
    isolate_state: bool = False
    memory_slug: str = ""
    """The slug the CLI keys auto-memory (and transcripts) by in this cell: that of the cell's checkout."""
    repo_plan: worktree.RepoPlan | None = field(default=None, repr=False, compare=False)
    """The repository's layer entries and uncommitted changes, read once at build time."""
    setup_layers: dict[str, LayerFiles] = field(default_factory=dict, repr=False, compare=False)
    """The user's layers as resolved at build time (what every retarget compares fingerprints with)."""
    mismatches: dict[str, list[str]] = field(default_factory=dict)
    """Kept layer id → its files that differ from the setup's (:func:`kept_mismatches`): not faithful."""

    @property
    def pristine(self) -> Path:
        return self.root / PRISTINE

    @property
    def session_config_dir(self) -> Path:
        """The session sees its config dir where it is: ``config_dir``."""
        return self.config_dir

    @property
    def config_source(self) -> Path:
        """The cell's config dir is built in place: ``config_dir``."""
        return self.config_dir

    def checkout_layer(self, layer: Layer, memory_slug: str) -> LayerFiles:
        """The repo layer as the session finds it: resolved in the private checkout, a plain folder."""
        return resolve_layer(layer, self.cwd, memory_slug=memory_slug)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description (env redacted; never the credentials)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "ablate_version": __version__,
            "cell": {
                "id": self.cell.id,
                "label": self.cell.label,
                "dirname": self.cell.dirname,
                "stripped": list(self.cell.stripped),
                "empty_config": self.cell.empty_config,
                "kept": list(self.cell.kept),
                "replace": {k: str(v) for k, v in self.cell.replace.items()},
                **({"pieces": list(self.cell.pieces)} if self.cell.pieces else {}),
            },
            "slot": self.slot,
            "root": str(self.root),
            "home": str(self.home),
            "config_dir": str(self.config_dir),
            "cwd": str(self.cwd),
            "repo": str(self.repo) if self.repo else None,
            "head": self.head,
            "memory_slug": self.memory_slug,
            "dirty": self.dirty,
            "isolate_state": self.isolate_state,
            "env": redacted_env(self.env),
            "fingerprints": dict(self.fingerprints),
            "leaks": [asdict(leak) for leak in self.leaks],
            "notes": list(self.notes),
            "mismatches": {k: list(v) for k, v in self.mismatches.items()},
        }


def build_environment(
    setup: Setup,
    catalog: Catalog,
    cell: ResolvedCell,
    out: Path,
    *,
    slot: int | None = None,
    isolate_state: bool = False,
    dirty: bool = False,
    base_env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    record_ancestor_leaks: bool = False,
    name: str | None = None,
) -> CellEnvironment:
    """Materialise ``cell`` under ``out``: every check runs before anything is written, a failure half way
    removes what was built. ``record_ancestor_leaks``: instruction files above the checkout are leaks, not a
    refusal; ``name``: the folder's name (the runner's cell-agnostic slots, ``s00``…)."""
    if slot is not None and not 0 <= slot <= 99:
        raise UsageError(f"slot {slot}: must be between 0 and 99")
    # ``<out>/cNN`` or ``<out>/cNN-sNN`` (two-digit slots keep every path the same length)
    name = name or (cell.dirname if slot is None else f"{cell.dirname}-s{slot:02d}")
    root = Path(os.path.abspath(out)).resolve() / name
    if os.path.lexists(root):
        raise OutputExists(
            f"{root}: already exists",
            hint=f"remove it with `ablate env clean {root.parent}` or pick another --out",
        )
    refuse_inside_setup(setup, root, hint="pick an --out outside it")
    home = root / "home"
    config = home / ".claude"
    wt = root / "wt" / setup.repo.name
    # links cannot make /tmp private: a private TMPDIR per cell instead, and no bytecode written beside the
    # (linked) hook scripts of big trees or anywhere else a Python hook imports from
    env = process_env(
        os.environ if base_env is None else base_env,
        home=home,
        config_dir=config,
        tmpdir=root / "tmp",
        extra_env=extra_env,
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    # -- checks (nothing written yet) --
    setup_layers = resolve_layers(setup, catalog)  # raises on a symlink loop in a layer
    plan = worktree.plan_repo(setup, catalog, dirty=dirty)  # raises on non-layer changes unless dirty
    above = ancestor_leaks(wt)
    if above and not record_ancestor_leaks:
        found = ", ".join(leak.path for leak in above)
        raise UnsafeEnvironment(
            f"instruction files above {wt}: {found}; the CLI would load them in every cell",
            hint="pick an --out whose parent folders hold no CLAUDE.md, AGENTS.md, .claude/ or .mcp.json",
        )

    root.mkdir(parents=True)
    try:
        atomic_write_json(
            root / MARKER,
            {"schema_version": SCHEMA_VERSION, "worktree": str(wt), "created": time.time()},
        )
        result = CellEnvironment(
            cell=cell,
            root=root,
            home=home,
            config_dir=config,
            cwd=wt,
            env=env,
            fingerprints={},
            leaks=[*above, *fixed_leaks(setup)],
            slot=slot,
            head=setup.head,
            repo=setup.repo,
            dirty=dirty,
            isolate_state=isolate_state,
            memory_slug=slug(str(wt)),
            repo_plan=plan,
            setup_layers=setup_layers,
        )
        result.pristine.mkdir()
        fresh_tmp(root)
        refs = worktree.make_checkout(setup, wt)
        atomic_write_json(result.pristine / "refs.json", refs)
        worktree.save_git_state(wt, result.pristine)
        _populate(setup, catalog, cell, result, setup_layers)
        return result
    except BaseException:
        shadowfs.remove_path(root)
        raise


def refuse_inside_setup(setup: Setup, path: Path, *, hint: str) -> None:
    """A ``UsageError`` when ablate's own folder ``path`` lies inside the setup's repository or config dir."""
    for inside, what in ((setup.repo, "repository"), (setup.config_dir, "config dir")):
        if shadowfs.is_inside(str(path), str(inside)):
            raise UsageError(f"{path}: inside the {what} {inside}", hint=hint)


def _populate(
    setup: Setup,
    catalog: Catalog,
    cell: ResolvedCell,
    result: CellEnvironment,
    setup_layers: dict[str, LayerFiles],
) -> None:
    """Give a clean checkout of HEAD ``cell``'s content: its config dir and its worktree operations."""
    plan = result.repo_plan
    assert plan is not None
    pristine, home = result.pristine, result.home
    home.mkdir(mode=0o700)
    os.chmod(home, 0o700)
    report = build_config_dir(
        setup,
        catalog,
        cell,
        result.config_dir,
        memory_slug=result.memory_slug,
        isolate_state=result.isolate_state,
        home=home,
    )
    result.notes.extend(report.notes)
    result.leaks.extend(report.leaks)
    shadow_home.link_home(setup, home)
    ops = worktree.worktree_ops(setup, plan, cell, result.cwd, pristine)
    worktree.apply_ops(result.cwd, pristine, ops)
    atomic_write_json(pristine / "ops.json", ops)
    result.notes.extend(plan.notes)
    if result.dirty:
        result.notes.append("built with --dirty: uncommitted non-layer changes are part of every cell")
    prints = cell_prints(
        setup, catalog, config_dir=result.config_dir, memory_slug=result.memory_slug, cwd=result.cwd
    )
    result.fingerprints = {lid: fp for lid, (fp, _digests) in prints.items()}
    result.mismatches = kept_mismatches(setup_prints(setup, catalog, setup_layers), cell, prints)
    result.notes.extend(mismatch_lines(result.mismatches))
    shadowfs.remove_path(pristine / "home")
    shutil.copytree(result.home, pristine / "home", symlinks=True)
    atomic_write_json(result.root / MANIFEST, result.to_json())


def retarget_environment(env: CellEnvironment, setup: Setup, catalog: Catalog, cell: ResolvedCell) -> None:
    """Make an idle environment a fresh one for ``cell`` without a new checkout, indistinguishable from a fresh
    build (tested with tree hashes): the runner keeps one checkout per concurrent session, not per cell."""
    if env.cell.id == cell.id:
        reset_environment(env)
        return
    # the user's setup was read once, at build time: a run compares every cell with the same snapshot
    if env.repo_plan is None:
        env.repo_plan = worktree.plan_repo(setup, catalog, dirty=env.dirty)
    if not env.setup_layers:
        env.setup_layers = resolve_layers(setup, catalog)
    worktree.reset_worktree(env.cwd, env.head, env.pristine, [])
    fresh_tmp(env.root)
    shadowfs.remove_path(env.home)
    env.cell = cell
    env.notes = []
    env.leaks = [*ancestor_leaks(env.cwd), *fixed_leaks(setup)]
    _populate(setup, catalog, cell, env, env.setup_layers)


def build_config_dir(
    setup: Setup,
    catalog: Catalog,
    cell: ResolvedCell,
    config: Path,
    *,
    memory_slug: str,
    isolate_state: bool = False,
    at_real_path: bool = False,
    home: Path | None = None,
) -> shadow_home.ConfigReport:
    """Create ``config`` (0700) as ``cell``'s config dir: the user's, its layers stripped or replaced, the
    auto-memory under ``projects/<memory_slug>``, the account state (also into ``home``, ``links``' shadow
    home). ``at_real_path``: seen at the real config dir's path (``namespace``: copies only, no rewrite)."""
    config.mkdir(mode=0o700)
    os.chmod(config, 0o700)
    report = shadow_home.populate_config(
        setup, config, isolate_state=isolate_state, at_real_path=at_real_path
    )
    shadow_home.copy_memory(setup, config, memory_slug)
    if shadow_home.copy_account_state(setup, home, config) is None:
        report.notes.append("no account state (.claude.json) found: the CLI starts with a fresh one")

    config_layers = [layer for layer in catalog if layer.side == "config"]
    for layer in config_layers:
        if layer.id in cell.stripped:
            strip_layer(config, layer, memory_slug)
    if cell.empty_config:
        _keep_only(config, [layer for layer in config_layers if layer.id not in cell.stripped], memory_slug)
    shadow_home.ensure_written_dirs(config)
    for lid, variant in cell.replace.items():
        layer = catalog.get(lid)
        if layer.side == "config":
            shadowfs.put(config, layer.patterns(memory_slug)[0], variant)
    # an auto-memory piece lives where the cell keeps auto-memory: under its own slug
    moved = (f"projects/{setup.memory_slug}/", f"projects/{memory_slug}/")
    cut = [
        replace(p, file=p.file.replace(*moved, 1)) if p.kind == "memory" else p
        for p in piece_ops.cell_pieces(setup, catalog, cell)
        if p.side == "config"
    ]
    if cut:
        account = {shadow_home.ACCOUNT: home / shadow_home.ACCOUNT} if home is not None else None
        changed = piece_ops.cut_side(config, cut, also=account)
        report.notes.append(f"cut {len(cut)} piece(s) from {', '.join(sorted(set(changed)))}")
    if at_real_path:
        materialise_diverted_imports(config)
    return report


def materialise_diverted_imports(config: Path) -> list[str]:
    """A kept top-level instruction file linking out of the config dir (a dotfiles checkout) has its relative
    ``@imports`` resolved next to its target, as the CLI does; where one would read another file than the
    cell holds (its layer stripped or replaced), the link becomes a copy. Returns the files materialised."""
    done = []
    for entry in sorted(config.glob("*.md")):
        if not entry.is_symlink() or not entry.is_file():
            continue
        text = entry.read_text(encoding="utf-8", errors="replace")
        there = Path(os.path.realpath(entry)).parent
        relative = [imp for imp in parse_imports(text) if not imp.startswith(("/", "~"))]
        if any(os.path.realpath(config / imp) != os.path.realpath(there / imp) for imp in relative):
            data = entry.read_bytes()
            entry.unlink()
            entry.write_bytes(data)
            done.append(entry.name)
    return done


def strip_layer(base: Path, layer: Layer, memory_slug: str) -> None:
    """Strip ``layer`` in a cell's tree: delete (absent), empty every file (stub), drop its JSON keys."""
    if layer.strip != "drop-key":
        for entry in resolve_layer(layer, base, memory_slug=memory_slug).entries:
            if layer.strip == "stub":
                shadowfs.stub(base, entry)
            else:
                shadowfs.remove(base, entry)
    for ref in layer.keys:
        shadowfs.drop_keys(base, ref.file, [ref.key])


def _keep_only(config: Path, kept: list[Layer], memory_slug: str) -> None:
    """C11 and leave-one-in: remove everything but auth, the CLI-written folders and the kept layers."""
    keep = {shadow_home.CREDENTIALS, shadow_home.ACCOUNT, *shadow_home.WRITTEN_DIRS}
    key_files: dict[str, list[str]] = {}
    for layer in kept:
        keep.update(resolve_layer(layer, config, memory_slug=memory_slug).entries)
        for ref in layer.keys:
            key_files.setdefault(ref.file, []).append(ref.key)
    for rel, keys in key_files.items():
        if rel in keep or rel == shadow_home.ACCOUNT:
            continue
        shadowfs.keep_keys(config, rel, keys)
        if (config / rel).exists():
            keep.add(rel)
    _prune(config, "", keep)


def _prune(base: Path, rel_dir: str, keep: set[str]) -> None:
    folder = base / rel_dir if rel_dir else base
    for name in sorted(os.listdir(folder)):
        rel = f"{rel_dir}/{name}" if rel_dir else name
        if rel in keep or any(rel.startswith(k + "/") for k in keep):
            continue
        if any(k.startswith(rel + "/") for k in keep):
            path = shadowfs.detach(base, rel)
            if path.is_symlink() and path.is_dir():
                shadowfs.split_link(path)
            if path.is_dir():
                _prune(base, rel, keep)
                continue
        shadowfs.remove(base, rel)


def build_cell_config(
    setup: Setup,
    catalog: Catalog,
    cell: ResolvedCell,
    config: Path,
    wanted: Mapping[str, CopyPrint],
    *,
    isolate_state: bool = False,
    at_real_path: bool,
    home: Path | None = None,
) -> tuple[CellConfig, shadow_home.ConfigReport, dict[str, CopyPrint]]:
    """:func:`build_config_dir` at ``config`` compared with ``wanted`` (:func:`kept_mismatches`)."""
    report = build_config_dir(
        setup, catalog, cell, config, memory_slug=setup.memory_slug, isolate_state=isolate_state,
        at_real_path=at_real_path, home=home,
    )  # fmt: skip
    prints = config_prints(setup, catalog, config, memory_slug=setup.memory_slug, at_real_path=at_real_path)
    return CellConfig(config, kept_mismatches(wanted, cell, prints)), report, prints


# ---------------------------------------------------------------------------------------------------------
# Reset, teardown, clean


def reset_environment(env: CellEnvironment) -> None:
    """Restore the freshly built state cheaply: the home synced to its pristine copy, the worktree reset."""
    pristine = env.pristine
    if not (pristine / "home").is_dir() or not (pristine / "ops.json").is_file():
        raise UsageError(f"{env.root}: not a complete ablate environment", hint="rebuild it")
    shadowfs.sync_tree(pristine / "home", env.home)
    ops = json.loads((pristine / "ops.json").read_text(encoding="utf-8"))
    worktree.reset_worktree(env.cwd, env.head, pristine, ops)
    fresh_tmp(env.root)


def fresh_tmp(root: Path) -> None:
    """The cell's private ``TMPDIR`` (``<root>/tmp``), emptied."""
    tmp = root / "tmp"
    shadowfs.remove_path(tmp)
    tmp.mkdir(mode=0o700)


def teardown_environment(env: CellEnvironment) -> None:
    """Delete the cell root (the checkout is a private clone: nothing to unregister in the user's repo)."""
    shadowfs.remove_path(env.root)


def find_roots(out: Path) -> list[Path]:
    """Every cell root ablate built under ``out`` (marked folders; links never followed)."""
    roots: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(out, followlinks=False):
        if MARKER in filenames:
            roots.append(Path(dirpath))
            dirnames[:] = []
        else:
            dirnames.sort()
    return sorted(roots)


def clean(out: Path) -> list[str]:
    """Remove every cell ablate built under ``out`` (crash recovery). Idempotent; returns what was removed."""
    roots = find_roots(Path(os.path.abspath(out)))
    for root in roots:
        shadowfs.remove_path(root)
    return [str(root) for root in roots]

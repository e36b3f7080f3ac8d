"""The repo side of a cell (DESIGN §3.4): a private detached checkout of HEAD with the live layer files overlaid.

The checkout is a ``git clone --shared`` (objects read through git's alternates, never written), not a linked
``git worktree``: in a linked worktree Claude Code 2.1.332 adds a "This is a git worktree" notice to every
prompt that the user's own sessions never see (the probe's fidelity check found it), and a model's commits,
branches and stashes would land in the user's repository. A clone registers nothing in the user's repo and
keeps whatever the model does to git inside the cell.

The worktree is built as *checkout + a replayable list of operations*. Every source an operation needs (layer
files from the live working tree, ``--dirty`` changes, replacement variants) is snapshotted once into the
cell's ``.pristine/overlay`` folder, so a reset (checkout, ``git clean -ffdx``, replay) gives the very same
tree as the first build, even when the user's live files change in the meantime.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.core.errors import AblateError, UsageError
from ablate.core.gitutil import live_changes
from ablate.core.gitutil import run_git as git
from ablate.isolate import shadowfs
from ablate.setup.cells import ResolvedCell
from ablate.setup.layers import Catalog, Layer, resolve_layer
from ablate.setup.load import Setup


def _matches(path: str, layer: Layer, memory_slug: str) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    for pattern in layer.patterns(memory_slug):
        folder = pattern.endswith("/")
        pat = pattern.rstrip("/")
        for i, prefix in enumerate(prefixes):
            if folder and i == len(prefixes) - 1:
                continue  # a folder pattern owns what is below the folder
            if fnmatch.fnmatchcase(prefix, pat):
                return True
    return any(path == ref.file for ref in layer.keys)


@dataclass
class RepoPlan:
    """What the worktree of one cell will be: checked before anything is written."""

    repo_layers: list[Layer]
    live_entries: dict[str, list[str]]
    """Layer id → entries found in the live working tree."""
    key_files: list[str]
    dirty_paths: list[str]
    """Non-layer uncommitted paths (overlaid only with ``dirty``)."""
    dirty: bool
    notes: list[str] = field(default_factory=list)


def plan_repo(setup: Setup, catalog: Catalog, *, dirty: bool) -> RepoPlan:
    """Resolve the repo layers in the live tree and check for non-layer changes (error unless ``dirty``)."""
    repo_layers = [layer for layer in catalog if layer.side == "repo"]
    live = {
        layer.id: resolve_layer(layer, setup.repo, memory_slug=setup.memory_slug).entries
        for layer in repo_layers
    }
    key_files = sorted({ref.file for layer in repo_layers for ref in layer.keys})
    owned_entries = [e for entries in live.values() for e in entries]

    def owned(path: str) -> bool:
        if any(path == e or path.startswith(e + "/") for e in owned_entries):
            return True
        return any(_matches(path, layer, setup.memory_slug) for layer in repo_layers)

    others = [p for p in live_changes(setup.repo) if not owned(p)]
    if others and not dirty:
        shown = ", ".join(others[:8]) + (f" (+{len(others) - 8} more)" if len(others) > 8 else "")
        raise UsageError(
            f"{setup.repo}: uncommitted changes outside the layers: {shown}",
            hint="commit or stash them, or pass --dirty to copy them into every cell (recorded in the manifest)",
        )
    plan = RepoPlan(repo_layers, live, key_files, others if dirty else [], dirty)
    if dirty and others:
        plan.notes.append(
            f"--dirty: {len(others)} uncommitted non-layer path(s) overlaid: {', '.join(others[:8])}"
        )
    return plan


def current_branch(repo: Path) -> str | None:
    """The repository's current branch, or None on a detached HEAD."""
    out = git(repo, "symbolic-ref", "--short", "-q", "HEAD", check=False)
    name = out.stdout.strip()
    return name if out.returncode == 0 and name else None


def make_checkout(setup: Setup, wt: Path) -> dict[str, str]:
    """A private clone of the repository (objects shared read-only) at the setup's HEAD, on a branch named
    like the user's current one (hooks print it; a detached HEAD changes what the model sees), detached only
    when the user's is.

    The ``origin`` remote is removed so nothing the model runs can push into the user's repository. Returns
    the clone's refs, which a reset restores.
    """
    wt.parent.mkdir(parents=True, exist_ok=True)
    git(wt.parent, "clone", "--shared", "--no-checkout", "--quiet", str(setup.repo), str(wt))
    git(wt, "remote", "remove", "origin")
    _checkout_head(wt, setup.head, current_branch(setup.repo))
    return refs_of(wt)


def _checkout_head(wt: Path, head: str, branch: str | None) -> None:
    if branch:
        git(wt, "checkout", "--force", "--quiet", "-B", branch, head)
    else:
        git(wt, "checkout", "--force", "--quiet", "--detach", head)


def refs_of(wt: Path) -> dict[str, str]:
    """Every ref of the checkout (branches, tags, stash) and the commit it names."""
    out = git(wt, "for-each-ref", "--format=%(refname) %(objectname)").stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if line.strip())


def restore_refs(wt: Path, refs: dict[str, str]) -> None:
    """Delete refs the session created (branches, tags, the stash), reset the others, forget reflogs."""
    current = refs_of(wt)
    for name in current:
        if name not in refs:
            git(wt, "update-ref", "-d", name)
    for name, sha in refs.items():
        if current.get(name) != sha:
            git(wt, "update-ref", name, sha)
    git(wt, "reflog", "expire", "--expire=now", "--all")


def snapshot(src_base: Path, rel: str, pristine: Path, *, follow: bool = True) -> str:
    """Copy ``src_base/rel`` to ``pristine/overlay/rel``; returns the source key for a ``put``.

    Layer files are copied with links followed (their content is what the CLI would read; a link out of the
    repo must not become a write-through); ``--dirty`` changes are copied exactly, links kept as links.
    """
    key = f"overlay/{rel}"
    dst = pristine / key
    if not (dst.exists() or dst.is_symlink()):
        dst.parent.mkdir(parents=True, exist_ok=True)
        if follow:
            shadowfs.copy_entry(src_base / rel, dst)
        else:
            shadowfs.put(pristine, key, src_base / rel)
    return key


def worktree_ops(
    setup: Setup, plan: RepoPlan, cell: ResolvedCell, wt: Path, pristine: Path
) -> list[dict[str, Any]]:
    """The operations that turn a fresh checkout into the cell's worktree (sources snapshotted now)."""
    ops: list[dict[str, Any]] = []
    for layer in plan.repo_layers:
        checked_out = resolve_layer(layer, wt, memory_slug=setup.memory_slug).entries
        live = plan.live_entries[layer.id]
        ops.extend({"op": "remove", "rel": e} for e in checked_out if e not in live)
        ops.extend({"op": "put", "rel": e, "src": snapshot(setup.repo, e, pristine)} for e in live)
    for rel in plan.key_files:
        if (setup.repo / rel).is_file():
            ops.append({"op": "put", "rel": rel, "src": snapshot(setup.repo, rel, pristine)})
        elif (wt / rel).exists():
            ops.append({"op": "remove", "rel": rel})
    for rel in plan.dirty_paths:
        if os.path.lexists(setup.repo / rel):
            ops.append({"op": "put", "rel": rel, "src": snapshot(setup.repo, rel, pristine, follow=False)})
        else:
            ops.append({"op": "remove", "rel": rel})
    by_id = {layer.id: layer for layer in plan.repo_layers}
    for lid in cell.stripped:
        if lid not in by_id:
            continue
        layer = by_id[lid]
        if layer.strip != "drop-key":
            op = "stub" if layer.strip == "stub" else "remove"
            ops.extend({"op": op, "rel": e} for e in plan.live_entries[lid])
        for ref in layer.keys:
            ops.append({"op": "dropkey", "rel": ref.file, "keys": [ref.key]})
    for lid, variant in cell.replace.items():
        if lid in by_id:
            key = f"replace/{lid}"
            (pristine / "replace").mkdir(parents=True, exist_ok=True)
            shadowfs.put(pristine, key, variant)
            rel = by_id[lid].patterns(setup.memory_slug)[0]
            ops.append({"op": "put", "rel": rel, "src": key})
    return ops


def apply_ops(wt: Path, pristine: Path, ops: list[dict[str, Any]]) -> None:
    """Replay ``ops`` on the worktree (every change stays inside it)."""
    for op in ops:
        kind, rel = op["op"], op["rel"]
        if kind == "put":
            shadowfs.put(wt, rel, pristine / op["src"])
        elif kind == "remove":
            shadowfs.remove(wt, rel)
        elif kind == "stub":
            shadowfs.stub(wt, rel)
        elif kind == "dropkey":
            shadowfs.drop_keys(wt, rel, op["keys"])
        else:
            raise AblateError(f"unknown worktree operation {kind!r}")


def hide_layer_paths(wt: Path, setup: Setup, plan: RepoPlan) -> list[str]:
    """Hide every repo-layer path from ``git status`` in the checkout ``wt``: tracked ones are marked
    skip-worktree, the others go to ``.git/info/exclude``. Claude Code puts ``git status`` into the system
    prompt, so a stripped tracked file would otherwise show up as ``D docs/runbooks/...``, naming what was
    removed, and an untracked layer file as ``??`` in the cells that keep it: every cell, the control
    included, reads alike. Returns the hidden entries."""
    entries: set[str] = set(plan.key_files)
    for layer in plan.repo_layers:
        entries.update(resolve_layer(layer, wt, memory_slug=setup.memory_slug).entries)
        entries.update(plan.live_entries[layer.id])
    hidden = sorted(entries)
    if hidden:
        mark_skip_worktree(wt, hidden)
        exclude = wt / ".git" / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a", encoding="utf-8") as fh:
            fh.write("".join(f"/{e}\n" for e in hidden))
    return hidden


def mark_skip_worktree(wt: Path, entries: list[str]) -> None:
    """Set the skip-worktree bit on every tracked file under ``entries``."""
    if not entries:
        return
    tracked = [p for p in git(wt, "ls-files", "-z", "--", *entries).stdout.split("\0") if p]
    for i in range(0, len(tracked), 1000):  # through ablate's git runner: no inherited GIT_DIR, no hooks
        git(wt, "update-index", "--skip-worktree", "--", *tracked[i : i + 1000])


#: What a session may change in its clone's ``.git`` that a checkout and ``git clean`` do not restore.
GIT_STATE = ("config", "hooks", "info")


def save_git_state(wt: Path, pristine: Path) -> None:
    """Keep the fresh clone's branch, ``.git/config``, ``hooks/`` and ``info/`` for a reset."""
    (pristine / "branch.txt").write_text((current_branch(wt) or "") + "\n", encoding="utf-8")
    for name in GIT_STATE:
        src = wt / ".git" / name
        if os.path.lexists(src):
            shadowfs.put(pristine, f"git/{name}", src)


def restore_git_state(wt: Path, pristine: Path) -> None:
    """Put back ``.git/config``, ``hooks/`` and ``info/`` as built (a session's ``git config`` and
    ``.git/hooks/pre-commit`` must not reach the next item)."""
    saved = pristine / "git"
    if not saved.is_dir():
        return
    for name in GIT_STATE:
        if os.path.lexists(saved / name):
            shadowfs.put(wt / ".git", name, saved / name)
        else:
            shadowfs.remove(wt / ".git", name)


def reset_worktree(
    wt: Path, head: str, pristine: Path, ops: list[dict[str, Any]], refs: dict[str, str] | None = None
) -> None:
    """Back to the freshly built state: detached checkout of ``head``, hard reset, clean, refs restored,
    replay. (Commits a session made stay in the clone's own object store, unreachable; nothing names them.)"""
    # the session's git config and hooks go first: git must not run a planted hook or honour its config
    restore_git_state(wt, pristine)
    # a forced checkout of HEAD also resets the index and the tracked files (no `reset --hard` needed: each
    # pass stats every file, which on a 20,000-file checkout is most of a reset); the branch is the one the
    # clone was built on (its ref is reset to HEAD with -B)
    saved = pristine / "branch.txt"
    branch = saved.read_text(encoding="utf-8").strip() if saved.is_file() else None
    _checkout_head(wt, head, branch or None)
    hidden = pristine / "hidden.json"
    if hidden.is_file():
        mark_skip_worktree(wt, json.loads(hidden.read_text(encoding="utf-8")))
    git(wt, "clean", "-ffdxq")
    if refs is not None:
        restore_refs(wt, refs)
    apply_ops(wt, pristine, ops)

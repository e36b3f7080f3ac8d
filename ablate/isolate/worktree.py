"""The repo side of a cell (docs/ARCHITECTURE.md#repo-side): a private checkout of HEAD with the live layer
files overlaid.

Its ``.git`` is the user's own, objects excepted (read from the user's store), so git prints in a cell what
it prints in the user's repository. Not a linked ``git worktree``: Claude Code 2.1.332 then adds a "This is
a git worktree" notice to every prompt, and commits would land in the user's repository. The worktree is
*checkout + a replayable list of operations* whose sources are snapshotted once into ``.pristine/overlay``,
so a reset gives the very tree of the first build even if the live files change.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.core.errors import AblateError, UsageError
from ablate.core.gitutil import live_changes, run_git as git
from ablate.isolate import piece_ops, shadowfs
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


#: What the pristine checkout's ``.git`` copies from the user's common git dir: the config (identity,
#: remotes, branch tracking, every other setting), every ref (loose and packed: branches, tags,
#: remote-tracking refs, the stash; ``reftable/`` where the repo uses it), ``info/`` (exclude, sparse-checkout,
#: attributes) and the hooks.
#: ``shallow`` keeps a shallow clone's history readable. Objects are never copied: they are read from the
#: user's store (through alternates, or an overlay mounted at ``.git/objects``), which git never writes to.
USER_GIT_ENTRIES = ("config", "packed-refs", "refs", "reftable", "info", "hooks", "shallow", "description")
#: The stash is a ref plus its reflog: ``git stash list`` prints the reflog.
STASH_LOG = "logs/refs/stash"
#: ``git -c`` overrides for ablate's own git calls in a checkout carrying the user's config: no fsmonitor
#: daemon or hook started on the user's behalf.
_SAFE = ("-c", "core.fsmonitor=false")


def git_dirs(repo: Path) -> tuple[Path, Path]:
    """The repository's git dir (``HEAD``, the index) and its common dir (config, refs, objects)."""
    out = git(
        repo, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"
    ).stdout.splitlines()
    return Path(out[0]), Path(out[1])


def user_git_state(repo: Path) -> list[tuple[str, Path]]:
    """``(name, path)`` of every entry of the user's ``.git`` the pristine checkout copies."""
    _, common = git_dirs(repo)
    entries = [(name, common / name) for name in USER_GIT_ENTRIES if os.path.lexists(common / name)]
    if (common / STASH_LOG).is_file():
        entries.append((STASH_LOG, common / STASH_LOG))
    return entries


def make_git_dir(setup: Setup, wt: Path, *, alternates: Path | None) -> None:
    """``wt/.git``: the user's config, refs, ``info/``, hooks and stash, ``HEAD`` on the user's branch (or
    detached at the setup's HEAD), objects read from ``alternates`` (None: an overlay supplies them)."""
    gd = wt / ".git"
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (gd / sub).mkdir(parents=True, exist_ok=True)
    for name, src in user_git_state(setup.repo):
        shadowfs.put(gd, name, src)
    branch = current_branch(setup.repo)
    head = f"ref: refs/heads/{branch}\n" if branch else f"{setup.head}\n"
    (gd / "HEAD").write_text(head, encoding="utf-8")
    if alternates is not None:
        (gd / "objects" / "info" / "alternates").write_text(f"{alternates}\n", encoding="utf-8")


def objects_dir(repo: Path) -> Path:
    """The user's object store (the common dir's, for a linked worktree)."""
    return git_dirs(repo)[1] / "objects"


def make_checkout(setup: Setup, wt: Path, *, alternates: bool = True) -> dict[str, str]:
    """A private checkout of HEAD (:func:`make_git_dir`) and its refs; ``alternates=False``: no objects."""
    wt.mkdir(parents=True, exist_ok=True)
    make_git_dir(setup, wt, alternates=objects_dir(setup.repo) if alternates else None)
    if not alternates:  # checking out needs the objects: read them through a temporary alternates file
        tmp = wt / ".git" / "objects" / "info" / "alternates"
        tmp.write_text(f"{objects_dir(setup.repo)}\n", encoding="utf-8")
    try:
        _checkout_head(wt, setup.head, current_branch(setup.repo))
    finally:
        if not alternates:
            (wt / ".git" / "objects" / "info" / "alternates").unlink(missing_ok=True)
    return refs_of(wt)


def _checkout_head(wt: Path, head: str, branch: str | None) -> None:
    if branch:
        git(wt, *_SAFE, "checkout", "--force", "--quiet", "-B", branch, head)
    else:
        git(wt, *_SAFE, "checkout", "--force", "--quiet", "--detach", head)


def refs_of(wt: Path) -> dict[str, str]:
    """Every ref of the checkout (branches, tags, remote-tracking refs, the stash) and what it names."""
    out = git(wt, "for-each-ref", "--format=%(refname) %(objectname)").stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if line.strip())


def restore_refs(wt: Path, refs: dict[str, str]) -> None:
    """Delete the refs a session created, reset the others, forget the reflogs it wrote."""
    current = refs_of(wt)
    for name in current:
        if name not in refs:
            git(wt, "update-ref", "-d", name)
    for name, sha in refs.items():
        if current.get(name) != sha:
            git(wt, "update-ref", name, sha)
    git(wt, "reflog", "expire", "--expire=now", "--all")


def snapshot(src_base: Path, rel: str, pristine: Path, *, follow: bool = True) -> str:
    """Copy ``src_base/rel`` to ``pristine/overlay/rel`` (links followed: none may become a write-through;
    ``--dirty`` changes exactly); the source key for a ``put``."""
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
    hidden: set[str] = set()
    for lid in [*cell.stripped, *cell.replace]:
        if lid in by_id:
            layer = by_id[lid]
            hidden.update(resolve_layer(layer, wt, memory_slug=setup.memory_slug).entries)
            hidden.update(plan.live_entries[lid])
            hidden.update(ref.file for ref in layer.keys)
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
            hidden.add(rel)
    cuts = piece_ops.repo_piece_ops(setup, plan.repo_layers, cell)
    ops.extend(cuts)
    hidden.update(op["rel"] for op in cuts)  # a cut tracked file would show as modified in `git status`
    if hidden:
        ops.append({"op": "hide", "rel": ".", "paths": sorted(hidden)})
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
        elif kind == "hide":
            mark_skip_worktree(wt, op["paths"])
        elif kind in piece_ops.PIECE_OPS:
            piece_ops.apply_piece_op(wt, op)
        else:
            raise AblateError(f"unknown worktree operation {kind!r}")


def mark_skip_worktree(wt: Path, entries: list[str]) -> None:
    """Hide the cell's changes to layer files from ``git status`` (the skip-worktree bit on every tracked file
    under ``entries``): Claude Code puts ``git status`` into the prompt, where a stripped tracked file would
    show as `` D docs/runbooks/...``. Only cells that strip or replace a layer do this, for its files."""
    if not entries:
        return
    listed = git(wt, "--literal-pathspecs", "ls-files", "-z", "--", *entries).stdout
    tracked = [p for p in listed.split("\0") if p]
    for i in range(0, len(tracked), 1000):  # through ablate's git runner: no inherited GIT_DIR, no hooks
        git(wt, *_SAFE, "update-index", "--skip-worktree", "--", *tracked[i : i + 1000])


def clear_skip_worktree(wt: Path) -> None:
    """Clear every skip-worktree bit the last cell set (a checkout leaves a skipped file alone). A user's
    sparse checkout sets them again at the next checkout, from ``info/sparse-checkout``."""
    listed = git(wt, "ls-files", "-v", "-z").stdout
    skipped = [e[2:] for e in listed.split("\0") if e[:2] == "S "]
    for i in range(0, len(skipped), 1000):
        git(wt, *_SAFE, "update-index", "--no-skip-worktree", "--", *skipped[i : i + 1000])


#: What a session may change in its checkout's ``.git`` that a checkout and ``git clean`` do not restore.
GIT_STATE = ("config", "hooks", "info", STASH_LOG)


def save_git_state(wt: Path, pristine: Path) -> None:
    """Keep the fresh checkout's branch and :data:`GIT_STATE` for a reset."""
    (pristine / "branch.txt").write_text((current_branch(wt) or "") + "\n", encoding="utf-8")
    for name in GIT_STATE:
        src = wt / ".git" / name
        if os.path.lexists(src):
            shadowfs.put(pristine, f"git/{name}", src)


def restore_git_state(wt: Path, pristine: Path) -> None:
    """Put back ``.git/config``, ``hooks/``, ``info/`` and the stash reflog as built (a session's ``git
    config`` and ``.git/hooks/pre-commit`` must not reach the next item)."""
    saved = pristine / "git"
    if not saved.is_dir():
        return
    for name in GIT_STATE:
        if os.path.lexists(saved / name):
            shadowfs.put(wt / ".git", name, saved / name)
        else:
            shadowfs.remove(wt / ".git", name)


def reset_worktree(wt: Path, head: str, pristine: Path, ops: list[dict[str, Any]]) -> None:
    """Back to the freshly built state: checkout of ``head``, clean, refs restored (``refs.json``), replay.
    (Commits a session made stay in the checkout's own object store, unreachable; nothing names them.)"""
    # the session's git config and hooks go first: git must not run a planted hook or honour its config
    restore_git_state(wt, pristine)
    clear_skip_worktree(wt)
    # a forced checkout of HEAD also resets the index and the tracked files (no `reset --hard` needed: each
    # pass stats every file, which on a 20,000-file checkout is most of a reset); the branch is the one the
    # checkout was built on (its ref is reset to HEAD with -B)
    saved = pristine / "branch.txt"
    branch = saved.read_text(encoding="utf-8").strip() if saved.is_file() else None
    _checkout_head(wt, head, branch or None)
    git(wt, *_SAFE, "clean", "-ffdxq")
    if (refs := pristine / "refs.json").is_file():
        restore_refs(wt, json.loads(refs.read_text(encoding="utf-8")))
        restore_git_state(wt, pristine)  # the stash reflog, expired with the session's reflogs
    apply_ops(wt, pristine, ops)

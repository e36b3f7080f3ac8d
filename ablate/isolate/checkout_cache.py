"""The run's pristine checkout, cached across runs by everything it is made of.

Checking out HEAD is most of a run's start on a large repository, so the ``namespace`` backend's read-only
lower checkout is kept in ablate's cache dir as ``pristine/<key>/repo`` while :func:`checkout_key` (every
input of the checkout; uncommitted state is overlaid per cell, not in it) is unchanged: a change builds a new
one, never a stale one. An entry is built aside and renamed into place (racing runs both end with one
complete entry), never written afterwards, and removed after :data:`MAX_IDLE_DAYS` unused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path

from ablate.core.cache import cache_dir, private_dir
from ablate.core.fsutil import atomic_write_json
from ablate.core.gitutil import run_git
from ablate.isolate import shadowfs, worktree
from ablate.setup.load import Setup

#: Bumped whenever what a cached checkout holds changes.
FORMAT = 1
MAX_IDLE_DAYS = 7
_COMPLETE = "complete.json"


def _hash_entry(h: hashlib._Hash, name: str, path: Path) -> None:
    """Names, link targets and bytes under ``path`` (links never followed)."""
    if path.is_symlink():
        h.update(f"L {name} {os.readlink(path)}\0".encode())
    elif path.is_dir():
        h.update(f"D {name}\0".encode())
        for child in sorted(path.iterdir(), key=lambda p: p.name):
            _hash_entry(h, f"{name}/{child.name}", child)
    elif path.is_file():
        h.update(f"F {name} {os.stat(path).st_mode & 0o111}\0".encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())


def checkout_key(setup: Setup) -> str:
    """The hash of every input of the pristine checkout (see the module docstring)."""
    repo = setup.repo
    h = hashlib.sha256()
    refs = run_git(repo, "for-each-ref", "--format=%(refname) %(objectname) %(symref)").stdout
    config = run_git(repo, "config", "--list", "--show-origin", check=False).stdout
    parts = [f"format {FORMAT}", run_git(repo, "--version").stdout.strip(), str(repo.resolve())]
    parts += [str(worktree.objects_dir(repo)), setup.head, worktree.current_branch(repo) or "(detached)"]
    for part in [*parts, refs, config]:
        h.update(part.encode() + b"\0")
    for name, path in worktree.user_git_state(repo):
        _hash_entry(h, name, path)
    return h.hexdigest()[:32]


def cached_checkout(setup: Setup, root: Path | None = None) -> tuple[Path, bool]:
    """The pristine checkout of ``setup`` without alternates (cached), and whether it was reused."""
    top = root or cache_dir()
    private_dir(top)
    base = top / "pristine"
    key = checkout_key(setup)
    entry = base / key
    if _complete(entry, key):
        os.utime(entry / _COMPLETE)  # last use, for pruning
        return entry / "repo", True
    base.mkdir(parents=True, exist_ok=True)
    tmp = base / f".tmp-{uuid.uuid4().hex}"
    try:
        worktree.make_checkout(setup, tmp / "repo", alternates=False)
        atomic_write_json(
            tmp / _COMPLETE, {"key": key, "repo": str(setup.repo), "head": setup.head, "created": time.time()}
        )
        try:
            os.rename(tmp, entry)
        except OSError:  # another run put the same entry in place first
            if not _complete(entry, key):
                raise
    finally:
        shadowfs.remove_path(tmp)
    _prune(base, keep=entry)
    return entry / "repo", False


def _complete(entry: Path, key: str) -> bool:
    try:
        data = json.loads((entry / _COMPLETE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("key") == key and (entry / "repo" / ".git").is_dir()


def _prune(base: Path, *, keep: Path) -> None:
    """Remove entries unused for :data:`MAX_IDLE_DAYS` and leftovers of interrupted builds a day old."""
    now = time.time()
    for entry in base.iterdir():
        if entry == keep:
            continue
        stamp = entry / _COMPLETE
        try:
            used = stamp.stat().st_mtime if stamp.is_file() else entry.stat().st_mtime
        except OSError:
            continue
        limit = 86400 if entry.name.startswith(".tmp-") else MAX_IDLE_DAYS * 86400
        if now - used > limit:
            shutil.rmtree(entry, ignore_errors=True)

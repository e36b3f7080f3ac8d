"""Before/after listing of the user's files around a ``links`` run (DESIGN §3).

``links`` cannot stop a session from writing through a link (a big linked tree, a home entry, the clone's
``objects/info/alternates`` path), so every ``links`` run lists the real config dir, the repository (``.git``
included) and the home's entries before and after, and any change is an error of the run's summary, naming
the files. Left out of the config dir: what the CLI itself writes there in the user's own concurrent sessions
(transcripts, history, account state) and a refreshed ``.credentials.json`` (the one deliberate write-through).
Home entries larger than :data:`HOME_ENTRY_LIMIT` are not listed (said as ``unwatched``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ablate.core.errors import UsageError
from ablate.core.fsutil import tree_listing
from ablate.isolate import shadowfs
from ablate.isolate.shadow_home import ACCOUNT, CREDENTIALS, WRITTEN_DIRS

#: Config-dir entries the user's own concurrent sessions write (never blamed on the run).
UNGUARDED_CONFIG = (*WRITTEN_DIRS, ACCOUNT, CREDENTIALS, "history.jsonl", ".claude.json.lock")
#: Home entries (dotfiles, toolchains) are watched up to this size each; larger ones are listed as unwatched.
HOME_ENTRY_LIMIT = 20 * 1024 * 1024


@dataclass(frozen=True)
class Snapshot:
    config_dir: Path
    repo: Path
    home: Path | None
    skip: tuple[Path, ...]
    listings: dict[str, dict[str, str]]
    """Root path → (relative path → kind and content hash)."""
    unwatched: tuple[str, ...] = ()
    """Home entries too large to list: their changes go unreported."""


def _entry(path: Path) -> dict[str, str]:
    """Listing of one home entry (a folder's files, or the entry itself), keyed relative to the home."""
    name = path.name
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        return {f"{name}/{k}": v for k, v in tree_listing(path).items()} | {name: "dir"}
    if stat.S_ISLNK(st.st_mode):
        return {name: "link:" + os.readlink(path)}
    with open(path, "rb") as fh:
        return {name: "file:" + hashlib.sha256(fh.read()).hexdigest()[:16]}


def _inside(path: Path, root: Path) -> str | None:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


def take(
    config_dir: Path,
    repo: Path,
    home: Path | None = None,
    *,
    skip: tuple[Path, ...] = (),
    watched: tuple[str, ...] | None = None,
) -> Snapshot:
    """List the real config dir, the whole repository (``.git`` included) and the home's entries up to
    :data:`HOME_ENTRY_LIMIT` each (``watched``: exactly these home entries, as listed before). ``skip``:
    ablate's own folders (the run folder, the work dir), wherever they are."""
    skip = tuple(Path(os.path.abspath(p)) for p in skip)

    def excluded(root: Path) -> tuple[str, ...]:
        return tuple(r for r in (_inside(p, root) for p in skip) if r)

    listings = {
        str(config_dir): tree_listing(config_dir, exclude=UNGUARDED_CONFIG + excluded(config_dir)),
        str(repo): tree_listing(repo, exclude=excluded(repo)),
    }
    unwatched: list[str] = []
    if home is not None and home.is_dir():
        home_files: dict[str, str] = {}
        for entry in sorted(home.iterdir(), key=lambda p: p.name):
            if entry.name == ACCOUNT or any(
                entry == p or entry in p.parents for p in (config_dir, repo, *skip)
            ):
                continue
            if watched is not None:
                if entry.name in watched:
                    home_files.update(_entry(entry))
                continue
            try:
                small = entry.is_symlink() or shadowfs.tree_size(entry, HOME_ENTRY_LIMIT) <= HOME_ENTRY_LIMIT
            except (OSError, UsageError):
                small = False
            if small:
                home_files.update(_entry(entry))
            else:
                unwatched.append(entry.name)
        listings[str(home)] = home_files
    return Snapshot(config_dir, repo, home, skip, listings, tuple(unwatched))


def changes(before: Snapshot) -> list[str]:
    """The real paths added, removed or changed since ``before``: "<path> (added|removed|changed)"."""
    home_key = str(before.home) if before.home is not None else ""
    watched = tuple({k.split("/")[0] for k in before.listings.get(home_key, {})}) if home_key else None
    # a home entry the run created is a change too: list the home's current names, not only the watched ones
    if before.home is not None and before.home.is_dir():
        current = {p.name for p in before.home.iterdir()} - set(before.unwatched)
        watched = tuple(set(watched or ()) | current)
    after = take(before.config_dir, before.repo, before.home, skip=before.skip, watched=watched)
    out: list[str] = []
    for root, old in before.listings.items():
        new = after.listings.get(root, {})
        for rel in sorted(set(old) | set(new)):
            if old.get(rel) != new.get(rel):
                what = "added" if rel not in old else "removed" if rel not in new else "changed"
                out.append(f"{Path(root) / rel} ({what})")
    return out

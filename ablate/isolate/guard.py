"""Before/after listing of the user's files around a ``links`` run (docs/ARCHITECTURE.md#environments).

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
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ablate.core.fsutil import tree_listing
from ablate.core.gitutil import run_git
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


def _entry(path: Path, limit: int | None = None) -> dict[str, str] | None:
    """Listing of one home entry (a folder's files, or the entry itself), keyed relative to the home, in one
    walk of it; None when its files add up to more than ``limit`` bytes (then nothing is read)."""
    name = path.name
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return {name: "link:" + os.readlink(path)}
    if not stat.S_ISDIR(st.st_mode):
        if limit is not None and st.st_size > limit:
            return None
        return {name: _describe(str(path), st)}
    found: list[tuple[str, str, os.stat_result]] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for child in (*dirnames, *filenames):
            full = os.path.join(dirpath, child)
            try:
                cst = os.lstat(full)
            except FileNotFoundError:
                continue  # removed while the tree was walked: it is not there
            found.append((os.path.relpath(full, path.parent), full, cst))
            if stat.S_ISREG(cst.st_mode):
                total += cst.st_size
                if limit is not None and total > limit:
                    return None
    out = {name: "dir"}
    for rel, full, cst in found:
        try:
            out[rel] = _describe(full, cst)
        except FileNotFoundError:
            continue
    return out


def _describe(full: str, st: os.stat_result) -> str:
    """Kind, mode and content hash (or link target) of one path."""
    mode = f"{stat.S_IMODE(st.st_mode):o}"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(full)
    if stat.S_ISDIR(st.st_mode):
        return f"dir{mode}"
    if stat.S_ISREG(st.st_mode):
        h = hashlib.sha256()
        with open(full, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
        return f"file{mode}:{h.hexdigest()[:16]}"
    return "other"


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
                    home_files.update(_entry(entry) or {})
                continue
            try:
                listed = _entry(entry, HOME_ENTRY_LIMIT)
            except OSError:
                listed = None
            if listed is None:
                unwatched.append(entry.name)
            else:
                home_files.update(listed)
        listings[str(home)] = home_files
    return Snapshot(config_dir, repo, home, skip, listings, tuple(unwatched))


def changes(before: Snapshot) -> list[str]:
    """The real paths added, removed or changed since ``before``: "<path> (added|removed|changed)"."""
    return changes_and_notes(before)[0]


def changes_and_notes(before: Snapshot) -> tuple[list[str], list[str]]:
    """:func:`changes`, and notes on what changed without changing the user's files (git's maintenance)."""
    home_key = str(before.home) if before.home is not None else ""
    watched = tuple({k.split("/")[0] for k in before.listings.get(home_key, {})}) if home_key else None
    # a home entry the run created is a change too: list the home's current names, not only the watched ones
    if before.home is not None and before.home.is_dir():
        current = {p.name for p in before.home.iterdir()} - set(before.unwatched)
        watched = tuple(set(watched or ()) | current)
    after = take(before.config_dir, before.repo, before.home, skip=before.skip, watched=watched)
    out: list[str] = []
    notes: list[str] = []
    for root, old in before.listings.items():
        new = after.listings.get(root, {})
        diff = {
            rel: "added" if rel not in old else "removed" if rel not in new else "changed"
            for rel in sorted(set(old) | set(new))
            if old.get(rel) != new.get(rel)
        }
        if root == str(before.repo):
            diff, note = _git_maintenance(before.repo, diff, old)
            notes.extend(note)
        out.extend(f"{Path(root) / rel} ({what})" for rel, what in diff.items())
    return out, notes


_LOOSE = re.compile(r"^\.git/objects/([0-9a-f]{2})/([0-9a-f]{38,62})$")
_FANOUT = re.compile(r"^\.git/objects/[0-9a-f]{2}$")
_LOOSE_REF = re.compile(r"^\.git/(refs/.+)$")
#: What gc writes besides packs: pack indexes, the commit graph, packed refs, the dumb-transport info, and its
#: own lock and log files.
_GC_OUTPUTS = re.compile(
    r"^\.git/(objects/(pack/[^/]+|info/(packs|commit-graph|commit-graphs/.*))|packed-refs|info/refs"
    r"|gc\.pid|gc\.log|gc\.log\.lock)$"
)


def _content_tag(text: str) -> str:
    """The hash part of a file's :func:`tree_listing` entry with this content."""
    return hashlib.sha256(hashlib.sha256(text.encode()).digest()).hexdigest()[:16]


def _git_maintenance(
    repo: Path, diff: dict[str, str], old: dict[str, str]
) -> tuple[dict[str, str], list[str]]:
    """Separate git's own maintenance (``git gc`` packing loose objects and refs, run by git in the
    background or by the user) from real changes. A removed loose object the repository still holds, a
    removed loose ref that still resolves to the value it held, and the files gc writes are not a change of
    the user's files; anything else stays a change."""
    removed = {
        rel: m.group(1) + m.group(2)
        for rel, what in diff.items()
        if what == "removed"
        if (m := _LOOSE.match(rel))
    }
    packed: set[str] = set()
    if removed:
        proc = run_git(
            repo,
            "cat-file",
            "--batch-check=%(objectname)",
            check=False,
            input="\n".join(removed.values()) + "\n",
        )
        still = {line.strip() for line in proc.stdout.splitlines() if not line.endswith("missing")}
        packed = {rel for rel, oid in removed.items() if oid in still}
    moved_refs: set[str] = set()
    for rel, what in diff.items():
        m = _LOOSE_REF.match(rel)
        if what != "removed" or m is None or not old.get(rel, "").startswith("file"):
            continue
        value = run_git(repo, "rev-parse", "--verify", "-q", m.group(1), check=False).stdout.strip()
        if value and old[rel].split(":", 1)[1] == _content_tag(value + "\n"):
            moved_refs.add(rel)
    if not packed and not moved_refs:
        return diff, []
    rest = {
        rel: what
        for rel, what in diff.items()
        if rel not in packed
        and rel not in moved_refs
        and not _GC_OUTPUTS.match(rel)
        and not (what == "removed" and _FANOUT.match(rel))
    }
    note = (
        f"{repo}/.git: {len(packed)} loose objects and {len(moved_refs)} refs packed by git's own maintenance "
        f"(each still in the repository, with the same value; {len(diff) - len(rest) - len(packed) - len(moved_refs)} "
        "files gc writes) — not counted as a change"
    )
    return rest, [note]

"""Before/after listing of the user's files around a run (docs/ARCHITECTURE.md#invariant).

No backend can stop a host service a session reached (nor ``links`` a write through a link), so every run
lists the real config dir, the repository and the home before and after; a change is an error naming the
files. Every path is listed by its metadata: any write, rename or ``chmod`` changes the ctime, which no
process can set back, so one ``lstat`` proves a file unchanged (a home of 250,000 files in about a second,
where reading every small file took eight).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ablate.core.cache import cache_dir
from ablate.core.fsutil import tree_listing
from ablate.core.gitutil import run_git
from ablate.isolate.shadow_home import ACCOUNT, CREDENTIALS, WRITTEN_DIRS

#: Config-dir entries Claude Code writes, in the user's own concurrent sessions too: a change is a note.
CLI_WRITTEN = (*WRITTEN_DIRS, ACCOUNT, CREDENTIALS, "history.jsonl", ".claude.json.lock")


@dataclass(frozen=True)
class Snapshot:
    config_dir: Path
    repo: Path
    home: Path | None
    skip: tuple[Path, ...]
    listings: dict[str, dict[str, str]]
    """Root path → (relative path → kind and content digest or metadata)."""
    unlisted: tuple[str, ...] = field(default=())
    """What could not be listed (unreadable, vanished), as "<path>: why"."""


def _describe(full: str, st: os.stat_result) -> str:
    """Kind, mode and metadata of one path (a link: its target): what any change of it changes."""
    mode = f"{stat.S_IMODE(st.st_mode):o}"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(full)
    if stat.S_ISDIR(st.st_mode):
        return f"dir{mode}"
    if not stat.S_ISREG(st.st_mode):
        return "other"
    return f"file{mode}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


def _listing(root: Path, skip: set[str], unlisted: list[str]) -> dict[str, str]:
    """Every path under ``root`` but ``skip``, by relative path; what cannot be read goes to ``unlisted``."""
    out: dict[str, str] = {}

    def add(rel: str, full: str) -> bool:
        try:
            out[rel] = _describe(full, os.lstat(full))
        except FileNotFoundError:
            unlisted.append(f"{full}: vanished while it was listed")
            return False
        except OSError as exc:
            out[rel] = "unreadable"
            unlisted.append(f"{full}: {exc.strerror}")
            return False
        return out[rel].startswith("dir")

    folders = [
        (top, os.path.join(root, top))
        for top in _names(root, unlisted)
        if top not in skip and add(top, os.path.join(root, top))
    ]
    while folders:  # depth first, without recursion (a deep tree has no limit here)
        rel_dir, full_dir = folders.pop()
        try:
            with os.scandir(full_dir) as entries:
                found = [(f"{rel_dir}/{e.name}", e.path) for e in entries]
        except OSError as exc:
            unlisted.append(f"{full_dir}: {exc.strerror} (its entries are not listed)")
            continue
        folders.extend((rel, full) for rel, full in found if rel not in skip and add(rel, full))
    return out


def _names(root: Path, unlisted: list[str]) -> list[str]:
    try:
        return os.listdir(root)
    except OSError as exc:
        unlisted.append(f"{root}: {exc.strerror} (not listed)")
        return []


def _inside(path: Path, root: Path) -> str | None:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


def take(config_dir: Path, repo: Path, home: Path | None = None, *, skip: tuple[Path, ...] = ()) -> Snapshot:
    """List the real config dir, the whole repository (``.git`` included) and the home. ``skip``: ablate's own
    folders (run folder, work dir) and always its cache dir, which the caller makes first
    (:func:`ablate.core.cache.ensure_cache_dir`) so its making is never taken for a change of yours."""
    skip = tuple(dict.fromkeys(Path(os.path.abspath(p)) for p in (*skip, cache_dir())))

    def excluded(root: Path) -> tuple[str, ...]:
        return tuple(r for r in (_inside(p, root) for p in skip) if r)

    unlisted: list[str] = []
    listings = {
        str(config_dir): _listing(config_dir, set(excluded(config_dir)), unlisted),
        str(repo): tree_listing(repo, exclude=excluded(repo)),
    }
    if home is not None and home.is_dir():
        inner = {r for r in (_inside(p, home) for p in (config_dir, repo, *skip)) if r}
        # the config dir and the repository are listed on their own; the account state beside a
        # ``~/.claude`` config dir is the CLI's (said as a note when it changes)
        listings[str(home)] = _listing(home, inner, unlisted)
    return Snapshot(config_dir, repo, home, skip, listings, tuple(unlisted))


def changes(before: Snapshot) -> list[str]:
    """The real paths added, removed or changed since ``before``: "<path> (added|removed|changed)"."""
    return changes_and_notes(before)[0]


def changes_and_notes(before: Snapshot) -> tuple[list[str], list[str]]:
    """:func:`changes`, and notes: git's maintenance, what Claude Code writes itself, what went unlisted."""
    after = take(before.config_dir, before.repo, before.home, skip=before.skip)
    out: list[str] = []
    notes: list[str] = []
    cli_written: list[str] = []
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
        for rel, what in diff.items():
            line = f"{Path(root) / rel} ({what})"
            (cli_written if _cli_written(before, root, rel) else out).append(line)
    if cli_written:
        more = f" and {len(cli_written) - 10} more" if len(cli_written) > 10 else ""
        shown = ", ".join(cli_written[:10]) + more
        notes.append(
            f"{len(cli_written)} file(s) Claude Code writes itself changed during the run: {shown} — your own "
            "sessions write these too, and a refreshed login is copied back; not counted as a change"
        )
    unlisted = sorted(set(before.unlisted) | set(after.unlisted))
    if unlisted:
        notes.append(
            f"could not list {len(unlisted)} path(s), changes there go unseen: " + "; ".join(unlisted[:10])
        )
    return out, notes


def _cli_written(snap: Snapshot, root: str, rel: str) -> bool:
    """Whether Claude Code writes ``rel`` itself (in the config dir, or the account state beside it)."""
    if root == str(snap.config_dir):
        return any(rel == w or rel.startswith(w + "/") for w in CLI_WRITTEN) or rel.startswith(ACCOUNT + ".")
    if snap.home is not None and root == str(snap.home):
        beside = _inside(snap.config_dir.parent / ACCOUNT, snap.home)
        return beside is not None and (rel == beside or rel.startswith(beside + "."))
    return False


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
    """Separate git's own maintenance (``git gc`` packing loose objects and refs) from real changes: a removed
    loose object still held, a removed loose ref still resolving to its value, and gc's own files are none."""
    removed = {
        rel: m.group(1) + m.group(2)
        for rel, what in diff.items()
        if what == "removed"
        if (m := _LOOSE.match(rel))
    }
    packed: set[str] = set()
    if removed:
        batch = "\n".join(removed.values()) + "\n"
        proc = run_git(repo, "cat-file", "--batch-check=%(objectname)", check=False, input=batch)
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

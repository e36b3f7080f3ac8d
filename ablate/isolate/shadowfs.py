"""File operations on a cell's own trees that can never reach the user's real files.

Every operation works *on the cell's side of a link*: a linked folder on the way is split into per-entry
links, a link at the path is unlinked (never written through), and every parent must resolve inside the cell.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from ablate.core import links
from ablate.core.errors import DISK_FULL_HINT, DiskFull, UnsafeEnvironment, UsageError
from ablate.core.fdtree import delete_tree
from ablate.core.fsutil import disk_full_message, is_disk_full
from ablate.setup.layers import json_keys


def is_inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def ensure_inside(root: Path, path: Path) -> None:
    """Refuse to touch ``path`` unless its parent folder (links resolved) lies inside ``root``."""
    parent = os.path.realpath(path.parent)
    if not is_inside(parent, os.path.realpath(root)):
        raise UnsafeEnvironment(
            f"{path}: its folder resolves to {parent}, outside the cell {root}; refusing to modify it",
            hint="this is a bug in ablate's environment builder; please report it",
        )


def split_link(path: Path) -> None:
    """Replace a symlink to a folder by a real folder whose entries are links to the target's entries."""
    target = Path(os.path.realpath(path))
    path.unlink()
    path.mkdir()
    if target.is_dir():
        for child in sorted(target.iterdir(), key=lambda p: p.name):
            (path / child.name).symlink_to(child)


def detach(root: Path, rel: str) -> Path:
    """``root/rel`` with every folder on the way made a real folder of the cell (links split)."""
    cur = root
    for part in PurePosixPath(rel).parts[:-1]:
        cur = cur / part
        if cur.is_symlink():
            ensure_inside(root, cur)
            split_link(cur)
        elif not cur.exists():
            break
    path = root / rel
    ensure_inside(root, path)
    return path


def remove_path(path: Path) -> None:
    """:func:`ablate.core.fdtree.delete_tree`: links never followed, read-only folders forced."""
    delete_tree(path)


def remove(root: Path, rel: str) -> None:
    """Delete ``root/rel`` (file, link or folder) on the cell's side."""
    remove_path(detach(root, rel))


def stub(root: Path, rel: str) -> None:
    """Empty every file under ``root/rel`` (the layer's ``stub`` strip), keeping names and modes."""
    path = detach(root, rel)
    if path.is_symlink() and path.is_dir():
        split_link(path)
    if path.is_dir():
        for child in sorted(os.listdir(path)):
            stub(root, f"{rel}/{child}")
        return
    if path.exists() or path.is_symlink():
        _replace_file(path, b"")


def drop_keys(root: Path, rel: str, keys: Iterable[str]) -> None:
    """Remove top-level ``keys`` from the JSON object file ``root/rel``."""
    path = detach(root, rel)
    data = json_keys(path) or {}
    if wanted := [k for k in keys if k in data]:
        write_json_file(path, {k: v for k, v in data.items() if k not in wanted})


def keep_keys(root: Path, rel: str, keys: Iterable[str]) -> None:
    """Reduce the JSON object file ``root/rel`` to ``keys``; delete it when none of them is there."""
    path = detach(root, rel)
    wanted = set(keys)
    kept = {k: v for k, v in (json_keys(path) or {}).items() if k in wanted}
    if kept:
        write_json_file(path, kept)
    else:
        remove_path(path)


def write_json_file(path: Path, data: object) -> None:
    """(Re)write a JSON file as a real file of the cell, keeping the mode of what was there."""
    _replace_file(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())


def _replace_file(path: Path, data: bytes) -> None:
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    remove_path(path)
    path.write_bytes(data)
    os.chmod(path, mode)


def put(root: Path, rel: str, src: Path) -> None:
    """Make ``root/rel`` an exact copy of ``src`` (file, folder or link, links kept as links)."""
    dst = detach(root, rel)
    remove_path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    ensure_inside(root, dst)
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    elif src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst)


Ignore = Callable[[str, list[str]], Iterable[str]]


def copy_entry(
    src: Path, dst: Path, *, ignore: Ignore | None = None, keep_links_outside: Path | None = None
) -> None:
    """Copy so that ``dst`` presents what the CLI reads at ``src`` (docs/ARCHITECTURE.md#links-in-setups): links
    materialised, except those out of ``keep_links_outside`` (a copy seen at the real path), which stay links;
    dangling ones stay dangling; a loop or unreadable target is a located ``UsageError``."""
    keep = os.path.realpath(keep_links_outside) if keep_links_outside is not None else None
    _materialise(src, dst, ignore, frozenset(), keep, src)


def _materialise(
    src: Path,
    dst: Path,
    ignore: Ignore | None,
    above: frozenset[tuple[int, int]],
    keep: str | None,
    via: Path,
) -> None:
    """``via``: the last link on the way to ``src`` (the one a loop is named by)."""
    via = src if src.is_symlink() else via
    st = links.follow(src)
    if st is None:
        os.symlink(links.dangling_target(src), dst)
        return
    if keep is not None and src.is_symlink() and not is_inside(target := os.path.realpath(src), keep):
        os.symlink(target, dst)
        return
    if links.is_dir(st):
        names, inside = links.enter(src, st, above, via)
        dst.mkdir()
        left_out = set(ignore(str(src), names)) if ignore else set()
        for name in names:
            if name not in left_out:
                _materialise(src / name, dst / name, ignore, inside, keep, via)
        shutil.copystat(src, dst)
    elif stat.S_ISREG(st.st_mode):
        try:
            shutil.copy2(src, dst)
        except OSError as exc:
            if is_disk_full(exc):  # the copy's side (a cell under a full TMPDIR or --work-dir), not the link
                said = disk_full_message(exc, dst, kept="the cell was not built and no session ran")
                raise DiskFull(said, hint=DISK_FULL_HINT) from None
            raise links.link_error(src, exc) from None


def anchor_links(copy: Path, original: Path) -> None:
    """Make every relative link in ``copy`` (of ``original``) absolute: it leads where the original's does."""
    for dirpath, dirnames, filenames in os.walk(copy):
        for name in (*dirnames, *filenames):
            link = Path(dirpath) / name
            if not link.is_symlink() or os.path.isabs(target := os.readlink(link)):
                continue
            there = original / link.parent.relative_to(copy)
            link.unlink()
            os.symlink(os.path.join(os.path.realpath(there), target), link)


def link_per_entry(src: Path, dst: Path) -> None:
    """A real folder ``dst`` whose every entry is an absolute symlink to the entry of ``src``."""
    dst.mkdir()
    for child in sorted(src.iterdir(), key=lambda p: p.name):
        (dst / child.name).symlink_to(src / child.name)


def sync_tree(src: Path, dst: Path) -> None:
    """Make the real folder ``dst`` identical to ``src`` (paths, kinds, modes, contents, link targets; links
    in ``dst`` replaced, never followed; files of equal size and mtime assumed unchanged: copies keep mtimes)."""
    src_mode = stat.S_IMODE(os.lstat(src).st_mode)
    dst_mode = stat.S_IMODE(os.lstat(dst).st_mode)
    if dst_mode & stat.S_IRWXU != stat.S_IRWXU:
        os.chmod(dst, dst_mode | stat.S_IRWXU)
    src_names = set(os.listdir(src))
    for name in sorted(set(os.listdir(dst)) - src_names):
        remove_path(dst / name)
    for name in sorted(src_names):
        s, d = src / name, dst / name
        ss = os.lstat(s)
        try:
            ds: os.stat_result | None = os.lstat(d)
        except FileNotFoundError:
            ds = None
        if stat.S_ISLNK(ss.st_mode):
            target = os.readlink(s)
            if ds is None or not stat.S_ISLNK(ds.st_mode) or os.readlink(d) != target:
                remove_path(d)
                os.symlink(target, d)
        elif stat.S_ISDIR(ss.st_mode):
            if ds is None or not stat.S_ISDIR(ds.st_mode):
                remove_path(d)
                os.mkdir(d)
            sync_tree(s, d)
        elif ds is None or (ds.st_mode, ds.st_size, ds.st_mtime_ns) != (
            ss.st_mode,
            ss.st_size,
            ss.st_mtime_ns,
        ):
            remove_path(d)
            shutil.copy2(s, d)
    if stat.S_IMODE(os.lstat(dst).st_mode) != src_mode:
        os.chmod(dst, src_mode)


def tree_size(path: Path, limit: int) -> int:
    """Bytes under ``path`` (links followed), stopping early once ``limit`` is exceeded."""
    if not path.is_dir():
        return path.stat().st_size if path.exists() else 0
    total = 0
    seen: set[tuple[int, int]] = set()
    for dirpath, _dirs, files in os.walk(path, followlinks=True):
        st = os.stat(dirpath)
        if (st.st_dev, st.st_ino) in seen:
            raise UsageError(
                f"{dirpath}: symlink loop inside {path}",
                hint="remove or fix the looping symlink; ablate follows links to copy small state folders",
            )
        seen.add((st.st_dev, st.st_ino))
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_size
            except OSError:
                continue
            if total > limit:
                return total
    return total

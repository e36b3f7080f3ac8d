"""Small file-system helpers: atomic writes, content hashing, tree hashing."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from pathlib import Path

import orjson

from ablate.core.fdtree import TreeEntry, walk_tree


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, then ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # a write or fsync names no file: name the one being written
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: object, *, mode: int | None = None) -> None:
    """Write ``obj`` as indented JSON (orjson, sorted keys) atomically."""
    data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    atomic_write_bytes(path, data + b"\n", mode=mode)


def sha256_file(path: Path, *, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_hash(root: Path, *, exclude: tuple[str, ...] = ()) -> str:
    """Hash a tree: each entry's path, type, mode and content or link target, but ``exclude``'s paths."""
    h = hashlib.sha256()
    for rel, kind, payload in _walk_entries(root, exclude):
        h.update(f"{rel}\0{kind}\0".encode())
        h.update(payload)
        h.update(b"\0")
    return h.hexdigest()


def tree_listing(root: Path, *, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    """Map each relative path under ``root`` to a short description (kind + content hash), for diffs."""
    out: dict[str, str] = {}
    for rel, kind, payload in _walk_entries(root, exclude):
        out[rel] = f"{kind}:{hashlib.sha256(payload).hexdigest()[:16]}"
    return out


def _entry(entry: TreeEntry) -> tuple[str, bytes] | None:
    """(kind, payload) of one entry, links not followed; None when it was removed during the walk."""
    st, name, fd = entry.st, entry.name, entry.dir_fd
    try:
        if stat.S_ISLNK(st.st_mode):
            return "link", os.readlink(name, dir_fd=fd).encode()
        mode = f"{stat.S_IMODE(st.st_mode):o}"
        if stat.S_ISDIR(st.st_mode):
            return f"dir{mode}", b""
        if stat.S_ISREG(st.st_mode):
            with open(os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd), "rb") as fh:
                return f"file{mode}", hashlib.sha256(fh.read()).digest()
        return "other", b""
    except FileNotFoundError:
        return None


def _walk_entries(root: Path, exclude: tuple[str, ...]) -> list[tuple[str, str, bytes]]:
    """Every entry under ``root`` by path (:func:`~ablate.core.fdtree.walk_tree`; unreadable: not entered)."""
    entries: list[tuple[str, str, bytes]] = []
    if not root.is_dir():
        return entries
    excluded = {e.strip("/") for e in exclude}
    for entry in walk_tree(root, exclude=excluded, unreadable=lambda _exc: None):
        if (found := _entry(entry)) is not None:
            entries.append((entry.rel, *found))
    entries.sort(key=lambda e: e[0])
    return entries


#: errno values that mean "the file system is full" (no space, or the user's quota).
_FULL = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(exc: BaseException) -> bool:
    """True for an ``OSError`` that says the file system (or the user's quota on it) is full."""
    return isinstance(exc, OSError) and exc.errno in _FULL


def mount_point(path: Path | str) -> Path:
    """The mount point of the file system holding ``path`` (its nearest existing ancestor's)."""
    p = Path(os.path.abspath(path))
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    while p != p.parent and not os.path.ismount(p):
        p = p.parent
    return p


def disk_full_message(exc: OSError, path: Path | str | None = None, *, kept: str = "") -> str:
    """A located message for a full file system: the file, the mount point, and what was kept."""
    where = path if path is not None else exc.filename
    name = f"{where}: " if where else ""
    mount = f"the file system mounted at {mount_point(where)}" if where else "a file system"
    what = "is over your quota" if exc.errno == errno.EDQUOT else "is full"
    return f"{name}{mount} {what} ({exc.strerror})" + (f"; {kept}" if kept else "")

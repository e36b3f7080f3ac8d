"""Small file-system helpers: atomic writes, content hashing, tree hashing."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

import orjson


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
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


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
    """Hash a directory tree: every entry's relative path, type, mode bits, and content or link target.

    Symlinks are not followed (their target string is hashed). ``exclude`` holds relative paths (files or
    folders) to leave out. Two trees with the same hash are byte-identical for ablate's purposes.
    """
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


def _walk_entries(root: Path, exclude: tuple[str, ...]) -> list[tuple[str, str, bytes]]:
    entries: list[tuple[str, str, bytes]] = []
    excluded = {e.strip("/") for e in exclude}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir
        keep_dirs = []
        for d in sorted(dirnames):
            rel = os.path.join(rel_dir, d) if rel_dir else d
            if rel in excluded:
                continue
            full = os.path.join(dirpath, d)
            try:
                st = os.lstat(full)
                if stat.S_ISLNK(st.st_mode):
                    entries.append((rel, "link", os.readlink(full).encode()))
                    continue
            except FileNotFoundError:  # removed while walked (git gc, the user at work): not there
                continue
            entries.append((rel, f"dir{stat.S_IMODE(st.st_mode):o}", b""))
            keep_dirs.append(d)
        dirnames[:] = keep_dirs
        for f in sorted(filenames):
            rel = os.path.join(rel_dir, f) if rel_dir else f
            if rel in excluded:
                continue
            full = os.path.join(dirpath, f)
            try:
                st = os.lstat(full)
                if stat.S_ISLNK(st.st_mode):
                    entries.append((rel, "link", os.readlink(full).encode()))
                elif stat.S_ISREG(st.st_mode):
                    with open(full, "rb") as fh:
                        digest = hashlib.sha256(fh.read()).digest()
                    entries.append((rel, f"file{stat.S_IMODE(st.st_mode):o}", digest))
                else:
                    entries.append((rel, "other", b""))
            except FileNotFoundError:  # removed while walked: not there
                continue
    entries.sort(key=lambda e: e[0])
    return entries

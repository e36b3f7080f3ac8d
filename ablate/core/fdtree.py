"""Folder trees of any depth, walked and removed without recursion, through folder descriptors.

A session may leave a tree thousands of folders deep: Python 3.11's ``os.walk`` and ``shutil.rmtree`` recurse
per level (``RecursionError`` past about 1,000) and ``os.walk`` names each folder by its whole path
(``ENAMETOOLONG`` past 4,096 bytes, silently skipped). Here every folder is opened relative to its parent's
descriptor (``openat``) from an explicit stack, at most :data:`MAX_OPEN` at once (one given up is reopened
from its nearest open ancestor). Links are never followed and no other file system is entered."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: How a folder is opened: never through a link.
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Folder descriptors held open at most (the rest are opened again when needed).
MAX_OPEN = 32


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a tree: its path relative to the root (``/``-joined), its name and ``lstat``; ``dir_fd``
    is the folder that holds it, open until the walk moves on (read a file with ``dir_fd``, not by path)."""

    rel: str
    name: str
    dir_fd: int
    st: os.stat_result

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)


@dataclass
class _Folder:
    name: str
    rel: str
    dev: int
    ino: int
    fd: int | None
    pending: list[str] = field(default_factory=list)
    """The folders in it still to enter (last first)."""
    listed: bool = False


class _Path:
    """The folders from the root down to the one being read; ``opened`` of them hold a descriptor, none
    between the root and ``low`` (the shallowest that may)."""

    def __init__(self, root: str, *, force: bool) -> None:
        self.force = force
        # the root as named (a link to a folder is followed, as os.walk does); nothing below it
        fd = _retry(lambda: os.open(root, _OPEN_DIR & ~os.O_NOFOLLOW), force, lambda: _open_up(root))
        self.root = root
        st = os.fstat(fd)
        self.folders = [_Folder("", "", st.st_dev, st.st_ino, fd)]
        self.opened, self.low = 1, 1

    def __bool__(self) -> bool:
        return bool(self.folders)

    @property
    def top(self) -> _Folder:
        return self.folders[-1]

    def where(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def fd(self) -> int:
        """The deepest folder's descriptor, opened again from its nearest open ancestor if given up."""
        n = len(self.folders) - 1
        if (fd := self.folders[n].fd) is not None:
            return fd
        base = next(i for i in range(n - 1, -1, -1) if self.folders[i].fd is not None)
        fd = self.folders[base].fd
        assert fd is not None
        for i in range(base + 1, n + 1):
            step = os.open(self.folders[i].name, _OPEN_DIR, dir_fd=fd)
            if i > base + 1:
                os.close(fd)
            fd = step
        self._hold(n, fd)
        return fd

    def enter(self, name: str) -> None:
        parent = self.fd()
        rel = f"{self.top.rel}/{name}" if self.top.rel else name
        fd = _retry(
            lambda: os.open(name, _OPEN_DIR, dir_fd=parent), self.force, lambda: _open_up(name, parent)
        )
        st = os.fstat(fd)
        if st.st_dev != self.top.dev:  # mounted there since it was listed: not entered
            os.close(fd)
            raise OSError(errno.EXDEV, "another file system", name)
        self.folders.append(_Folder(name, rel, st.st_dev, st.st_ino, None))
        self._hold(len(self.folders) - 1, fd)

    def leave(self) -> _Folder:
        """Done with the deepest folder; its parent's descriptor, if given up, is had back through ``..``
        (checked to be that very folder), so climbing out of a deep chain costs one open per level."""
        folder = self.folders.pop()
        if folder.fd is None:
            return folder
        parent = self.folders[-1] if self.folders else None
        if parent is not None and parent.fd is None:
            up = os.open("..", _OPEN_DIR, dir_fd=folder.fd)
            st = os.fstat(up)
            if (st.st_dev, st.st_ino) == (parent.dev, parent.ino):
                self._hold(len(self.folders) - 1, up)
            else:
                os.close(up)
        os.close(folder.fd)
        self.opened -= 1
        self.low = min(self.low, max(1, len(self.folders) - 1))
        return folder

    def close(self) -> None:
        for folder in self.folders:
            if folder.fd is not None:
                os.close(folder.fd)
                folder.fd = None
        self.folders.clear()

    def _hold(self, n: int, fd: int) -> None:
        """Keep ``fd`` for the folder at ``n``; past :data:`MAX_OPEN` give up the shallowest others."""
        self.folders[n].fd = fd
        self.opened += 1
        self.low = max(1, min(self.low, n))
        last = len(self.folders) - 1
        while self.opened > MAX_OPEN and self.low < last:
            folder = self.folders[self.low]
            if folder.fd is not None and self.low != n:
                os.close(folder.fd)
                folder.fd = None
                self.opened -= 1
            self.low += 1


def _open_up(name: str, dir_fd: int | None = None) -> None:
    """Give a folder that refuses its owner (mode 000, read-only) back to them: read, write, enter."""
    mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=dir_fd is None).st_mode
    if stat.S_ISDIR(mode):
        os.chmod(name, stat.S_IMODE(mode) | stat.S_IRWXU, dir_fd=dir_fd)


def _retry(op: Callable[[], T], force: bool, opener: Callable[[], None]) -> T:
    """``op``; when it is refused (``EACCES``/``EPERM``) and ``force``: ``opener``, then ``op`` once more."""
    try:
        return op()
    except PermissionError:
        if not force:
            raise
        opener()
        return op()


def _located(exc: OSError, where: str) -> OSError:
    return OSError(exc.errno, exc.strerror, where)


def walk_tree(
    root: Path | str, *, exclude: Collection[str] = (), unreadable: Callable[[OSError], None] | None = None
) -> Iterator[TreeEntry]:
    """Every entry under ``root`` but ``exclude``, folders first, entries by name; a folder that cannot be read
    raises an ``OSError`` naming it (or goes to ``unreadable``, not entered); one removed meanwhile is left out."""
    root = os.fspath(root)
    try:
        path = _Path(root, force=False)
    except OSError as exc:
        raise _located(exc, root) from None
    try:
        while path:
            folder = path.top
            if not folder.listed:
                folder.listed = True
                fd = path.fd()
                for name in sorted(os.listdir(fd)):
                    rel = f"{folder.rel}/{name}" if folder.rel else name
                    if rel in exclude:
                        continue
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    yield TreeEntry(rel, name, fd, st)
                    if stat.S_ISDIR(st.st_mode) and st.st_dev == folder.dev:
                        folder.pending.append(name)
                folder.pending.reverse()
            if folder.pending:
                name = folder.pending.pop()
                rel = f"{folder.rel}/{name}" if folder.rel else name
                try:
                    path.enter(name)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if unreadable is None:
                        raise _located(exc, path.where(rel)) from None
                    unreadable(_located(exc, path.where(rel)))
            else:
                path.leave()
    finally:
        path.close()


def delete_tree(top: Path | str) -> None:
    """Remove ``top`` (file, link or folder tree of any depth; nothing when absent): links never followed, a
    folder that refuses (mode 000) opened to its owner first, a mount point inside left (``EBUSY``); the first
    error that remains is raised, naming its path."""
    top = os.fspath(top)
    try:
        st = os.lstat(top)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(top)
        return
    path = _Path(top, force=True)
    at: tuple[_Folder | None, str] = (None, "")  # where an error happens: a folder and a name in it
    try:
        while path:
            folder = path.top
            fd = path.fd()
            if not folder.listed:
                folder.listed = True
                for name in _forced(fd, functools.partial(os.listdir, fd)):
                    at = (folder, name)
                    _clear(fd, name, folder)
            if folder.pending:
                name = folder.pending.pop()
                at = (folder, name)
                with contextlib.suppress(FileNotFoundError):
                    path.enter(name)
                continue
            name = path.leave().name
            if path:
                parent = path.fd()
                at = (path.top, name)
                _forced(parent, functools.partial(os.rmdir, name, dir_fd=parent))
        at = (None, "")
        # refused, ``top`` itself is opened to its owner and tried once more; the folder above keeps its mode
        _retry(functools.partial(os.rmdir, top), True, functools.partial(os.chmod, top, stat.S_IRWXU))
    except OSError as exc:
        where = top if at[0] is None else path.where(f"{at[0].rel}/{at[1]}" if at[0].rel else at[1])
        raise _located(exc, where) from None
    finally:
        path.close()


def _forced(fd: int, op: Callable[[], T]) -> T:
    """``op`` on an entry of the folder ``fd``; refused, once more after the folder is opened to its owner."""

    return _retry(op, True, lambda: os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | stat.S_IRWXU))


def _clear(fd: int, name: str, folder: _Folder) -> None:
    """Unlink ``name`` in the folder ``fd``, or (a folder of the same file system) note it to be entered."""
    try:
        st = _forced(fd, lambda: os.stat(name, dir_fd=fd, follow_symlinks=False))
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        if st.st_dev == folder.dev:
            folder.pending.append(name)
        else:
            os.rmdir(name, dir_fd=fd)  # a mount point: EBUSY, said
        return
    with contextlib.suppress(FileNotFoundError):
        _forced(fd, lambda: os.unlink(name, dir_fd=fd))

"""Trees of any depth (issue 43 item 2): listed and removed without recursion, paths past ``PATH_MAX``, at
most a few dozen descriptors open, links never followed, no other file system entered; the positive
control: Python's own ``os.walk`` and ``shutil.rmtree`` fail on the same tree."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ablate.core.fdtree import MAX_OPEN, delete_tree, walk_tree
from ablate.core.fsutil import tree_listing
from ablate.core.tempwork import remove_tree
from ablate.isolate.writes import scan_upper

NAME = "a-folder-name-of-24-char"  # 2,000 of them: a path of 50,000 bytes


def deep_tree(base: Path, depth: int = 2000, *, wide_at: tuple[int, ...] = (0, 700, 1500)) -> int:
    """``depth`` nested folders under ``base``, a file in each, three sibling folders at the levels in
    ``wide_at`` (entered after the deep branch: reached by reopening from an ancestor); how many entries."""
    base.mkdir()
    fd = os.open(base, os.O_RDONLY)
    n = 0
    try:
        for level in range(depth):
            os.mkdir(NAME, dir_fd=fd)
            os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
            n += 2
            if level in wide_at:
                for side in ("s1", "s2", "s3"):
                    os.mkdir(side, dir_fd=fd)
                    os.close(os.open(f"{side}/g", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
                    n += 2
            step = os.open(NAME, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = step
    finally:
        os.close(fd)
    return n


def test_a_tree_2000_deep_with_paths_past_path_max_is_listed_and_removed(tmp_path: Path) -> None:
    base = tmp_path / "t"
    try:
        n = deep_tree(base)
        # the positive control: Python's own walkers give up on it (recursion, or a path too long to name)
        try:
            walked = sum(1 + len(files) for _, _, files in os.walk(base))
        except RecursionError:
            walked = -1
        assert walked < n
        before, most_open = len(os.listdir("/proc/self/fd")), 0
        rels = []
        for entry in walk_tree(base):
            rels.append(entry.rel)
            if entry.name == "g" or entry.rel.count("/") == 1999:
                most_open = max(most_open, len(os.listdir("/proc/self/fd")))
        assert len(rels) == len(set(rels)) == n
        deepest = f"{NAME}/" * 1999 + "f"
        assert deepest in rels and len(deepest) > 4096 * 10
        assert f"{NAME}/" * 1500 + "s3/g" in rels  # a side folder entered after the deep branch below it
        assert most_open - before <= MAX_OPEN + 1  # and the walk's own listing of /proc/self/fd
        listing = tree_listing(base, exclude=("s1",))
        assert len(listing) == n - 2 and listing[deepest].startswith("file")
        writes = scan_upper(base, Path("/home/me"), label="~")
        assert (writes.files, writes.by_folder[f"~/{NAME}"]) == (n // 2, n // 2 - 4)
        with pytest.raises((RecursionError, OSError)):  # the control again: removal, too, fails part way
            shutil.rmtree(base)
        assert base.exists()
        delete_tree(base)
        assert not base.exists()
    finally:
        delete_tree(base)  # never a deep tree left to pytest's own cleanup (shutil.rmtree)


def test_removal_opens_refusing_folders_unlinks_links_and_leaves_other_file_systems(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("k")
    base = tmp_path / "t"
    deep_tree(base, 50, wide_at=())
    mid = base / "/".join([NAME] * 20)
    (mid / "link").symlink_to(outside)
    (mid / "locked").mkdir()
    (mid / "locked" / "x").write_text("x")
    os.chmod(mid / "locked", 0)
    os.chmod(mid, 0o500)
    remove_tree(base)
    assert not base.exists() and (outside / "keep").read_text() == "k"
    delete_tree(base)  # absent: nothing
    (tmp_path / "file").write_text("f")
    delete_tree(tmp_path / "file")
    assert not (tmp_path / "file").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: root only")
def test_removal_never_enters_a_mount_inside_and_names_it(tmp_path: Path) -> None:
    base = tmp_path / "t"
    point = base / "a" / "mnt"
    point.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], check=True)
    try:
        (point / "theirs").write_text("t")
        assert [e.rel for e in walk_tree(base)] == ["a", "a/mnt"]
        with pytest.raises(OSError) as raised:
            delete_tree(base)
        assert raised.value.filename == str(point)
        assert (point / "theirs").read_text() == "t"
    finally:
        subprocess.run(["umount", str(point)], check=True)
    delete_tree(base)
    assert not base.exists()


def test_a_folder_that_cannot_be_listed_is_named(tmp_path: Path) -> None:
    with pytest.raises(OSError) as raised:
        list(walk_tree(tmp_path / "missing"))
    assert raised.value.filename == str(tmp_path / "missing")

"""As root a session's view is mounted in ablate's namespace while it is seeded or graded; a runner killed
then (even with kill -9) leaves it mounted, and the next ablate command that opens the namespace backend
unmounts it, whatever its work dir, unless its runner still lives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.isolate import nsexec
from ablate.isolate.namespace import MARKER, VIEW_OWNER, unmount_orphaned_views

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting needs root (CI and this machine run as root)"
)


def _mounted_view(slot: Path, owner: int) -> Path:
    for d in ("lower", "up", "wk", "merged"):
        (slot / d).mkdir(parents=True)
    (slot / MARKER).write_text("{}")
    (slot / "lower" / "seed.txt").write_text("seeded")
    merged = slot / "merged"
    nsexec.mount_overlay(str(merged), [str(slot / "lower")], str(slot / "up"), str(slot / "wk"))
    (slot / VIEW_OWNER).write_text(f"{owner}\n")
    return merged


def test_a_view_whose_runner_was_killed_is_unmounted_by_the_next_command(tmp_path: Path) -> None:
    killed = subprocess.Popen([sys.executable, "-c", "pass"])
    killed.wait()  # its pid is free now: the runner that mounted the view is gone
    gone = _mounted_view(tmp_path / "a" / "s00", killed.pid)
    living = _mounted_view(tmp_path / "b" / "s00", os.getppid())
    try:
        assert (gone / "seed.txt").read_text() == "seeded"
        assert unmount_orphaned_views() == [str(gone)]
        assert nsexec.mounts_under(str(gone)) == [] and not (gone / "seed.txt").exists()
        assert not (gone.parent / VIEW_OWNER).exists()
        assert nsexec.mounts_under(str(living)) == [str(living)]  # a live runner's view stays
    finally:
        nsexec.unmount_all_under(str(tmp_path))

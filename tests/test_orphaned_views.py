"""As root a session's view is mounted in ablate's namespace while it is seeded or graded; a runner killed
then (even with kill -9) leaves it mounted, and the next ablate command's sweep unmounts it, whatever its work
dir, unless its runner still lives. The mark is the one every work folder has: an owner file (pid and start
time, so a reused pid is not taken for the runner)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.core import mounts, tempwork
from ablate.isolate import nsexec

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting needs root (CI and this machine run as root)"
)


def _mounted_view(slot: Path) -> Path:
    for d in ("lower", "up", "wk", "merged"):
        (slot / d).mkdir(parents=True)
    (slot / "lower" / "seed.txt").write_text("seeded")
    merged = slot / "merged"
    tempwork.own_mount(merged)
    nsexec.mount_overlay(str(merged), [str(slot / "lower")], str(slot / "up"), str(slot / "wk"))
    return merged


def test_a_view_whose_runner_was_killed_is_unmounted_by_the_next_commands_sweep(tmp_path: Path) -> None:
    killed = subprocess.Popen([sys.executable, "-c", "pass"])
    killed.wait()  # its pid is free now: the runner that mounted the view is gone
    gone = _mounted_view(tmp_path / "a" / "s00")
    living = _mounted_view(tmp_path / "b" / "s00")  # this process's own: alive
    owner = tempwork.mount_owner(gone)
    owner.write_text(f"{killed.pid} 0\n")
    unowned = tmp_path / "c" / "merged"  # no owner file: not known to be ablate's, left alone
    unowned.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(unowned)], check=True)
    try:
        assert (gone / "seed.txt").read_text() == "seeded"
        assert (
            tempwork.sweep(tmp_path / "no-tmp") == []
        )  # the sweep of the temporary directory unmounts first
        assert mounts.mounts_under(str(gone)) == [] and not (gone / "seed.txt").exists()
        assert not owner.exists()
        assert mounts.mounts_under(str(living)) == [str(living)]  # a live runner's view stays
        assert mounts.mounts_under(str(unowned)) == [str(unowned)]
        assert tempwork.unmount_orphans() == []  # nothing orphaned is left
    finally:
        mounts.unmount_all_under(str(tmp_path))

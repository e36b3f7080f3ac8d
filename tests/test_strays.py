"""``kill_strays``: a crashed runner's orphaned sessions are found by their cwd and killed, even one whose cwd
is longer than a path can be, and such a process elsewhere on the machine neither breaks the search nor is
killed (seen in CI: a session that went 1,200 folders deep made another run beside it fail, ``/proc/<pid>/cwd:
File name too long``)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import psutil

from ablate.run.session import kill_strays

#: Folders of 250-byte names: 20 of them make a cwd over PATH_MAX (4,096 bytes).
DEEP = """import os, sys, time
for _ in range(20):
    os.mkdir("d" * 250)
    os.chdir("d" * 250)
print("ready", flush=True)
time.sleep(120)
"""


def _sit_deep(where: Path) -> subprocess.Popen[str]:
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", DEEP], cwd=where, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    try:
        os.readlink(f"/proc/{proc.pid}/cwd")
    except OSError as exc:
        assert exc.errno == errno.ENAMETOOLONG  # the case under test
    else:
        raise AssertionError("the cwd was readable: not deep enough")
    return proc


def test_a_stray_sitting_deeper_than_a_path_can_name_is_killed(tmp_path: Path) -> None:
    proc = _sit_deep(tmp_path / "work" / "env")
    try:
        assert kill_strays(tmp_path / "work") == 1
        assert _gone(proc)
    finally:
        proc.kill()


def test_such_a_process_outside_the_root_is_left_alone_and_breaks_nothing(tmp_path: Path) -> None:
    proc = _sit_deep(tmp_path / "elsewhere")
    shallow = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], cwd=_made(tmp_path / "work")
    )
    try:
        assert kill_strays(tmp_path / "work") == 1  # the one inside, found beside the unreadable one
        assert _gone(shallow) and proc.poll() is None
        assert kill_strays(tmp_path / "missing") == 0
    finally:
        proc.kill()
        shallow.kill()


def _gone(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> bool:
    """Ended (kill_strays reaps its own children, so the exit status is not ours to read) and not there."""
    proc.wait(timeout=10)
    return not psutil.pid_exists(proc.pid)


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True)
    return folder

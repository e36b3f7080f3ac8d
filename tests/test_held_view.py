"""The view a runner mounts to seed or grade a session's tree lives in a holding process's own mount
namespace, as root too: a runner killed with kill -9 while it is mounted leaves no mount behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ablate.isolate.detect import namespace_check
from ablate.isolate.nsexec import mounts_under

HOLD = """
import sys, time
from pathlib import Path
from ablate.isolate.namespace import Mount, held_view
root = Path(sys.argv[1])
m = Mount(str(root / "merged"), (str(root / "lower"),), str(root / "up"), str(root / "wk"))
with held_view(root / "merged.json", [m]) as pid:
    print(pid, flush=True)
    print((Path(f"/proc/{pid}/root") / str(root / "merged" / "seed.txt").lstrip("/")).read_text(), flush=True)
    time.sleep(60)
"""


def test_a_runner_killed_while_a_view_is_mounted_leaves_no_mount(tmp_path: Path) -> None:
    if not namespace_check().ok:
        pytest.skip(f"no mount namespaces here: {namespace_check().reason}")
    for d in ("lower", "up", "wk", "merged"):
        (tmp_path / d).mkdir()
    (tmp_path / "lower" / "seed.txt").write_text("seeded")
    runner = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert runner.stdout is not None
    holder = int(runner.stdout.readline())
    assert runner.stdout.readline().strip() == "seeded"  # the view is mounted and read through the holder
    assert mounts_under(str(tmp_path)) == []  # never in the runner's (here: the host's) namespace
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=10)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{holder}") and time.monotonic() < deadline:
        time.sleep(0.05)
    stat = Path(f"/proc/{holder}/stat")
    assert not stat.exists() or stat.read_text().split()[2] == "Z"  # gone (or a zombie of no namespace)
    assert mounts_under(str(tmp_path)) == []

"""A full file system is a located error naming its mount point, never a traceback (issue 27.5)."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ablate.core.fsutil import disk_full_message, is_disk_full, mount_point
from ablate.run.worker import LAYER_MIN_FREE, layer_full
from ablate.setup.examples import ExampleSetup
from tests.helpers_cli import ABLATE, invoke
from tests.test_cli_run import TASK, rig, setup_args

__all__ = ["rig"]


@pytest.fixture
def small(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A tmpfs of ``request.param`` (default 8k) bytes."""
    if os.geteuid() != 0:
        pytest.skip("mounts a tmpfs: root only (CI and this machine run as root)")
    point = tmp_path / "small"
    point.mkdir()
    size = getattr(request, "param", "8k")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_full_run_folder_is_a_located_error(rig: tuple[ExampleSetup, Path], small: Path) -> None:
    ex, _ = rig
    args = ["plan", "--tasks", TASK, "--cells", "layered", "--repeats", "3", "--out", str(small / "runs")]
    code, out, err = invoke([*args, *setup_args(ex)])
    assert code == 1, (out, err)
    assert f"the file system mounted at {small} is full (No space left on device)" in err, err
    assert "every file written before is complete" in err and "--resume" in err
    # atomic writes: no half-written file or temporary left in the folder
    assert not [p for p in small.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("small", ["256k"], indirect=True)
def test_a_full_layer_is_seen_after_the_session(small: Path) -> None:
    assert layer_full(small) is None
    with (small / "fill").open("wb") as fh, pytest.raises(OSError) as caught:
        fh.write(b"x" * 512 * 1024)
        fh.flush()
    assert is_disk_full(caught.value)
    said = layer_full(small)
    assert said is not None and f"the file system mounted at {small} (the cell's layer) is full" in said
    assert LAYER_MIN_FREE > 0


def test_the_message_names_the_mount_point_of_the_nearest_existing_folder(tmp_path: Path) -> None:
    exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "not" / "yet"))
    said = disk_full_message(exc, kept="kept: x")
    assert (
        said
        == f"{tmp_path / 'not' / 'yet'}: the file system mounted at {mount_point(tmp_path)} is full (No space left on device); kept: x"
    )
    assert not is_disk_full(OSError(errno.EACCES, "no"))


@pytest.mark.parametrize("small", ["64m"], indirect=True)
def test_a_full_tmpdir_marks_the_item_failed_and_a_resume_completes_it(
    rig: tuple[ExampleSetup, Path], monkeypatch: pytest.MonkeyPatch, small: Path
) -> None:
    """TMPDIR on a small tmpfs holds the cells (the default work folder) and each session's private TMPDIR;
    each session fills it while ``fill`` exists (a fenced session cannot remove it). Each item is `error` with a
    message naming the tmpfs; once TMPDIR has room, a resume runs them. ``ablate`` runs as its own process, as
    a user runs it: its forwarder and work folders live in that TMPDIR and go when it exits."""
    ex, tmp = rig
    monkeypatch.delenv("ABLATE_WORK_DIR")
    fake, mark = os.environ["ABLATE_CLAUDE_BIN"], tmp / "fill"
    mark.touch()
    claude = tmp / "claude-filling"  # a session fills its TMPDIR (the links cell's own, on the tmpfs)
    claude.write_text(
        f'#!/bin/sh\nif [ "$1" != --version ] && [ -e "{mark}" ]; then\n'
        f'  dd if=/dev/zero of="$TMPDIR/fill" bs=64k 2>/dev/null\nfi\nexec "{fake}" "$@"\n'
    )
    claude.chmod(0o755)
    env = {**os.environ, "ABLATE_CLAUDE_BIN": str(claude), "TMPDIR": str(small)}

    def ablate(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ABLATE, *argv], env=env, capture_output=True, text=True, timeout=300)

    args = ["--isolation", "links", "--no-probe", "--jobs", "1", "--json"]
    first = ablate("ab", "--tasks", TASK, "--out", str(tmp / "runs"), *args, *setup_args(ex))
    assert first.returncode == 3, first.stderr[-1500:]  # some items failed
    (folder,) = (tmp / "runs").iterdir()
    results = [orjson.loads(p.read_bytes()) for p in sorted((folder / "results").iterdir())]
    assert [r["status"] for r in results] == ["error", "error"], results
    for r in results:
        assert f"the file system mounted at {small} (the cell's layer) is full" in r["error"], r["error"]
        assert "re-run on resume" in r["error"]
    mark.unlink()
    resumed = ablate("run", "--resume", str(folder), *args)
    code, out, err = resumed.returncode, resumed.stdout, resumed.stderr
    after = [orjson.loads(p.read_bytes()) for p in sorted((folder / "results").iterdir())]
    said: list[object] = [(r["item"], r["status"], r.get("error")) for r in after]
    for kind in ("stdout", "stderr"):  # what each session printed, when one ends without a transcript
        said += [(p.name, p.read_text(errors="replace")[-800:]) for p in (folder / kind).glob("*")]
    assert code == 0, (said, err[-1500:])
    # every item ran again (3 launches, one more attempt, were seen in some runs on a loaded machine)
    assert orjson.loads(out)["launched"] >= 2, out
    assert [r["status"] for r in after] == ["completed", "completed"], said
    assert list(small.iterdir()) == []  # the filler went with the cell's folder


def test_a_tmpdir_too_small_for_the_cells_is_a_located_error(
    rig: tuple[ExampleSetup, Path], monkeypatch: pytest.MonkeyPatch, small: Path
) -> None:
    """An 8k TMPDIR cannot hold a cell: the copy's file system is named, not the setup file it copied."""
    import tempfile

    from ablate.isolate.forwarder import shared_forwarder

    shared_forwarder()
    ex, tmp = rig
    monkeypatch.delenv("ABLATE_WORK_DIR")
    monkeypatch.setenv("TMPDIR", str(small))
    monkeypatch.setattr(tempfile, "tempdir", str(small))
    args = ["--isolation", "links", "--no-probe"]
    code, _, err = invoke(["ab", "--tasks", TASK, "--out", str(tmp / "runs"), *args, *setup_args(ex)])
    assert code == 1, err[-1500:]
    assert f"the file system mounted at {small} is full" in err and "no session ran" in err, err[-1500:]
    assert "fix or remove the link" not in err and "Traceback" not in err

"""A session's stdout and stderr are pipes the runner reads: nothing the session does through
``/proc/self/fd/1`` reaches the stdout record after the fact, and memory stays bounded."""

from __future__ import annotations

from pathlib import Path

from ablate.core.proc import run_process

ENV = {"PATH": "/usr/bin:/bin"}


def test_stdout_and_stderr_are_pipes_and_the_record_is_written_after_the_end(tmp_path: Path) -> None:
    out = tmp_path / "run" / "stdout.json"
    # what a session's tool would try: learn what fd 1 and 2 are, rewrite fd 1 by path (O_TRUNC), and
    # leave a daemon behind that writes into it once the session ended
    script = (
        "readlink /proc/self/fd/1 >&2; readlink /proc/self/fd/2 >&2; "
        'echo \'{"type": "result", "result": "real"}\'; '
        "echo forged > /proc/self/fd/1; "
        "(setsid sh -c 'sleep 1; echo late > /proc/'$$'/fd/1' >/dev/null 2>&1 &); true"
    )
    res = run_process(["sh", "-c", script], cwd=tmp_path, env=ENV, stdout_path=out, tag="t-pipes/1")
    kinds = res.stderr_tail.split()
    assert kinds[0].startswith("pipe:[") and kinds[1].startswith("pipe:["), res.stderr_tail
    # the forged line went down the same pipe (it is in the record, after the real one: never instead)
    assert out.read_bytes() == b'{"type": "result", "result": "real"}\nforged\n'
    assert str(tmp_path) not in res.stderr_tail  # no file of the run folder behind either descriptor


def test_stdout_is_capped_and_the_truncation_said(tmp_path: Path) -> None:
    out = tmp_path / "stdout.json"
    res = run_process(
        ["sh", "-c", "head -c 300000 /dev/zero; echo oops >&2"],
        cwd=tmp_path,
        env=ENV,
        stdout_path=out,
        stdout_cap=1000,
        stderr_tail_bytes=64,
    )
    assert out.stat().st_size == 1000
    assert "ablate: stdout truncated: 299000 bytes past the first 1000 dropped" in res.stderr_tail
    assert res.stderr_tail.startswith("oops")


def test_stderr_keeps_its_tail_and_captured_stdout_is_returned(tmp_path: Path) -> None:
    res = run_process(["sh", "-c", "seq 1 5000 >&2; printf hi"], cwd=tmp_path, env=ENV, stderr_tail_bytes=10)
    assert res.stdout == b"hi" and res.stderr_tail == "4999\n5000\n"

"""Per-session limits (docs/ARCHITECTURE.md#limits): the ``--limit`` parse and its minimums, the runner's
pipe limits and watch, the forwarder's streamed request body, its flag on a session over the request limit
and its memory room."""

from __future__ import annotations

import http.client
import io
import json
import threading
import time
from pathlib import Path

import pytest

from ablate.core.errors import UsageError
from ablate.core.proc import run_process
from ablate.folder.limits import MINIMUMS, Limits, parse_limits, parse_size
from ablate.isolate.forwarder import Forwarder, _Room
from ablate.isolate.http1 import Head, Reader, Refused
from ablate.isolate.limits import SessionLimits, tree_size, with_mechanisms
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import invoke
from tests.test_forwarder import BODY, _control, _stream

ENV = {"PATH": "/usr/bin:/bin"}


def test_sizes_parse_in_binary_units_and_limits_over_their_defaults() -> None:
    assert [parse_size(t) for t in ("2GiB", "512M", "64k", "1048576", "1.5 MiB", "3b")] == [
        2 << 30, 512 << 20, 64 << 10, 1 << 20, 3 << 19, 3,
    ]  # fmt: skip
    got = parse_limits(["disk=4GiB", "processes=256", "forwarder-memory=64MiB"])
    assert (got.disk, got.processes, got.forwarder_memory, got.memory) == (4 << 30, 256, 64 << 20, 4 << 30)
    assert parse_limits([]) == Limits()
    mechanisms = with_mechanisms(Limits()).enforced_by
    assert set(mechanisms) == set(MINIMUMS)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("disk", "expected WHAT=SIZE"),
        ("cpu=2", "expected WHAT=SIZE with WHAT one of disk, memory"),
        ("disk=lots", "'lots' is not a size"),
        ("processes=1.5", "not a whole number of tasks"),
        ("disk=1MiB", "below 16MiB, the least a session needs to start"),
        ("memory=100M", "below 512MiB"),
        ("processes=10", "below 64"),
    ],
)
def test_a_limit_that_is_no_size_or_below_the_minimum_is_a_located_error(value: str, said: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_limits([value])
    assert f"--limit {value}: " in str(err.value) and said in str(err.value)


def test_the_cli_refuses_a_bad_limit_with_exit_2_before_anything_runs(tmp_path: Path) -> None:
    for cmd in ("run", "ab"):
        code, out = invoke([cmd, "--limit", "stdout=1k", "--tasks", str(tmp_path / "none")]).shown
        assert code == 2 and "--limit stdout=1k: below 64KiB" in out, out


@pytest.mark.parametrize("pipe", ["stdout", "stderr"])
def test_a_process_writing_past_a_pipe_limit_is_stopped(tmp_path: Path, pipe: str) -> None:
    redirect = ">&2" if pipe == "stderr" else ""
    script = f"head -c 3000000 /dev/zero {redirect}; sleep 30"
    start = time.monotonic()
    res = run_process(
        ["sh", "-c", script], cwd=tmp_path, env=ENV, pipe_limits=(1 << 20, 1 << 20), tag="t-lim/"
    )
    assert res.limit == pipe and time.monotonic() - start < 10
    quiet = run_process(["sh", "-c", "echo ok"], cwd=tmp_path, env=ENV, pipe_limits=(1 << 20, 1 << 20))
    assert quiet.limit is None and quiet.stdout == b"ok\n"


def test_the_watch_stops_a_session_whose_folder_grows_past_the_disk_limit(tmp_path: Path) -> None:
    (tmp_path / "old").write_bytes(b"x" * (1 << 20))  # there before the session: not counted
    lim = Limits(disk=2 << 20)
    guard = SessionLimits(lim, "t-disk", tmp_path, lambda: False)
    script = "head -c 1048576 /dev/zero > a; sleep 1; head -c 1048576 /dev/zero > b; sleep 30"
    res = run_process(["sh", "-c", script], cwd=tmp_path, env=ENV, watch=guard.check, preexec=guard.preexec)
    guard.close()
    assert res.limit == "disk", res
    assert tree_size(tmp_path) >= 3 << 20
    # one file past the limit is refused by RLIMIT_FSIZE itself
    guard = SessionLimits(lim, "t-fsize", tmp_path / "f", lambda: False)
    (tmp_path / "f").mkdir()
    res = run_process(["sh", "-c", "head -c 5000000 /dev/zero > f/big"], cwd=tmp_path, env=ENV,
                      watch=guard.check, preexec=guard.preexec)  # fmt: skip
    guard.close()
    assert (tmp_path / "f" / "big").stat().st_size == 2 << 20 and res.limit == "disk"


def test_the_reader_streams_a_body_into_its_sink_and_refuses_one_over_the_limit() -> None:
    import socket

    a, b = socket.socketpair()
    reader = Reader(a, idle_s=5, read_s=5)
    body = b"y" * 300_000
    threading.Thread(
        target=lambda: b.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)), daemon=True
    ).start()
    sink = io.BytesIO()
    head = Head("POST", "/v1/messages", "", [], None, False, False)
    assert reader.body(head, 1 << 20, sink) == len(body) and sink.getvalue() == body
    with pytest.raises(Refused) as refused:
        reader.body(Head("POST", "/", "", [], 5 << 20, False, False), 1 << 20, sink)
    assert refused.value.status == 413
    a.close()
    b.close()


def test_a_request_body_over_the_limit_is_refused_and_its_session_flagged(tmp_path: Path) -> None:
    fwd = Forwarder(body_limit=1 << 20)
    script = script_from_data({"default": {"text": "OK"}})
    try:
        with SimServer(script) as sim:
            token = fwd.ticket("sid-big")
            fwd.expect("sid-big", tmp_path / "w.jsonl", item="i", attempt=1)
            control, said = _control(fwd, token, sim.base_url)
            assert said == "ok\n"
            conn = http.client.HTTPConnection("relay")
            conn.sock = _stream(control)
            big = dict(BODY, messages=[{"role": "user", "content": "z" * 200_000}])  # spills to a file
            conn.request(
                "POST", "/v1/messages", body=json.dumps(big), headers={"content-type": "application/json"}
            )
            resp = conn.getresponse()
            assert resp.status == 200 and b"message_stop" in resp.read() and not fwd.over_limit("sid-big")
            (record,) = fwd.records("sid-big")
            assert record.messages == 1 and record.answer == "OK"
            fwd.expect("sid-big", None)
            conn.putrequest("POST", "/v1/messages")
            conn.putheader("Content-Length", str(2 << 20))
            conn.endheaders()  # refused on its head: the body is never read
            assert conn.getresponse().status == 413 and fwd.over_limit("sid-big")
            spooled = {p.name for p in fwd.socket_path.parent.iterdir()} - {
                "s",
                "seccomp.bpf",
                ".ablate-owner",
            }
            assert spooled == set()  # the spilled body's file went with its request
            control.close()
    finally:
        fwd.close()


def test_the_forwarders_memory_room_makes_a_taker_wait() -> None:
    room = _Room(10)
    order: list[str] = []

    def second() -> None:
        with room.held(5):
            order.append("second")

    with room.held(8):
        taker = threading.Thread(target=second)
        taker.start()
        time.sleep(0.2)
        order.append("first done")
    taker.join(5)
    assert order == ["first done", "second"] and room.used == 0
    with room.held(100):  # larger than the room: it waits for all of it
        assert room.used == 10

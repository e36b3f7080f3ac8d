"""What a session can send the model's API through its relay: raw bytes over a real TCP connection to the relay
(``relay.py``, its stream handed to a forwarder running in a process of its own, as in a run), one connection
per case. A request the forwarder cannot frame one way only, on a path the CLI does not use, or that stalls is
answered with its status (400, 404, 405, 408, 413, 431) and one log line on the forwarder's stderr, never a
traceback or a hang, and never reaches the endpoint; every model call that does reach it is on the wire. The
positive control: the same bytes sent straight to the endpoint (the sim) are served as model calls."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ablate.folder.wire import read_wire
from ablate.isolate import relay
from ablate.sim import SimServer, script_from_data
from tests.net_support import port_of

READ_S, IDLE_S, LIMIT = 1.0, 3.0, 4096
BODY = json.dumps(
    {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": [{"role": "user", "content": "hello"}]}
).encode()
FORWARDER = f"""
import json, sys
from ablate.isolate.forwarder import Forwarder
fwd = Forwarder(read_timeout_s={READ_S}, idle_timeout_s={IDLE_S}, body_limit={LIMIT})
token = fwd.ticket("hostile")
fwd.expect("hostile", __import__("pathlib").Path(sys.argv[1]), item="t__C0__r00", attempt=1)
print(json.dumps([str(fwd.socket_path), token]), flush=True)
sys.stdin.read()
"""
#: The relay's command: says where the relay listens, then waits.
SHOW = "import os, sys; print(os.environ['ANTHROPIC_BASE_URL'], flush=True); sys.stdin.read()"


def post(
    path: str = "/v1/messages?beta=true", *, headers: str = "", body: bytes = BODY, close: bool = True
) -> bytes:
    framing = headers or f"Content-Length: {len(body)}\r\n"
    last = "Connection: close\r\n" if close else ""
    return f"POST {path} HTTP/1.1\r\nHost: x\r\n{framing}{last}\r\n".encode() + body


def chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


SMUGGLED = post(close=False)  # a whole model call hidden in the first one's body
#: case → (the bytes, the statuses answered, what the log line says; "" for none)
CASES: dict[str, tuple[bytes, list[int], str]] = {
    # positive controls: well-framed requests on the CLI's paths are forwarded (and the model calls recorded)
    "one call": (post(), [200], ""),
    "chunked call": (post(headers="Transfer-Encoding: chunked\r\n", body=chunked(BODY)), [200], ""),
    "pipelined calls": (post(close=False) + post(), [200, 200], ""),
    "hello": (b"HEAD /api/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", [200], ""),
    "count_tokens": (post("/v1/messages/count_tokens"), [200], ""),
    "idle, then nothing": (b"", [], ""),
    # ambiguous framing
    "bad Content-Length": (post(headers="Content-Length: 1x\r\n"), [400], "bad Content-Length"),
    "negative Content-Length": (post(headers="Content-Length: -1\r\n"), [400], "bad Content-Length"),
    "duplicate Content-Length": (
        post(headers=f"Content-Length: {len(BODY)}\r\nContent-Length: {len(BODY) + len(SMUGGLED)}\r\n", body=BODY + SMUGGLED),
        [400], "more than one content-length header",
    ),
    "Content-Length, comma list": (post(headers=f"Content-Length: {len(BODY)}, {len(BODY)}\r\n"), [400], "bad Content-Length"),
    "Transfer-Encoding with Content-Length": (
        post(headers=f"Content-Length: {len(BODY) + 5}\r\nTransfer-Encoding: chunked\r\n", body=chunked(BODY) + SMUGGLED),
        [400], "both Transfer-Encoding and Content-Length",
    ),
    "Transfer-Encoding gzip": (post(headers="Transfer-Encoding: gzip\r\n"), [400], "only chunked is read"),
    "bad chunk size": (post(headers="Transfer-Encoding: chunked\r\n", body=b"zz\r\n" + BODY), [400], "bad chunk size"),
    "negative chunk size": (post(headers="Transfer-Encoding: chunked\r\n", body=b"-1\r\n"), [400], "bad chunk size"),
    "chunk without CRLF": (
        post(headers="Transfer-Encoding: chunked\r\n", body=b"%x\r\n%sXX0\r\n\r\n" % (len(BODY), BODY)),
        [400], "chunk data not followed by CRLF",
    ),
    "bare CR": (b"POST /v1/messages HTTP/1.1\r\nHost: x\rX-Y: z\r\nContent-Length: 0\r\n\r\n", [400], "bare CR or LF"),
    "bare LF": (b"POST /v1/messages HTTP/1.1\nHost: x\n\n", [400], "bare CR or LF"),
    "folded header": (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n  folded\r\n\r\n", [400], "malformed header line"),
    "space before colon": (b"POST /v1/messages HTTP/1.1\r\nHost : x\r\n\r\n", [400], "malformed header line"),
    "no Host": (b"POST /v1/messages HTTP/1.1\r\nContent-Length: 0\r\n\r\n", [400], "no Host header"),
    "two Hosts": (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", [400], "more than one host header"),
    "HTTP/0.9": (b"GET /v1/messages\r\n", [400], "not an HTTP/1.1 request line"),
    "HTTP/1.0": (b"POST /v1/messages HTTP/1.0\r\nHost: x\r\n\r\n", [400], "not an HTTP/1.1 request line"),
    # model calls on paths or in forms the endpoint may read as /v1/messages
    "absolute form": (post("http://127.0.0.1/v1/messages"), [400], "not origin-form"),
    "trailing slash": (post("/v1/messages/"), [404], "none of the API paths"),
    "fragment": (post("/v1/messages#x"), [400], "not origin-form"),
    "percent-encoded": (post("/v1/%6Dessages"), [404], "none of the API paths"),
    "double slash": (post("//v1/messages"), [404], "none of the API paths"),
    "another path": (post("/v1/complete"), [404], "none of the API paths"),
    "another method": (b"GET /v1/messages HTTP/1.1\r\nHost: x\r\n\r\n", [405], "only POST"),
    "first well, then smuggled": (post(close=False) + post(headers="Content-Length: -1\r\n"), [200, 400], "bad Content-Length"),
    # sizes and stalls
    "body over the limit": (post(body=b"x" * (LIMIT + 1)), [413], "over the limit of 4096"),
    "chunked body over the limit": (
        post(headers="Transfer-Encoding: chunked\r\n", body=(b"800\r\n" + b"x" * 2048 + b"\r\n") * 3),
        [413], "over the limit of 4096 bytes",
    ),
    "head over the limit": (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 70000, [431], "request head over"),
    "half a head, stalled": (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Le", [408], "no byte for 1 s"),
    "half a body, stalled": (post(headers=f"Content-Length: {len(BODY)}\r\n", body=BODY[:10]) , [408], "no byte for 1 s"),
}  # fmt: skip


@dataclass
class Relayed:
    port: int
    wire: Path
    stderr: Path


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(script_from_data({"default": {"text": "OK"}, "rules": []})) as server:
        yield server


@pytest.fixture
def relayed(sim: SimServer, tmp_path: Path) -> Iterator[Relayed]:
    """A forwarder in a process of its own (its stderr kept) and a relay on a loopback port in front of it."""
    stderr = tmp_path / "forwarder.err"
    with stderr.open("wb") as err:
        fwd = subprocess.Popen(
            [sys.executable, "-c", FORWARDER, str(tmp_path / "wire.jsonl")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    assert fwd.stdout is not None and fwd.stdin is not None
    path, token = json.loads(fwd.stdout.readline())
    control = socket.socket(socket.AF_UNIX)
    control.connect(path)
    control.sendall(f"{token} {sim.base_url}\n".encode())
    assert control.recv(3) == b"ok\n"
    fd = control.fileno()
    show = subprocess.Popen(
        [sys.executable, "-I", relay.__file__, str(fd), "--", sys.executable, "-c", SHOW],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        pass_fds=(fd,),
        env={"PATH": "/usr/bin:/bin"},
    )
    control.close()
    assert show.stdout is not None and show.stdin is not None
    try:
        yield Relayed(port_of(show.stdout.readline().decode().strip()), tmp_path / "wire.jsonl", stderr)
    finally:
        for proc in (show, fwd):
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)


def exchange(port: int, data: bytes, *, wait_s: float = 15.0) -> tuple[list[int], float]:
    """Send ``data`` on a fresh connection to 127.0.0.1:``port`` and read until the other side closes: the
    statuses answered, and the seconds it took."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as conn:
        conn.sendall(data)
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
    statuses = [int(s) for s in re.findall(rb"HTTP/1\.1 (\d{3}) ", got)]
    return statuses, time.monotonic() - start


def served(sim: SimServer) -> int:
    """The model calls the sim answered (whatever path or form it read as ``/v1/messages``)."""
    return sum(
        1 for r in sim.requests() if r.rule not in ("count_tokens", "not_found", "bad_request", "hello")
    )


def test_the_forwarder_refuses_every_ambiguous_request_and_records_every_model_call(
    relayed: Relayed, sim: SimServer
) -> None:
    answered = {}
    for case, (data, _statuses, _why) in CASES.items():
        statuses, took = exchange(relayed.port, data)
        answered[case] = statuses
        stalls = "stalled" in case or case == "idle, then nothing"
        assert took < (IDLE_S if stalls else READ_S) + 5, (case, took)  # answered, never left to hang
    assert answered == {case: statuses for case, (_d, statuses, _w) in CASES.items()}
    # one line per refused request on the forwarder's stderr, in order, and nothing else
    lines = relayed.stderr.read_text().splitlines()
    said = [why for _d, _s, why in CASES.values() if why]
    assert len(lines) == len(said), lines
    for line, why in zip(lines, said, strict=True):
        assert line.startswith("ablate forwarder: session hostile: ") and why in line, (line, why)
    # every model call the endpoint served is on the wire, and only the well-framed ones reached it
    wire = list(read_wire(relayed.wire))
    assert len(wire) == served(sim) == 1 + 1 + 2 + 1  # one, chunked, pipelined ×2, first of the smuggled
    assert all(r.status == 200 and r.answer == "OK" and r.session_id == "hostile" for r in wire)
    assert [r.path for r in sim.requests()] == [
        "/v1/messages", "/v1/messages", "/v1/messages", "/v1/messages", "/api/hello",
        "/v1/messages/count_tokens", "/v1/messages",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "case",
    ["duplicate Content-Length", "Transfer-Encoding with Content-Length", "absolute form", "trailing slash"],
)
def test_positive_control_the_endpoint_alone_serves_the_same_bytes_as_model_calls(
    sim: SimServer, case: str
) -> None:
    """Straight to the endpoint, what the forwarder refuses is answered: smuggled calls the forwarder would
    not have recorded, so refusing them is what keeps the wire's count the endpoint's."""
    data = CASES[case][0]
    statuses, _took = exchange(port_of(sim.base_url), data)
    assert statuses and statuses[0] == 200, (case, statuses)
    assert served(sim) >= 1

"""The seal's parts without the CLI (the seccomp filter: tests/test_kernel_seal.py): the forwarder against the
sim (what it relays and what it records in ``wire/``), the relay handed its stream as fd 3, and how a result
uses the wire where the transcript disagrees."""

from __future__ import annotations

import array
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ablate.folder.wire import WireRecord, read_wire, wire_check, wire_flags, wire_totals
from ablate.isolate import relay
from ablate.isolate.forwarder import Forwarder, digest, wire_record
from ablate.sim import SimServer, script_from_data
from tests.net_support import carry, port_of, serve

SCRIPT = {"default": {"text": "OK"}, "rules": []}
BODY = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 10,
    "stream": True,
    "system": [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=1; cch=abc\nYou are Claude."}
    ],
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": "hello"}],
}


@pytest.fixture
def forwarder() -> Iterator[Forwarder]:
    fwd = Forwarder()
    try:
        yield fwd
    finally:
        fwd.close()


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(script_from_data(SCRIPT)) as server:
        yield server


def _control(fwd: Forwarder, token: str, upstream: str) -> tuple[socket.socket, str]:
    c = socket.socket(socket.AF_UNIX)
    c.connect(str(fwd.socket_path))
    c.sendall(f"{token} {upstream}\n".encode())
    return c, c.recv(200).decode()


def _stream(control: socket.socket) -> socket.socket:
    control.sendall(b"n")
    fds = array.array("i")
    _msg, anc, _flags, _addr = control.recvmsg(1, socket.CMSG_LEN(4))
    fds.frombytes(anc[0][2])
    return socket.socket(fileno=fds[0])


def test_forwarder_relays_every_request_and_records_the_messages(
    forwarder: Forwarder, sim: SimServer, tmp_path: Path
) -> None:
    wire = tmp_path / "wire" / "t__C0__r00.jsonl"
    token = forwarder.ticket("sid-1")
    forwarder.expect("sid-1", wire, item="t__C0__r00", attempt=1)
    control, said = _control(forwarder, token, sim.base_url + "/")
    assert said == "ok\n"
    conn = http.client.HTTPConnection("relay")
    conn.sock = _stream(control)
    conn.request("HEAD", "/api/hello")  # the CLI's reachability check: no body, the stream stays usable
    head = conn.getresponse()
    head.read()
    for _ in range(2):  # two requests on one kept-alive stream
        conn.request(
            "POST", "/v1/messages", body=json.dumps(BODY), headers={"content-type": "application/json"}
        )
        resp = conn.getresponse()
        assert resp.status == 200 and b"message_stop" in resp.read()
    records = forwarder.records("sid-1")
    assert [r.model_dump(include={"item", "attempt", "session_id", "status", "answer"}) for r in records] == [
        {"item": "t__C0__r00", "attempt": 1, "session_id": "sid-1", "status": 200, "answer": "OK"}
    ] * 2
    assert records[0].usage["output_tokens"] >= 1 and records[0].stop_reason == "end_turn"
    assert records[0].tools_sha256 == digest(BODY["tools"]) and records[0].system_sha256
    assert list(read_wire(wire)) == records  # the file holds what was kept in memory
    # the ticket is spent: a second session presenting it gets nothing
    again, said = _control(forwarder, token, sim.base_url)
    assert said == ""
    again.close()
    control.close()


def test_forwarder_refuses_an_upstream_that_is_no_url(forwarder: Forwarder) -> None:
    control, said = _control(forwarder, forwarder.ticket("s"), "ftp://x")
    assert said.startswith("no: ") and "not an http(s) URL" in said
    control.close()


def test_the_system_digest_ignores_the_billing_header_only() -> None:
    other = json.loads(json.dumps(BODY["system"]).replace("cch=abc", "cch=def"))
    assert digest(other) == digest(BODY["system"])
    changed = json.loads(json.dumps(BODY["system"]).replace("You are Claude.", "You are Claude!"))
    assert digest(changed) != digest(BODY["system"])
    assert digest(None) is None


def test_a_json_answer_and_an_error_are_recorded() -> None:
    answer = {"model": "m", "content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 3}}
    rec = wire_record(orjson.dumps({**BODY, "stream": False}), 200, orjson.dumps(answer), "application/json")
    assert (rec.answer, rec.usage, rec.answer_model, rec.stream) == ("hi", {"input_tokens": 3}, "m", False)
    err = wire_record(b"{}", 529, b'{"type":"error","error":{"type":"overloaded_error"}}', "application/json")
    assert (err.status, err.error, err.answer) == (529, "overloaded_error", None)


def test_the_relay_points_the_command_at_itself_and_carries_its_requests(
    forwarder: Forwarder, sim: SimServer
) -> None:
    token = forwarder.ticket("sid-r")
    forwarder.expect("sid-r", None)
    control, said = _control(forwarder, token, sim.base_url)
    assert said == "ok\n"
    fd = os.dup(control.fileno())
    control.close()
    probe = (
        "import json, os, urllib.request\n"
        "url = os.environ['ANTHROPIC_BASE_URL']\n"
        "req = urllib.request.Request(url + '/v1/messages', data=os.environ['BODY'].encode(), method='POST')\n"
        "print(url, urllib.request.urlopen(req, timeout=30).status, os.environ['NO_PROXY'])\n"
    )
    env = {"PATH": os.environ["PATH"], "BODY": json.dumps(BODY), "NO_PROXY": "example.com"}
    argv = [sys.executable, "-I", relay.__file__, str(fd), "--", sys.executable, "-c", probe]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, pass_fds=(fd,))
    os.close(fd)
    url, status, no_proxy = proc.stdout.split()
    assert url.startswith("http://127.0.0.1:") and status == "200", proc.stderr
    assert no_proxy == "127.0.0.1,example.com"
    assert [r.answer for r in forwarder.records("sid-r")] == ["OK"]


def test_wire_check_names_what_the_transcript_says_otherwise() -> None:
    recs = [
        WireRecord(
            at=1, status=200, model="claude-sonnet-4-6", usage={"input_tokens": 10, "output_tokens": 5}
        ),
        WireRecord(at=2, status=200, model="claude-sonnet-4-6", usage={"output_tokens": 7}, answer="done"),
    ]
    same = wire_check(recs, {"input_tokens": 10, "output_tokens": 12, "api_calls": 2}, "done")
    assert same.differs == [] and same.requests == same.answered == 2 and same.cost_usd and same.cost_usd > 0
    assert wire_flags(same) == [] and wire_flags(None) == []
    forged = wire_check(recs, {"input_tokens": 1, "output_tokens": 12, "api_calls": 3}, "all tests pass")
    assert forged.differs == [
        "input_tokens: transcript 1, wire 10",
        "model calls: transcript 3, wire 2",
        "answer: the CLI's final answer is not the last answer on the wire",
    ]
    assert wire_flags(forged) == ["transcript-differs-from-wire"]
    # a refused request (an overload the CLI retried) crossed the wire but is no model call of the transcript
    retried = [WireRecord(at=0, status=529, error="overloaded_error"), *recs]
    again = wire_check(retried, {"input_tokens": 10, "output_tokens": 12, "api_calls": 2}, "done")
    assert (again.requests, again.answered, again.differs) == (3, 2, [])
    assert wire_totals([]).requests == 0 and wire_check([], {"input_tokens": 1}, "x").differs == []


def test_the_report_names_the_host_network_and_the_sessions_the_wire_contradicts(tmp_path: Path) -> None:
    from ablate.folder.layout import IsolationInfo, RunFolder, read_manifest, write_manifest
    from ablate.report.sections import build_report
    from tests.report_support import Outcome, make_run

    run = make_run(
        tmp_path / "run",
        cells={"C0": [], "C1": ["runbooks"]},
        tasks=["greet"],
        repeats=2,
        outcome=lambda task, cell, repeat: Outcome(pitfall=False, turns=3, tool_calls=1, cost=0.01),
    )
    folder = RunFolder(run)

    def caveats(**isolation: object) -> dict[str, str]:
        info = IsolationInfo.model_validate({"backend": "namespace", **isolation})
        write_manifest(folder, read_manifest(folder).model_copy(update={"isolation": info}))
        return {c.id: c.text for c in build_report(run).caveats}

    sealed = caveats(network="sealed")
    assert "network" not in sealed and "wire-differs" not in sealed
    assert "a tool that needs a host service (ssh-agent, gpg-agent" in sealed["isolation"]
    host = caveats(network="host", wire_differs={"greet__C1__r00": ["output_tokens: transcript 9, wire 4"]})
    assert "--allow-network" in host["network"]
    assert "greet__C1__r00 (output_tokens: transcript 9, wire 4)" in host["wire-differs"]
    unsealed = caveats(network="unsealed", reason="links — NOT fenced: bubblewrap (bwrap) is not installed")
    assert next(iter(unsealed)) == "unsealed" and "network" not in unsealed  # said first, once
    assert unsealed["unsealed"].startswith("UNSEALED: sessions ran with --unsealed")
    assert "bubblewrap (bwrap) is not installed" in unsealed["unsealed"]
    assert "the host's network" in unsealed["unsealed"] and "--allow-unsealed" in unsealed["unsealed"]


def test_a_loopback_endpoint_keeps_its_url_inside_and_others_are_refused_up_front(
    forwarder: Forwarder, sim: SimServer
) -> None:
    from ablate.isolate.seal import unreachable_when_sealed

    # the relay listens on the endpoint's own port where it is free (here: another free port stands for it)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    control, said = _control(forwarder, forwarder.ticket("sid-p"), sim.base_url)
    assert said == "ok\n"
    fd = os.dup(control.fileno())
    control.close()
    env = {"PATH": os.environ["PATH"], "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{free}"}
    show = "import os; print(os.environ['ANTHROPIC_BASE_URL'])"
    argv = [sys.executable, "-I", relay.__file__, str(fd), "--", sys.executable, "-c", show]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, pass_fds=(fd,))
    os.close(fd)
    assert proc.stdout.strip() == f"http://127.0.0.1:{free}", proc.stderr
    # what a sealed session could not reach: a provider's cloud, a settings env endpoint that is not loopback
    assert (
        unreachable_when_sealed({}, {"/c/settings.json:env.ANTHROPIC_BASE_URL": "http://127.0.0.1:8080"})
        == []
    )
    why = unreachable_when_sealed(
        {"CLAUDE_CODE_USE_BEDROCK": "1"}, {"/c/settings.json:env.ANTHROPIC_BASE_URL": "https://gw.example"}
    )
    assert why == [
        "CLAUDE_CODE_USE_BEDROCK is set: the CLI talks to that cloud directly",
        "/c/settings.json: env.ANTHROPIC_BASE_URL = https://gw.example replaces the relay's URL",
    ]


def test_a_forwarder_killed_with_9_leaves_nothing_after_the_next_commands_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process running a forwarder dies by SIGKILL: its folder (socket, filter) is an owned work folder, so
    the sweep every command starts with removes it at once; a live forwarder's folder stays."""
    import signal
    import tempfile

    from ablate.core.tempwork import sweep

    code = (
        "import os, signal\n"
        "from ablate.isolate.forwarder import Forwarder\n"
        "Forwarder()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == -signal.SIGKILL
    (dead,) = tmp_path.glob("ablate-fwd-*")
    assert (dead / "s").exists()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    live = Forwarder()
    try:
        assert sweep(tmp_path) == [dead]
        assert not dead.exists() and live.socket_path.exists()
    finally:
        live.close()


class _TlsFront:
    """A TLS endpoint on 127.0.0.1 in front of ``sim`` (plain http), with a self-signed certificate for that
    address: a remote API endpoint as the forwarder meets it."""

    def __init__(self, sim: SimServer, folder: Path) -> None:
        self.cert, key = folder / "cert.pem", folder / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(self.cert)],
            check=True, capture_output=True,
        )  # fmt: skip
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(self.cert, key)
        self.port = port_of(sim.base_url)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.sock.getsockname()[1]}"
        serve(self.sock, self._one)

    def _one(self, conn: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(conn, server_side=True)
        except OSError:  # a client that does not trust the certificate hangs up in the handshake
            conn.close()
            return
        carry(tls, self.port)

    def close(self) -> None:
        self.sock.close()


def test_the_forwarder_reaches_a_remote_endpoint_over_verified_tls(
    forwarder: Forwarder, sim: SimServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An https upstream is reached over TLS, its certificate verified against the system's trust store
    (here extended by SSL_CERT_FILE): a certificate nobody vouches for is a 502, never a plain fallback."""
    front = _TlsFront(sim, tmp_path)
    try:
        for trusted in (False, True):
            if trusted:
                monkeypatch.setenv("SSL_CERT_FILE", str(front.cert))
            token = forwarder.ticket(f"tls-{trusted}")
            forwarder.expect(f"tls-{trusted}", tmp_path / f"w{trusted}.jsonl", item="t__C0__r00", attempt=1)
            control, said = _control(forwarder, token, front.url)
            assert said == "ok\n"
            conn = http.client.HTTPConnection("relay")
            conn.sock = _stream(control)
            conn.request(
                "POST", "/v1/messages", body=json.dumps(BODY), headers={"content-type": "application/json"}
            )
            resp = conn.getresponse()
            answer = resp.read()
            if trusted:
                assert resp.status == 200 and b"message_stop" in answer
                (record,) = forwarder.records(f"tls-{trusted}")
                assert record.status == 200 and record.answer == "OK"
            else:
                assert resp.status == 502 and b"CERTIFICATE_VERIFY_FAILED" in answer, answer
            control.close()
    finally:
        front.close()


def test_the_forwarder_notes_when_a_relay_ends_and_an_early_end_flags_the_session(
    forwarder: Forwarder, sim: SimServer
) -> None:
    from ablate.folder.wire import relay_flags

    forwarder.expect("sid-end", None, item="x", attempt=1)
    control, said = _control(forwarder, forwarder.ticket("sid-end"), sim.base_url)
    assert said == "ok\n" and forwarder.relay_ended_at("sid-end") is None  # running
    before = time.monotonic()
    control.close()  # the relay ends (killed, or with its session)
    deadline = time.monotonic() + 10
    while forwarder.relay_ended_at("sid-end") is None and time.monotonic() < deadline:
        time.sleep(0.01)
    ended = forwarder.relay_ended_at("sid-end")
    assert ended is not None and ended >= before
    assert relay_flags(ended, ended + 0.002) == []  # with its session: the namespace's teardown
    assert relay_flags(ended, ended + 2.1) == ["relay-died"]  # seconds before its CLI: killed
    assert relay_flags(None, ended) == []

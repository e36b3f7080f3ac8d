"""The simulated Anthropic Messages endpoint: an HTTP server on 127.0.0.1 in a background thread.

It answers ``POST /v1/messages`` (streaming SSE or JSON) and ``POST /v1/messages/count_tokens``, and records
every request as one JSONL line (written and flushed under a lock, so the log is readable while it grows)."""

from __future__ import annotations

import errno
import http.server
import itertools
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import urlsplit

import orjson

from ablate.core.errors import UsageError
from ablate.core.jsonl import json_lines
from ablate.sim.engine import (
    Decision,
    RequestView,
    Responder,
    assistant_turns,
    error_body,
    estimate_tokens,
    request_text,
)
from ablate.sim.script import Script, load_script
from ablate.sim.sse import message_events

HOST = "127.0.0.1"
HELLO_PATH = "/api/hello"
LOG_SCHEMA_VERSION = 1

#: Request headers kept in the log (lower-case). Credentials are never logged, only which kind was sent.
LOGGED_HEADERS = (
    "x-claude-code-session-id", "x-ablate-session-id", "anthropic-version", "anthropic-beta", "user-agent",
    "x-app", "x-stainless-retry-count", "x-stainless-timeout", "content-type",
)  # fmt: skip


class PortInUse(UsageError):
    """The port asked for is already in use: pick another one, or 0 to let the OS choose."""


@dataclass(frozen=True)
class CapturedRequest:
    """One logged request."""

    seq: int
    time: str
    method: str
    path: str
    headers: dict[str, str]
    session_id: str | None
    turn: int | None
    """Assistant messages already in the request (None when the body is not a Messages request)."""
    rule: str
    """The rule that answered, ``default``, or ``count_tokens`` / ``not_found`` / ``bad_request``."""
    status: int
    stream: bool
    message_id: str | None
    model: str | None
    auth: str | None
    """Which credential kinds the client sent: ``x-api-key``, ``bearer``, both joined by ``+``, or None.
    The values are never logged."""
    body: Any
    record: dict[str, Any] = field(repr=False, compare=False)

    @property
    def text(self) -> str:
        """All text of the request (system + messages + tools); empty when the body is not a JSON object."""
        return request_text(self.body) if isinstance(self.body, dict) else ""

    @property
    def is_messages(self) -> bool:
        """A ``POST /v1/messages`` (the model calls; count_tokens and unknown paths excluded)."""
        return self.method == "POST" and self.path == "/v1/messages"

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> CapturedRequest:
        text: dict[str, Any] = {k: str(rec.get(k, "")) for k in ("time", "method", "path", "rule")}
        kept: dict[str, Any] = {
            k: rec.get(k) for k in ("session_id", "turn", "message_id", "model", "auth", "body")
        }
        return cls(
            seq=int(rec["seq"]),
            headers=dict(rec.get("headers") or {}),
            status=int(rec.get("status", 0)),
            stream=bool(rec.get("stream", False)),
            record=rec,
            **text,
            **kept,
        )


def iter_requests(log_path: Path) -> Iterator[CapturedRequest]:
    """Stream the requests of a sim log, in order. A torn last line (a log still being written) is skipped."""
    for rec in json_lines(log_path):
        if isinstance(rec, dict) and "seq" in rec:
            yield CapturedRequest.from_record(rec)


class _RequestLog:
    """Appends one JSON line per request, flushed, under a lock; in memory when there is no file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._memory: list[dict[str, Any]] = []
        self._fh: IO[bytes] | None = None
        start = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists():
                with path.open("rb") as fh:
                    start = sum(1 for line in fh if line.strip())
            self._fh = path.open("ab")
        self._seq = itertools.count(start + 1)

    def next_seq(self) -> int:
        with self._lock:
            return next(self._seq)

    def write(self, record: dict[str, Any]) -> None:
        line = orjson.dumps(record) + b"\n"
        with self._lock:
            if self.path is None:
                self._memory.append(record)
            elif self._fh is not None:
                self._fh.write(line)
                self._fh.flush()

    def records(self) -> list[CapturedRequest]:
        if self.path is None:
            with self._lock:
                return [CapturedRequest.from_record(r) for r in self._memory]
        return list(iter_requests(self.path))

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive connections must not hold up shutdown
    request_queue_size = 64  # sessions, probes and a judge connect at once (socketserver's default is 5)

    def __init__(self, port: int, responder: Responder, log: _RequestLog, api_key: str | None = None) -> None:
        self.responder = responder
        self.log = log
        self.api_key = api_key
        self.errors: list[str] = []
        super().__init__((HOST, port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-request is normal; anything else is kept (bounded), never printed."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            return
        if len(self.errors) < 100:
            self.errors.append(f"{type(exc).__name__}: {exc}")


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "ablate-sim"
    sys_version = ""
    timeout = 120  # an idle keep-alive connection is dropped after this
    disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms delayed-ACK stalls)

    def log_message(self, format: str, *args: Any) -> None:
        """Library code never prints: the JSONL log is the record."""

    # -- plumbing ---------------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _auth(self) -> str | None:
        kinds = []
        if self.headers.get("x-api-key"):
            kinds.append("x-api-key")
        if self.headers.get("Authorization", "").lower().startswith("bearer "):
            kinds.append("bearer")
        return "+".join(kinds) or None

    def _common_headers(self, seq: int) -> None:
        self.send_header("request-id", f"req_sim_{seq:08d}")
        self.send_header("anthropic-organization-id", "00000000-0000-4000-8000-00000000a51e")

    def _ratelimit_headers(self, remaining: int) -> None:
        reset = (datetime.now(UTC) + timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.send_header("anthropic-ratelimit-requests-limit", "4000")
        self.send_header("anthropic-ratelimit-requests-remaining", str(remaining))
        self.send_header("anthropic-ratelimit-requests-reset", reset)
        self.send_header("anthropic-ratelimit-tokens-limit", "2000000")
        self.send_header("anthropic-ratelimit-tokens-remaining", str(2_000_000 if remaining else 0))
        self.send_header("anthropic-ratelimit-tokens-reset", reset)

    def _send(
        self,
        status: int,
        data: bytes,
        seq: int,
        extra: Mapping[str, str] | None = None,
        *,
        ratelimit_remaining: int | None = None,
        content_type: str | None = "application/json",
    ) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self._common_headers(seq)
        if ratelimit_remaining is not None:
            self._ratelimit_headers(ratelimit_remaining)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _session_id(self) -> str | None:
        """Claude Code's session header, else ``x-ablate-session-id`` (ablate's own SDK clients send it)."""
        return self.headers.get("x-claude-code-session-id") or self.headers.get("x-ablate-session-id")

    def _record(self, seq: int, **fields: Any) -> dict[str, Any]:
        path = urlsplit(self.path)
        rec: dict[str, Any] = {
            "schema_version": LOG_SCHEMA_VERSION,
            "seq": seq,
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "method": self.command,
            "path": path.path,
            "query": path.query,
            "headers": {k: v for k in LOGGED_HEADERS if (v := self.headers.get(k)) is not None},
            "session_id": self._session_id(),
            "auth": self._auth(),
        }
        rec.update(fields)
        return rec

    # -- verbs ------------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if urlsplit(self.path).path == HELLO_PATH:
            self._hello(head=False)
        else:
            self._not_found(b"")

    def do_HEAD(self) -> None:
        self._hello(head=True)

    def _hello(self, *, head: bool) -> None:
        """The CLI's start-up ``HEAD /api/hello``: 200 like the real API; any other path an empty 404."""
        hello = urlsplit(self.path).path == HELLO_PATH
        rule, status = ("hello", 200) if hello else ("not_found", 404)
        seq = self.server.log.next_seq()
        self.server.log.write(self._record(seq, rule=rule, status=status, stream=False, body=None))
        data = b"" if head else orjson.dumps({"message": "hello"})
        self._send(status, data, seq, content_type="application/json" if hello else None)

    def _other_verb(self) -> None:
        self._not_found(self._read_body())

    do_PUT = do_DELETE = do_PATCH = _other_verb

    def do_POST(self) -> None:
        raw = self._read_body()
        path = urlsplit(self.path).path.rstrip("/")
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            self._not_found(raw)
            return
        seq = self.server.log.next_seq()
        sent = (self.headers.get("x-api-key"), self.headers.get("Authorization", "").removeprefix("Bearer "))
        if self.server.api_key is not None and self.server.api_key not in sent:
            self._refuse(seq, 401, "unauthorized", "authentication_error", "invalid x-api-key")
            return
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError as exc:
            body = None
            problem = f"request body is not valid JSON: {exc}"
        else:
            problem = "" if isinstance(body, dict) else "request body must be a JSON object"
        if problem:
            self._refuse(
                seq, 400, "bad_request", "invalid_request_error", problem, raw.decode("utf-8", "replace")
            )
            return
        assert isinstance(body, dict)
        if path.endswith("/count_tokens"):
            self.server.log.write(
                self._record(
                    seq, rule="count_tokens", status=200, stream=False, turn=assistant_turns(body),
                    model=body.get("model"), body=body,
                )
            )  # fmt: skip
            self._send(200, orjson.dumps({"input_tokens": estimate_tokens(request_text(body))}), seq)
            return
        self._messages(seq, body)

    def _not_found(self, raw: bytes) -> None:
        seq = self.server.log.next_seq()
        body: Any
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        said = f"{self.command} {urlsplit(self.path).path}: not found"
        self._refuse(seq, 404, "not_found", "not_found_error", said, body)

    def _refuse(self, seq: int, status: int, rule: str, kind: str, message: str, body: Any = None) -> None:
        """Log the request as answered by ``rule`` and send the API's JSON error of ``kind``."""
        self.server.log.write(self._record(seq, rule=rule, status=status, stream=False, body=body))
        self._send(status, orjson.dumps({"type": "error", "error": {"type": kind, "message": message}}), seq)

    def _messages(self, seq: int, body: dict[str, Any]) -> None:
        responder = self.server.responder
        view = RequestView(body=body, session_id=self._session_id())
        decision: Decision = responder.decide(view)
        answer = decision.answer
        stream = bool(body.get("stream"))
        message = None if answer.error is not None else responder.message(view, decision)
        status = answer.error.status if answer.error is not None else 200
        self.server.log.write(
            self._record(
                seq,
                rule=decision.rule,
                status=status,
                stream=stream,
                turn=view.turn,
                model=view.model,
                message_id=message["id"] if message else None,
                tool_use=[b["name"] for b in message["content"] if b["type"] == "tool_use"]
                if message
                else [],
                body=body,
            )
        )
        try:
            if answer.delay_s:
                time.sleep(answer.delay_s)
            if answer.error is not None:
                extra: dict[str, str] = {}
                if answer.error.status in (429, 529) and answer.error.retry_after is not None:
                    extra["retry-after"] = str(answer.error.retry_after)
                remaining = 0 if answer.error.status == 429 else None
                self._send(
                    status, orjson.dumps(error_body(answer.error)), seq, extra, ratelimit_remaining=remaining
                )
                return
            assert message is not None
            if not stream:
                self._send(200, orjson.dumps(message), seq, ratelimit_remaining=3999)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self._common_headers(seq)
            self._ratelimit_headers(3999)
            self.end_headers()
            for i, chunk in enumerate(message_events(message)):
                if i and answer.chunk_delay_s:
                    time.sleep(answer.chunk_delay_s)
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class SimServer:
    """The simulated endpoint, served from a thread while the context is open. ``script``: a file, a
    :class:`Script` or None (capture mode); ``log_path`` None: kept in memory; ``port=0``: the OS chooses;
    ``api_key``: the one credential accepted (any other gets the API's 401)."""

    def __init__(
        self,
        script: Script | Path | str | None = None,
        *,
        log_path: Path | str | None = None,
        seed: int = 0,
        port: int = 0,
        api_key: str | None = None,
    ) -> None:
        self.api_key = api_key
        if script is None:
            script = Script()
        elif not isinstance(script, Script):
            script = load_script(Path(script))
        self.script = script
        self.seed = seed
        self.log_path = Path(log_path) if log_path is not None else None
        self._requested_port = port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._log: _RequestLog | None = None
        self._errors: list[str] = []

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> SimServer:
        """Bind 127.0.0.1 and start serving; returns self."""
        if self._httpd is not None:
            return self
        log = _RequestLog(self.log_path)
        try:
            httpd = _HTTPServer(self._requested_port, Responder(self.script, self.seed), log, self.api_key)
        except OSError as exc:
            log.close()
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(
                    f"port {self._requested_port} on {HOST} is already in use",
                    hint="pass another --port, or --port 0 to let the OS choose a free one",
                ) from exc
            raise UsageError(
                f"cannot listen on {HOST}:{self._requested_port}: {exc.strerror or exc}"
            ) from exc
        self._log = log
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"ablate-sim:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the log. Safe to call twice."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._log is not None:
            self._log.close()
        self._errors = list(self._httpd.errors)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- what tests and the probe use -------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the sim server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The value for ``ANTHROPIC_BASE_URL``."""
        return f"http://{HOST}:{self.port}"

    def requests(self) -> list[CapturedRequest]:
        """Every request received so far, in order (read back from the log file when there is one)."""
        if self._log is not None:
            return self._log.records()
        return list(iter_requests(self.log_path)) if self.log_path and self.log_path.exists() else []

    @property
    def errors(self) -> list[str]:
        """Unexpected exceptions in request handlers (a bug in the sim, never a client hanging up)."""
        return list(self._httpd.errors) if self._httpd is not None else list(self._errors)

    def messages_requests(self) -> list[CapturedRequest]:
        """Only the ``POST /v1/messages`` requests (the model calls)."""
        return [r for r in self.requests() if r.is_messages]

"""The forwarder: the one way a sealed session reaches the model's API, and the record of what crossed the
wire (docs/ARCHITECTURE.md#sealed, #wire).

One per process, a unix socket served by threads: a session's ticket (:meth:`Forwarder.ticket`) is presented
once by :mod:`ablate.isolate.nsexec`, then :mod:`ablate.isolate.relay` asks for one stream per connection.
Every ``/v1/messages`` exchange is recorded into the file named by :meth:`Forwarder.expect`.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import hashlib
import http.client
import logging
import os
import re
import secrets
import shutil
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import orjson

from ablate.core.errors import UsageError
from ablate.core.jsonl import map_strings
from ablate.core.tempwork import FORWARDER_PREFIX, make_work_dir
from ablate.folder.wire import WireRecord, append_wire
from ablate.isolate.http1 import Head, Reader, Refused
from ablate.isolate.nsexec import SWAPPED, placeholder
from ablate.isolate.seccomp import filter_program

DEFAULT_UPSTREAM = "https://api.anthropic.com"
#: Headers that belong to one hop, never forwarded (RFC 9110 §7.6.1), and Host (rewritten).
_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
)
#: Responses larger than this are forwarded whole but not parsed for the record.
_RECORD_LIMIT = 64 * 1024 * 1024
#: What the session sends that is never passed on: the hop's own headers and the body's framing (the
#: forwarder frames each request it sends itself).
_NOT_PASSED = _HOP | {"content-length", "expect"}
#: The headers whose placeholder credential is swapped for the real one.
_CREDENTIALS = frozenset({"x-api-key", "authorization"})
#: The paths the CLI (2.1.332) calls at ``ANTHROPIC_BASE_URL``, each with its methods; nothing else is
#: forwarded (404, or 405 for another method).
ROUTES: dict[str, tuple[str, ...]] = {
    "/v1/messages": ("POST",),  # the model calls (``?beta=true``): each one recorded
    "/v1/messages/count_tokens": ("POST",),  # token counting, free: forwarded unrecorded
    "/api/hello": ("HEAD", "GET"),  # the reachability check the CLI makes as it starts
}
MODEL_CALLS = "/v1/messages"
#: Default limits of one stream: seconds without a byte while a request is under way (then 408), seconds a
#: kept-alive stream may wait for its next request (then closed), and bytes of one request body (then 413;
#: the Messages API's own limit is 32 MB).
READ_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 300.0
BODY_LIMIT = 32 * 1024 * 1024
#: A request body past this many bytes spills from memory to a file in the forwarder's private folder.
SPILL = 64 * 1024
_log = logging.getLogger("ablate.forwarder")
_BILLING = re.compile(r"x-anthropic-billing-header: [^\n]*")


@dataclass
class _Ticket:
    session_id: str
    upstream: str = DEFAULT_UPSTREAM
    swap: dict[str, str] = field(default_factory=dict)
    """Placeholder the session holds → the real credential (:data:`ablate.isolate.nsexec.SWAPPED`)."""

    def real(self, value: str) -> str:
        for fake, real in self.swap.items():
            value = value.replace(fake, real)
        return value


@dataclass
class _Expected:
    labels: dict[str, Any]
    wire: Path | None
    records: list[WireRecord] = field(default_factory=list)
    in_flight: int = 0
    """Requests forwarded whose record is not written yet (the session may have its answer already)."""
    relay_ended_at: float | None = None
    """``time.monotonic()`` when the session's relay closed its control stream (it ends with the session)."""
    over_limit: bool = False
    """The session sent a request body over the limit (docs/ARCHITECTURE.md#limits)."""


class _Room:
    """Bytes the forwarder may hold in memory at once (``size``): a taker waits until there is room; one
    larger than all of it waits for all of it."""

    def __init__(self, size: int) -> None:
        self.size, self.used, self._cv = size, 0, threading.Condition()

    @contextlib.contextmanager
    def held(self, n: int) -> Iterator[None]:
        n = min(n, self.size)
        with self._cv:
            self._cv.wait_for(lambda: self.used + n <= self.size)
            self.used += n
        try:
            yield
        finally:
            with self._cv:
                self.used -= n
                self._cv.notify_all()


#: The longest path a unix socket can be bound at on Linux (``sun_path``, less its terminating NUL).
SOCKET_PATH_MAX = 107


def check_socket_room() -> None:
    """Refuse a temporary directory too long for the forwarder's unix socket (a bare OSError at its bind)."""
    folder = FORWARDER_PREFIX + "x" * 8  # mkdtemp's names end in 8 random characters
    length = len(os.fsencode(os.path.join(tempfile.gettempdir(), folder, "s")))
    if length > SOCKET_PATH_MAX:
        raise UsageError(
            f"TMPDIR {tempfile.gettempdir()}: too long for the forwarder's unix socket ({length} bytes with its "
            f"folder, at most {SOCKET_PATH_MAX})",
            hint="set TMPDIR to a shorter folder (e.g. TMPDIR=/tmp), or unset it",
        )


class Forwarder:
    """One forwarder (see the module text). Thread-safe; :meth:`close` (or process exit) stops it."""

    def __init__(
        self,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        body_limit: int = BODY_LIMIT,
        memory: int = 256 << 20,
    ) -> None:
        self.read_timeout_s, self.idle_timeout_s, self.body_limit = read_timeout_s, idle_timeout_s, body_limit
        self.room = _Room(memory)
        check_socket_room()
        # owned like every work folder: after a kill -9 the next ablate command's sweep removes it
        self._dir = make_work_dir(FORWARDER_PREFIX)
        os.chmod(self._dir, 0o700)
        self.socket_path = self._dir / "s"
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.socket_path))
        self._server.listen(64)
        program = filter_program()
        self.filter_path: Path | None = None
        if program is not None:
            self.filter_path = self._dir / "seccomp.bpf"
            self.filter_path.write_bytes(program)
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._tickets: dict[str, _Ticket] = {}
        self._expected: dict[str, _Expected] = {}
        self._closed = False
        threading.Thread(target=self._accept, name="ablate-forwarder", daemon=True).start()

    # -- what sessions and their callers ask -----------------------------------------------------------

    def ticket(self, session_id: str) -> str:
        """A one-time token for the session ``session_id``."""
        token = secrets.token_hex(16)
        with self._lock:
            self._tickets[token] = _Ticket(session_id)
        return token

    def expect(self, session_id: str, wire: Path | None, **labels: Any) -> None:
        """Record the exchanges of session ``session_id`` into ``wire`` with ``labels`` (item, attempt)."""
        with self._lock:
            self._expected[session_id] = _Expected(dict(labels), wire)

    def records(self, session_id: str, *, wait_s: float = 10.0) -> list[WireRecord]:
        """The exchanges recorded for ``session_id`` (then forgotten), once those in flight are recorded (the
        CLI may exit on the last byte of an answer not yet recorded) or after ``wait_s``."""
        with self._settled:
            got = self._expected.get(session_id)
            if got is not None:
                self._settled.wait_for(lambda: got.in_flight == 0, timeout=wait_s)
            self._expected.pop(session_id, None)
        return list(got.records) if got else []

    def relay_ended_at(self, session_id: str) -> float | None:
        """When the relay of ``session_id`` ended (``time.monotonic()``), or None while it runs."""
        with self._lock:
            got = self._expected.get(session_id)
            return got.relay_ended_at if got else None

    def over_limit(self, session_id: str) -> bool:
        """Whether ``session_id`` sent a request body over :attr:`body_limit` (it is then stopped)."""
        with self._lock:
            got = self._expected.get(session_id)
            return got is not None and got.over_limit

    def _mark(self, session_id: str, **fields: Any) -> None:
        with self._lock:
            if (expected := self._expected.get(session_id)) is not None:
                for name, value in fields.items():
                    setattr(expected, name, value)

    def _begin(self, ticket: _Ticket) -> None:
        with self._lock:
            expected = self._expected.get(ticket.session_id)
            if expected is not None:
                expected.in_flight += 1

    def _end(self, ticket: _Ticket, record: WireRecord | None) -> None:
        with self._settled:
            expected = self._expected.get(ticket.session_id)
            if expected is None:
                return
            expected.in_flight -= 1
            if record is not None:
                record = record.model_copy(update={"session_id": ticket.session_id, **expected.labels})
                expected.records.append(record)
                if expected.wire is not None:
                    append_wire(expected.wire, record)
            self._settled.notify_all()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- serving -------------------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._control, args=(conn,), daemon=True).start()

    def _control(self, conn: socket.socket) -> None:
        """One session's control stream: ``TOKEN UPSTREAM [NAME=HEX...]``, then one byte per stream wanted."""
        with conn:
            conn.settimeout(self.read_timeout_s)
            token, _, upstream = _read_line(conn, 16384).partition(" ")
            upstream, *keys = upstream.split(" ")
            conn.settimeout(None)
            with self._lock:
                ticket = self._tickets.pop(token, None)
            if ticket is None:
                return
            try:
                ticket.upstream = _upstream(upstream)
                ticket.swap = {placeholder(token, n): bytes.fromhex(v).decode() for n, _, v in _keys(keys)}
            except ValueError as exc:
                conn.sendall(f"no: {exc}\n".encode())
                return
            conn.sendall(b"ok\n")
            try:
                self._streams(conn, ticket)
            finally:  # the relay ended: with its session, or killed by it (see relay_ended_at)
                self._mark(ticket.session_id, relay_ended_at=time.monotonic())

    def _streams(self, conn: socket.socket, ticket: _Ticket) -> None:
        """One new stream per byte the relay sends, until it closes the control stream."""
        while True:
            try:
                if not conn.recv(1):
                    return
                mine, theirs = socket.socketpair()
                fds = array.array("i", [theirs.fileno()])
                conn.sendmsg([b"s"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
                theirs.close()
            except OSError:
                return
            threading.Thread(target=self._stream, args=(mine, ticket), daemon=True).start()

    def _stream(self, sock: socket.socket, ticket: _Ticket) -> None:
        with sock:
            _Stream(self, ticket, sock).serve()


def _upstream(url: str | None) -> str:
    text = (url or "").strip() or DEFAULT_UPSTREAM
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r}: not an http(s) URL")
    return text.rstrip("/")


def _keys(fields: list[str]) -> list[tuple[str, str, str]]:
    named = [f.partition("=") for f in fields]
    if any(n not in SWAPPED for n, _, _ in named):
        raise ValueError(f"only {', '.join(SWAPPED)} are swapped")
    return named


def _read_line(conn: socket.socket, limit: int = 4096) -> str:
    data = b""
    with contextlib.suppress(OSError):
        while not data.endswith(b"\n") and len(data) < limit:
            chunk = conn.recv(1)
            if not chunk:
                break
            data += chunk
    return data.decode("ascii", "replace").strip()


def route(path: str, method: str, prefix: str = "") -> str:
    """The allowed path of a request for ``path`` (origin-form, as sent; ``prefix``: the upstream URL's own
    path, which a session whose base URL kept it sends first), else :class:`Refused` 404 or 405."""
    if prefix and path.startswith(prefix + "/"):
        path = path[len(prefix) :]
    methods = ROUTES.get(path)
    if methods is None:
        raise Refused(404, f"{path[:80]!r} is none of the API paths the CLI uses ({', '.join(ROUTES)})")
    if method not in methods:
        raise Refused(405, f"{method} {path}: only {', '.join(methods)}", allow=", ".join(methods))
    return path


class _Stream:
    """The HTTP/1.1 requests of one relay stream, each replayed upstream; a refused one ends the stream."""

    def __init__(self, forwarder: Forwarder, ticket: _Ticket, sock: socket.socket) -> None:
        self.forwarder, self.ticket, self.sock = forwarder, ticket, sock
        self.upstream = urlsplit(ticket.upstream)
        self._conn: http.client.HTTPConnection | None = None

    def serve(self) -> None:
        fwd = self.forwarder
        reader = Reader(self.sock, idle_s=fwd.idle_timeout_s, read_s=fwd.read_timeout_s)
        try:
            while (head := reader.head()) is not None:
                path = route(head.path, head.method, self.upstream.path.rstrip("/"))
                if head.expects_continue:
                    self.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                with tempfile.SpooledTemporaryFile(SPILL, dir=str(fwd.socket_path.parent)) as body:
                    size = reader.body(head, fwd.body_limit, body)
                    body.seek(0)
                    self.sock.settimeout(None)  # the answer may take the upstream minutes
                    if not self._forward(head, path, body, size) or head.close:
                        return
        except Refused as refused:
            if refused.status == 413:
                fwd._mark(self.ticket.session_id, over_limit=True)
            _log.warning(
                "ablate forwarder: session %s: %s %s", self.ticket.session_id, refused.status, refused
            )
            with contextlib.suppress(OSError):
                self.sock.sendall(refused.answer())
        except OSError:
            return  # the session hung up
        except Exception as exc:  # a thread's last word: one line, never a traceback
            _log.warning("ablate forwarder: session %s: stream failed: %r", self.ticket.session_id, exc)
        finally:
            if self._conn is not None:
                self._conn.close()

    def _forward(self, head: Head, path: str, body: IO[bytes], size: int) -> bool:
        """Forward one request and stream its answer; False when the session hung up meanwhile."""
        self.forwarder._begin(self.ticket)
        record = None
        start = time.monotonic()
        try:
            try:
                resp = self._send(head, path, body, size)
            except (OSError, http.client.HTTPException) as exc:
                raise Refused(502, f"upstream unreachable: {exc}") from None
            kept, here = self._answer(head, resp)
            if path == MODEL_CALLS:
                with self.forwarder.room.held(size):  # parsed for the record: held whole only here
                    body.seek(0)
                    record = wire_record(body.read(), resp.status, kept, resp.getheader("content-type", ""))
                record = record.model_copy(update={"duration_s": round(time.monotonic() - start, 3)})
            return here
        finally:
            self.forwarder._end(self.ticket, record)

    def _answer(self, head: Head, resp: http.client.HTTPResponse) -> tuple[bytes, bool]:
        """Stream the upstream's answer to the session: what was kept for the record, and whether the session
        is still there (one that hung up, a killed CLI, still has the answer read to its end and recorded)."""
        here = True

        def send(data: bytes) -> None:
            nonlocal here
            if here:
                try:
                    self.sock.sendall(data)
                except OSError:
                    here = False

        bodyless = head.method == "HEAD" or resp.status in (204, 304) or resp.status < 200
        chunked = resp.getheader("content-length") is None and not bodyless
        lines = [f"HTTP/1.1 {resp.status} {resp.reason}\r\n"]
        lines += [f"{k}: {v}\r\n" for k, v in resp.getheaders() if k.lower() not in _HOP]
        lines += ["Transfer-Encoding: chunked\r\n"] if chunked else []
        send("".join(lines).encode("latin-1") + b"\r\n")
        kept = bytearray()
        while not bodyless and (chunk := resp.read1(65536)):
            if len(kept) < _RECORD_LIMIT:
                kept += chunk
            send(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
        resp.read()  # the rest (none; a HEAD's empty body): the connection is ready for the next request
        if chunked:
            send(b"0\r\n\r\n")
        if resp.will_close and self._conn is not None:
            self._conn.close()
            self._conn = None
        return bytes(kept), here

    def _send(self, head: Head, path: str, body: IO[bytes], size: int) -> http.client.HTTPResponse:
        """The upstream's response; a kept-alive connection it closed meanwhile is opened again once. The
        framing is the forwarder's own: the session's ``Content-Length`` and hop headers are not passed on."""
        headers: dict[str, str] = {}
        for key, value in head.headers:
            if key.lower() not in _NOT_PASSED:
                value = self.ticket.real(value) if key.lower() in _CREDENTIALS else value
                headers[key] = f"{headers[key]}, {value}" if key in headers else value
        target = self.upstream.path.rstrip("/") + path + head.query
        headers["Content-Length"] = str(size)
        for attempt in (1, 2):
            reused = self._conn is not None
            conn = self._connection()
            try:
                body.seek(0)
                conn.request(head.method, target, body=body, headers=headers)
                return conn.getresponse()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._conn = None
                if not reused or attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _connection(self) -> http.client.HTTPConnection:
        host, port = self.upstream.hostname or "", self.upstream.port
        if self._conn is None and self.upstream.scheme == "https":
            context = ssl.create_default_context()
            self._conn = http.client.HTTPSConnection(
                host, port, timeout=600, context=context, blocksize=1 << 16
            )
        elif self._conn is None:
            self._conn = http.client.HTTPConnection(host, port, timeout=600, blocksize=1 << 16)
        return self._conn


# ---------------------------------------------------------------------------------------------------------
# What one exchange says


def digest(value: Any) -> str | None:
    """sha256 of ``value`` as canonical JSON, the per-session billing header blanked; None: absent."""
    if value is None:
        return None
    text = orjson.dumps(map_strings(value, scrub_billing), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(text).hexdigest()


#: The first message's system reminders that differ per session, not per cell: the working directory and
#: platform, the model, the date, the git status and the token budget (each reminder's text starts so).
_PER_SESSION = (
    "# Environment",
    "You are powered by the model",
    "Today's date is",
    "As you answer the user's questions, you can use the following context:\n# gitStatus",
    "<total_tokens>",
)
_REMINDER = "<system-reminder>\n"


def context_digest(messages: Any) -> str | None:
    """sha256 of the context the CLI attached to the session's first message: its ``<system-reminder>``
    text blocks (instruction files, memory, the skill and agent listings, hook output) with the per-session
    ones left out (:data:`_PER_SESSION`); the layers a cell carries reach the model here, not in the system
    prompt. Every request of a session repeats the first message, so every one has the same digest. None: no
    first message with a reminder."""
    first = messages[0] if isinstance(messages, list) and messages else None
    content = first.get("content") if isinstance(first, dict) else None
    if not isinstance(content, list):
        return None
    kept = [
        text
        for block in content
        if isinstance(block, dict)
        and isinstance(text := block.get("text"), str)
        and text.startswith(_REMINDER)
        and not text[len(_REMINDER) :].startswith(_PER_SESSION)
    ]
    return digest(kept) if kept else None


def scrub_billing(text: str) -> str:
    """``text`` with the per-session billing header blanked (the one part of a request no two sessions share)."""
    return _BILLING.sub("x-anthropic-billing-header: <billing>", text)


def wire_record(request: bytes, status: int, response: bytes, content_type: str) -> WireRecord:
    """The record of one ``/v1/messages`` exchange (docs/ARCHITECTURE.md#wire)."""
    try:
        body = orjson.loads(request)
    except orjson.JSONDecodeError:
        body = {}
    body = body if isinstance(body, dict) else {}
    message: dict[str, Any] = {}
    if "text/event-stream" in content_type:
        message = _from_stream(response)
    else:
        with contextlib.suppress(orjson.JSONDecodeError):
            parsed = orjson.loads(response) if response else {}
            message = parsed if isinstance(parsed, dict) else {}
    texts = [
        str(b.get("text", ""))
        for b in message.get("content") or []
        if isinstance(b, dict) and b.get("type") == "text"
    ]
    usage = message.get("usage")
    return WireRecord(
        at=time.time(),
        status=status,
        model=str(body.get("model") or "") or None,
        answer_model=str(message.get("model") or "") or None,
        stream=bool(body.get("stream")),
        system_sha256=digest(body.get("system")),
        tools_sha256=digest(body.get("tools")),
        context_sha256=context_digest(body.get("messages")),
        messages=len(body.get("messages") or []),
        usage={k: int(v) for k, v in usage.items() if isinstance(v, int)} if isinstance(usage, dict) else {},
        stop_reason=message.get("stop_reason"),
        answer="".join(texts) if texts else None,
        error=(message.get("error") or {}).get("type") if isinstance(message.get("error"), dict) else None,
    )


def _from_stream(data: bytes) -> dict[str, Any]:
    """The message an SSE stream of the Messages API builds: ``message_start``'s message, text deltas
    appended to their blocks, ``message_delta``'s stop reason and usage merged."""
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    for line in data.split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        try:
            event = orjson.loads(line[5:].strip())
        except orjson.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
            message["usage"] = dict(message.get("usage") or {})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[int(event.get("index", len(blocks)))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            block = blocks.setdefault(int(event.get("index", 0)), {"type": "text", "text": ""})
            if event["delta"].get("type") == "text_delta":
                block["text"] = str(block.get("text", "")) + str(event["delta"].get("text", ""))
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                message["stop_reason"] = delta["stop_reason"]
            if isinstance(event.get("usage"), dict):
                message.setdefault("usage", {}).update(event["usage"])
        elif kind == "error":
            message["error"] = event.get("error")
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


# ---------------------------------------------------------------------------------------------------------
# One per process

_shared: Forwarder | None = None
_shared_lock = threading.Lock()


def shared_forwarder() -> Forwarder:
    """The process's forwarder, started on first use and stopped at exit."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared._closed:
            _shared = Forwarder()
            atexit.register(_shared.close)
        return _shared

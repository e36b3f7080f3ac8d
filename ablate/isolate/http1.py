"""A strict reader of HTTP/1.1 requests for the forwarder: the one place that decides where a request ends,
so the forwarder and the endpoint behind it never disagree about it (request smuggling). It accepts RFC
9112's strict reading (``METHOD SP origin-form SP HTTP/1.1``, ``name: value`` lines ended by CRLF, exactly
one ``Host``, a body framed by one ``Content-Length`` or by chunked encoding, never both); anything else is
:class:`Refused`: 400 unframed, 408 stalled (``read_s``), 413 body over the limit, 431 head over
:data:`HEAD_LIMIT`.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import IO

#: The most a request head (request line and headers) may take.
HEAD_LIMIT = 64 * 1024
_LINE_LIMIT = 4096
_REQUEST_LINE = re.compile(rb"([A-Z]{1,20}) (\S+) HTTP/1\.1")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
#: origin-form (RFC 9112 §3.2.1): an absolute path of RFC 3986 characters, then an optional query
_ORIGIN = re.compile(rb"(/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*)(\?[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*)?")
_BARE = re.compile(rb"\r(?!\n)|(?<!\r)\n")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})(;[\t\x20-\x7e]*)?")
_DIGITS = re.compile(rb"[0-9]{1,15}")
_REASONS = {
    400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
    413: "Content Too Large", 431: "Request Header Fields Too Large",
}  # fmt: skip


class Refused(Exception):
    """A request the forwarder does not forward: its status, and why in a few words."""

    def __init__(self, status: int, why: str, *, allow: str = "") -> None:
        super().__init__(why)
        self.status, self.why, self.allow = status, why, allow

    def answer(self) -> bytes:
        """The whole response (the connection is closed after it)."""
        body = f"ablate forwarder: {self.why}\n".encode()
        allow = f"Allow: {self.allow}\r\n" if self.allow else ""
        return (
            f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Refused')}\r\n{allow}"
            f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body


@dataclass(frozen=True)
class Head:
    """One request's head."""

    method: str
    path: str
    """The target's path (origin-form, as sent: never decoded)."""
    query: str
    """``?`` and what follows, or ""."""
    headers: list[tuple[str, str]]
    """Every header as sent (name as sent, value trimmed), in order."""
    length: int | None
    """The body's ``Content-Length``; None: chunked."""
    close: bool
    """The client asked to close the connection after this request."""
    expects_continue: bool


class Reader:
    """The requests of one connection, read one after another (a pipelined one waits in the buffer)."""

    def __init__(self, sock: socket.socket, *, idle_s: float, read_s: float) -> None:
        self.sock, self.idle_s, self.read_s = sock, idle_s, read_s
        self._buf = bytearray()

    def head(self) -> Head | None:
        """The next request's head; None when the client closed or idled (``idle_s``) between requests."""
        checked = 0
        while True:
            end = self._buf.find(b"\r\n\r\n")
            # up to the head's last line end; a CR at the end of what came waits for the byte after it
            stop = end + 2 if end >= 0 else len(self._buf) - self._buf.endswith(b"\r")
            self._check_head(checked, stop)
            checked = stop
            if (end if end >= 0 else len(self._buf)) > HEAD_LIMIT:
                raise Refused(431, f"request head over {HEAD_LIMIT} bytes")
            if end >= 0:
                break
            try:
                more = self._fill(self.read_s if self._buf else self.idle_s)
            except Refused:
                if self._buf:
                    raise
                return None  # an idle kept-alive connection: closed without a word
            if not more:
                if self._buf:
                    raise Refused(400, "connection closed inside a request head")
                return None
        raw = bytes(self._buf[:end])
        del self._buf[: end + 4]
        return _parse_head(raw.split(b"\r\n"))

    def body(self, head: Head, limit: int, sink: IO[bytes]) -> int:
        """Stream the body ``head`` frames into ``sink``, at most ``limit`` bytes (else 413); its size."""
        if head.length is not None:
            if head.length > limit:
                raise Refused(413, f"request body of {head.length} bytes over the limit of {limit}")
            self._copy(head.length, sink)
            return head.length
        size = 0
        while True:
            line = self._line()
            size_m = _CHUNK_SIZE.fullmatch(line)
            if size_m is None:
                raise Refused(400, "bad chunk size")
            chunk = int(size_m.group(1), 16)
            if chunk == 0:
                while self._line():  # trailer fields, not kept
                    pass
                return size
            if size + chunk > limit:
                raise Refused(413, f"chunked request body over the limit of {limit} bytes")
            self._copy(chunk, sink)
            size += chunk
            if self._exact(2) != b"\r\n":
                raise Refused(400, "chunk data not followed by CRLF")

    def _copy(self, n: int, sink: IO[bytes]) -> None:
        """Move the next ``n`` bytes to ``sink``, a buffer's worth at a time."""
        while n:
            if not self._buf and not self._fill(self.read_s):
                raise Refused(400, "connection closed inside a request body")
            part = self._buf[:n]
            sink.write(part)
            del self._buf[: len(part)]
            n -= len(part)

    def _check_head(self, start: int, stop: int) -> None:
        """Refuse a head with a bare CR or LF in ``[start, stop)`` (a trickled head is not scanned twice), or
        whose request line, once whole, is wrong: an HTTP/0.9 client sends one line and waits."""
        if _BARE.search(self._buf, start, stop):
            raise Refused(400, "bare CR or LF in the request head")
        line_end = self._buf.find(b"\r\n", 0, stop + 1)
        if start <= line_end + 1 and line_end >= 0:
            line = bytes(self._buf[:line_end])
            if _REQUEST_LINE.fullmatch(line) is None:
                raise Refused(400, f"not an HTTP/1.1 request line: {line[:80]!r}")

    def _fill(self, timeout: float) -> bool:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            raise Refused(408, f"no byte for {timeout:g} s") from None
        self._buf += data
        return bool(data)

    def _exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            if not self._fill(self.read_s):
                raise Refused(400, "connection closed inside a request body")
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _line(self) -> bytes:
        while (end := self._buf.find(b"\r\n")) < 0:
            if len(self._buf) > _LINE_LIMIT:
                raise Refused(400, "chunk line too long")
            if not self._fill(self.read_s):
                raise Refused(400, "connection closed inside a chunked body")
        line = bytes(self._buf[:end])
        del self._buf[: end + 2]
        if b"\r" in line or b"\n" in line or len(line) > _LINE_LIMIT:
            raise Refused(400, "bare CR or LF in a chunk line")
        return line


def _parse_head(lines: list[bytes]) -> Head:
    request = _REQUEST_LINE.fullmatch(lines[0])
    if request is None:  # pragma: no cover - _check_head refused it
        raise Refused(400, "not an HTTP/1.1 request line")
    target = _ORIGIN.fullmatch(request.group(2))
    if target is None:
        raise Refused(400, f"request target is not origin-form: {request.group(2)[:80]!r}")
    headers: list[tuple[str, str]] = []
    seen: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or _TOKEN.fullmatch(name) is None:
            raise Refused(400, f"malformed header line: {line[:80]!r}")
        if _VALUE.fullmatch(value) is None:
            raise Refused(400, f"control character in header {name.decode()}")
        text = value.strip(b" \t").decode("latin-1")
        headers.append((name.decode(), text))
        seen.setdefault(name.decode().lower(), []).append(text)
    for once in ("host", "content-length", "transfer-encoding"):
        if len(seen.get(once, [])) > 1:
            raise Refused(400, f"more than one {once} header")
    if "host" not in seen:
        raise Refused(400, "no Host header")
    length: int | None = 0
    if "transfer-encoding" in seen:
        if "content-length" in seen:
            raise Refused(400, "both Transfer-Encoding and Content-Length")
        if seen["transfer-encoding"][0].lower() != "chunked":
            raise Refused(400, f"Transfer-Encoding {seen['transfer-encoding'][0]!r}: only chunked is read")
        length = None
    elif "content-length" in seen:
        said = seen["content-length"][0]
        if _DIGITS.fullmatch(said.encode("latin-1")) is None:
            raise Refused(400, f"bad Content-Length {said[:40]!r}")
        length = int(said)
    expect = seen.get("expect", [])
    if expect and [e.lower() for e in expect] != ["100-continue"]:
        raise Refused(400, f"Expect {expect[0][:40]!r}: only 100-continue is understood")
    connection = ",".join(seen.get("connection", [])).lower()
    return Head(
        method=request.group(1).decode(),
        path=target.group(1).decode(),
        query=(target.group(2) or b"").decode(),
        headers=headers,
        length=length,
        close="close" in (t.strip() for t in connection.split(",")),
        expects_continue=bool(expect),
    )

"""Small TCP stand-ins for the tests: a listener whose accepted connections go to a handler on threads of
their own, a wait for what listeners counted, and a carrier of one connection to a local port (both ways, each
half closed when its side ends)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def serve(sock: socket.socket, handle: Callable[[socket.socket], None]) -> None:
    """Accept on ``sock`` until it is closed, each connection handled on a thread of its own. A failed accept
    of an open socket (a connection aborted while queued, no file descriptor free) is waited out, not the end."""

    def loop() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                if sock.fileno() == -1:
                    return
                time.sleep(0.05)
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()


def settled(read: Callable[[], T], expected: T, within: float = 10.0) -> T:
    """``read()`` once it equals ``expected`` or ``within`` seconds have passed. A client's connect returns as soon
    as the kernel queues the connection, before the listener's thread has accepted and counted it, so a count
    read the moment a session ends can be one short."""
    deadline = time.monotonic() + within
    while (value := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def carry(conn: socket.socket, port: int) -> None:
    """Carry ``conn`` to 127.0.0.1:``port`` and back until both sides are done."""
    upstream = socket.create_connection(("127.0.0.1", port))
    threading.Thread(target=_pump, args=(upstream, conn), daemon=True).start()
    _pump(conn, upstream)


def port_of(url: str) -> int:
    """The port of an ``http://127.0.0.1:PORT`` URL."""
    return int(url.rsplit(":", 1)[1].rstrip("/"))


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)

"""The model's API inside a session's own network namespace (docs/ARCHITECTURE.md#sealed says how): a TCP
listener on 127.0.0.1 handing every connection to ablate's forwarder over the stream at FD, then ARGV.

Run as a file inside the fence (``python -I -S .../relay.py FD -- ARGV...``), standard library only (no
``site``: on a loaded machine that halves the interpreter's start). Exit 125: setup failed.
"""

from __future__ import annotations

import array
import contextlib
import os
import socket
import sys
import threading

SETUP_FAILED = 125
_CHUNK = 65536


def _fresh_stream(control: socket.socket, lock: threading.Lock) -> socket.socket:
    """One new stream to the forwarder: ask with one byte, receive one end of a socket pair."""
    with lock:
        control.sendall(b"n")
        fds = array.array("i")
        msg, anc, _flags, _addr = control.recvmsg(1, socket.CMSG_LEN(fds.itemsize))
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if not msg or not fds:
        raise OSError("the forwarder closed the control stream")
    return socket.socket(fileno=fds[0])


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _serve(conn: socket.socket, control: socket.socket, lock: threading.Lock) -> None:
    # each answer's pieces go out as they come: Nagle's wait for an ACK the client delays cost ~40 ms each
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        upstream = _fresh_stream(control, lock)
    except OSError:
        conn.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
    back.start()
    _pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def relay(listener: socket.socket, control: socket.socket) -> None:
    lock = threading.Lock()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve, args=(conn, control, lock), daemon=True).start()


def _loopback_port(url: str) -> int | None:
    """The port of an ``http://127.0.0.1:PORT`` endpoint (a local gateway, the sim), else None."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    return port if parts.scheme == "http" and parts.hostname == "127.0.0.1" else None


def _listen(port: int | None) -> socket.socket:
    """The listener: on the endpoint's own loopback port where it is free (in the session's own network
    namespace it is), so ``ANTHROPIC_BASE_URL`` stays as the user set it, in the environment and in any
    ``settings.json`` ``env``; else on a port the kernel picks."""
    for want in ([port] if port else []) + [0]:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", want))
        except OSError:
            listener.close()
            if want == 0:
                raise
            continue
        listener.listen(64)
        return listener
    raise OSError("no port to listen on")  # pragma: no cover - port 0 either binds or raised


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--" or not args[0].isdigit():
        sys.stderr.write("usage: relay.py FD -- ARGV...\n")
        return SETUP_FAILED
    same = _loopback_port(os.environ.get("ANTHROPIC_BASE_URL", ""))
    try:
        control = socket.socket(fileno=int(args[0]))
        listener = _listen(same)
    except OSError as exc:
        sys.stderr.write(f"ablate relay: {exc}\n")
        return SETUP_FAILED
    port = listener.getsockname()[1]
    if os.fork() == 0:  # the relay: no stdio of the session's
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            relay(listener, control)
        finally:
            os._exit(0)
    control.close()
    listener.close()
    env = dict(os.environ)
    if port != same:
        env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{port}"
    for key in ("NO_PROXY", "no_proxy"):
        env[key] = ",".join(p for p in ("127.0.0.1", env.get(key, "")) if p)
    argv = args[2:]
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        sys.stderr.write(f"ablate relay: cannot run {argv[0]}: {exc}\n")
        return 127
    return 0  # pragma: no cover - execvpe does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

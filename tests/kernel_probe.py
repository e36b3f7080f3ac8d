"""What a session can do to the kernel around it: run by the tests as a file, standard library only.

``python3 kernel_probe.py all [DGRAM_SOCKET] [STREAM_SOCKET]`` tries each attack in a child of its own (an
attack the seccomp filter answers with ``SIGSYS`` kills only that child) and prints one line each,
``NAME=reached``, ``NAME=refused:<errno>`` or ``NAME=killed:<signal>``, then ``UTS=<inode>`` (which UTS
namespace it ran in) and ``KERNEL-DONE``; ``python3 kernel_probe.py kernel`` does the same for the attacks
of :data:`KERNEL`, in one process (none of them is answered with ``SIGSYS``: one Python start, not eight).
``python3 kernel_probe.py plant KEY PAYLOAD -- ARGV...`` joins a fresh session keyring, adds a ``user`` key
KEY to it and execs ARGV there: the key a session would inherit.

The attacks: read, change and add keys (the inherited session keyring, the user's keyring: a key added there
is unlinked at once), write ``/proc/sys/kernel/hostname`` and ``/proc/sys/vm/overcommit_memory`` and call
``sethostname``, each with the value it holds (a write that gets through changes nothing), open a ``/sys``
file for writing (never written), a unix socket, a datagram ``socketpair`` that sends to
``DGRAM_SOCKET`` and passes a descriptor with ``SCM_RIGHTS``, a stream ``socketpair`` that connects to
``STREAM_SOCKET``, i386's ``socketcall`` through ``int 0x80`` (x86-64 only), an x32 ``socket`` and an
io_uring ring (which makes sockets without the ``socket`` call).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import re
import signal
import socket
import subprocess
import sys

KEY = "ablate-probe-secret"
KEY_SPEC_SESSION, KEY_SPEC_USER = -3, -4
KEYCTL_UPDATE, KEYCTL_UNLINK, KEYCTL_READ, KEYCTL_SEARCH, KEYCTL_JOIN = 2, 9, 11, 10, 1
_NR = {
    "x86_64": {"add_key": 248, "keyctl": 250, "socket": 41},
    "aarch64": {"add_key": 217, "keyctl": 219, "socket": 198},
}.get(platform.machine(), {})
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _sys(name: str | int, *args: object) -> int:
    result = int(_libc.syscall(_NR[name] if isinstance(name, str) else name, *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _add_key(name: str, payload: bytes, ring: int) -> int:
    return _sys("add_key", b"user", name.encode(), payload, len(payload), ring)


def _find_key() -> int:
    return _sys("keyctl", KEYCTL_SEARCH, KEY_SPEC_SESSION, b"user", KEY.encode(), 0)


def key_read() -> None:
    buf = ctypes.create_string_buffer(256)
    n = _sys("keyctl", KEYCTL_READ, _find_key(), buf, 256)
    print("KEYDATA=" + buf.raw[:n].decode(errors="replace"))


def key_update() -> None:
    _sys("keyctl", KEYCTL_UPDATE, _find_key(), b"overwritten", 11)


def key_add_session() -> None:
    _add_key("ablate-probe-added", b"x", KEY_SPEC_SESSION)


def key_add_user() -> None:
    key = _add_key("ablate-probe-added", b"x", KEY_SPEC_USER)
    _sys("keyctl", KEYCTL_UNLINK, key, KEY_SPEC_USER)  # never left in the account's keyring


def _write_back(path: str) -> None:
    """Write ``path`` the value it holds."""
    with open(path) as fh:
        value = fh.read()
    with open(path, "w") as fh:
        fh.write(value)


def hostname_proc() -> None:
    _write_back("/proc/sys/kernel/hostname")


def hostname_call() -> None:
    socket.sethostname(socket.gethostname())


def proc_sys_write() -> None:
    _write_back("/proc/sys/vm/overcommit_memory")


def sys_open() -> None:
    os.close(os.open("/sys/kernel/mm/ksm/run", os.O_WRONLY))


def unix_socket() -> None:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()


def dgram_pair() -> None:
    a, _b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    if len(sys.argv) > 2:
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(ctypes.c_int(0)))]
        a.sendmsg([b"from the session"], rights, 0, sys.argv[2])


def stream_pair() -> None:
    a, _b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if len(sys.argv) > 3:
        a.connect(sys.argv[3])


def i386_socketcall() -> None:
    """socketcall(SYS_SOCKET, {AF_UNIX, SOCK_STREAM, 0}) through ``int 0x80``, from a low page."""
    if platform.machine() != "x86_64":
        raise OSError(errno.ENOSYS, "no i386 ABI on this machine")
    page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | 0x40, prot=7)  # MAP_32BIT, read/write/exec
    base = ctypes.addressof(ctypes.c_char.from_buffer(page))
    args = base + 256
    code = b"\x53\xb8\x66\x00\x00\x00\xbb\x01\x00\x00\x00\xb9" + args.to_bytes(4, "little")
    page.write(code + b"\xcd\x80\x5b\xc3")  # push rbx; eax=102; ebx=1; ecx=args; int 0x80; pop rbx; ret
    page.seek(256)
    page.write((1).to_bytes(4, "little") + (1).to_bytes(4, "little") + bytes(4))
    result = ctypes.CFUNCTYPE(ctypes.c_int)(base)()
    if result < 0:
        raise OSError(-result, os.strerror(-result))


def x32_socket() -> None:
    if platform.machine() != "x86_64":
        raise OSError(errno.ENOSYS, "no x32 ABI on this machine")
    _sys(0x40000000 | 41, socket.AF_UNIX, socket.SOCK_STREAM, 0)


def io_uring() -> None:
    os.close(_sys(425, 1, ctypes.create_string_buffer(120)))  # io_uring_setup(1 entry, params)


ATTACKS = {
    "keyread": key_read,
    "keyupdate": key_update,
    "keyadd": key_add_session,
    "keyadduser": key_add_user,
    "hostname": hostname_proc,
    "sethostname": hostname_call,
    "procsys": proc_sys_write,
    "sysfs": sys_open,
    "unixsocket": unix_socket,
    "dgrampair": dgram_pair,
    "streampair": stream_pair,
    "i386": i386_socketcall,
    "x32": x32_socket,
    "iouring": io_uring,
}


#: The attacks on keyrings, kernel settings and the hostname (issue 43, item 1).
KERNEL = ("keyread", "keyupdate", "keyadd", "keyadduser", "hostname", "sethostname", "procsys", "sysfs")

#: What every attack comes to in a sealed session: the seccomp filter's EPERM, the read-only mounts' EROFS,
#: SIGSYS for another ABI; a stream pair is born connected (EISCONN) with the filter or without.
SEALED = {
    **dict.fromkeys(("keyread", "keyupdate", "keyadd", "keyadduser"), "refused:EPERM"),
    **dict.fromkeys(("hostname", "procsys", "sysfs"), "refused:EROFS"),
    **dict.fromkeys(("sethostname", "unixsocket", "dgrampair"), "refused:EPERM"),
    "streampair": "refused:EISCONN",
    **dict.fromkeys(("i386", "x32"), "killed:SIGSYS"),
    "iouring": "refused:ENOSYS",
}


def outcomes(text: str) -> dict[str, str]:
    """``NAME=outcome`` of each attack in ``text`` (a probe's output, or a transcript that holds one), the
    first said."""
    found: dict[str, str] = {}
    said = text.replace("\\n", "\n")  # a transcript's JSON-escaped newlines
    for name, outcome in re.findall(r"\b([a-z0-9]+)=(reached|refused:[A-Z0-9]+|killed:[A-Z]+)", said):
        if name in ATTACKS:
            found.setdefault(name, outcome)
    return found


def plant_argv(
    payload: str, argv: list[str], python: str = "/usr/bin/python3", probe: str = __file__
) -> list[str]:
    """``argv`` run with a fresh session keyring holding the key :data:`KEY` = ``payload`` (``probe``: this
    file, or a copy of it another user can read)."""
    return [python, probe, "plant", KEY, payload, "--", *argv]


def _one(name: str) -> int:
    try:
        ATTACKS[name]()
    except OSError as exc:
        print(f"{name}=refused:{errno.errorcode.get(exc.errno or 0, exc.errno)}")
        return 0
    print(f"{name}=reached")
    return 0


def _all() -> int:
    for name in ATTACKS:
        proc = subprocess.run(
            [sys.executable, __file__, "one", name, *sys.argv[2:]], capture_output=True, text=True
        )
        sys.stdout.write(proc.stdout)
        if proc.returncode < 0:
            print(f"{name}=killed:{signal.Signals(-proc.returncode).name}")
    return _done()


def _kernel() -> int:
    for name in KERNEL:
        _one(name)
    return _done()


def _done() -> int:
    print(f"UTS={os.stat('/proc/self/ns/uts').st_ino}")
    print("KERNEL-DONE")
    return 0


def _plant() -> int:
    name, payload, argv = sys.argv[2], sys.argv[3], sys.argv[5:]
    _sys("keyctl", KEYCTL_JOIN, None)
    _add_key(name, payload.encode(), KEY_SPEC_SESSION)
    os.execvp(argv[0], argv)
    return 127


if __name__ == "__main__":
    if sys.argv[1] == "one":
        sys.argv = [sys.argv[0], sys.argv[2], *sys.argv[3:]]
        sys.exit(_one(sys.argv[1]))
    sys.exit({"all": _all, "kernel": _kernel}.get(sys.argv[1], _plant)())

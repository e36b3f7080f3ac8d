"""The seccomp filter every fenced session runs under: no unix socket of its own, no io_uring.

A read-only bind does not stop ``connect()`` to a unix socket: a host service listening on a socket file
(tmux under ``/var/tmp`` or ``$TMUX_TMPDIR``, screen, ssh-agent, a Docker or Podman socket, the D-Bus session
bus, X11 under ``/tmp/.X11-unix``, anything under ``/run/user/<uid>``) would run a session's commands outside
every sandbox. Hiding each such folder cannot be complete (a socket may live anywhere in the home), so the
session may not *create* a unix socket at all: ``socket(AF_UNIX, …)`` fails with ``EPERM``. ``socketpair()``
(a pipe between two of the session's own processes: Node's child stdio, a shell's coprocess) stays allowed;
it reaches nothing outside. ``io_uring_setup`` fails with ``ENOSYS`` (an io_uring ring creates and connects
sockets without the ``socket`` system call; every user of it falls back to plain system calls on ENOSYS).
The relay that carries the model's API into the session (:mod:`ablate.isolate.relay`) was handed its one
connection before the filter applies and needs no socket of its own but its TCP listener.

The program is classic BPF, as ``bwrap --seccomp FD`` takes it (what ``seccomp_export_bpf`` writes), built
here with :mod:`struct`: x86-64 (the x32 ABI refused wholesale, i386's ``socketcall`` too: it hides the
family behind a pointer the filter cannot read) and aarch64 (with 32-bit ARM). Elsewhere there is no filter,
and :func:`filter_program` says so.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

# classic BPF opcodes (linux/filter.h, linux/bpf_common.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
# seccomp return actions (linux/seccomp.h)
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
# struct seccomp_data offsets: nr, arch, instruction pointer, then the six 64-bit arguments
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

AF_UNIX = 1
_X32_BIT = 0x40000000


@dataclass(frozen=True)
class _Abi:
    arch: int
    """The AUDIT_ARCH_* value the kernel puts in ``seccomp_data.arch``."""
    socket: int
    io_uring_setup: int = 425
    socketcall: int | None = None
    x32: bool = False


#: Machine → its native ABI and the compat ABI its kernel may also run.
_ABIS = {
    "x86_64": (
        _Abi(0xC000003E, socket=41, x32=True),
        _Abi(0x40000003, socket=359, socketcall=102),
    ),
    "aarch64": (
        _Abi(0xC00000B7, socket=198),
        _Abi(0x40000028, socket=281),
    ),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def _abi_block(abi: _Abi) -> list[tuple[int, int, int, int]]:
    """The checks for one ABI, entered with the syscall number not yet loaded; each path returns."""
    deny_unix = _ERRNO | errno.EPERM
    no_uring = _ERRNO | errno.ENOSYS
    out = [_insn(_LD_W_ABS, _NR)]
    if abi.x32:
        out.append(_insn(_JGE_K, _X32_BIT, 0, 1))
        out.append(_insn(_RET_K, deny_unix))
    if abi.socketcall is not None:
        out.append(_insn(_JEQ_K, abi.socketcall, 0, 1))
        out.append(_insn(_RET_K, deny_unix))
    out.append(_insn(_JEQ_K, abi.io_uring_setup, 0, 1))
    out.append(_insn(_RET_K, no_uring))
    out.append(_insn(_JEQ_K, abi.socket, 0, 3))
    out.append(_insn(_LD_W_ABS, _ARG0_LOW))  # the family (an int: the low half of the first argument)
    out.append(_insn(_JEQ_K, AF_UNIX, 0, 1))
    out.append(_insn(_RET_K, deny_unix))
    out.append(_insn(_RET_K, _ALLOW))
    return out


def filter_program(machine: str | None = None) -> bytes | None:
    """The compiled filter for ``machine`` (default: this one's), or None where ablate has none."""
    abis = _ABIS.get(machine or platform.machine())
    if abis is None:
        return None
    blocks = [_abi_block(abi) for abi in abis]
    program: list[tuple[int, int, int, int]] = [_insn(_LD_W_ABS, _ARCH)]
    # arch == native ? native block : (arch == compat ? compat block : allow)
    native, compat = blocks
    program.append(_insn(_JEQ_K, abis[0].arch, 0, len(native)))
    program += native
    program.append(_insn(_JEQ_K, abis[1].arch, 0, len(compat)))
    program += compat
    program.append(_insn(_RET_K, _ALLOW))  # an ABI the kernel here does not run
    return b"".join(struct.pack("=HBBI", *insn) for insn in program)

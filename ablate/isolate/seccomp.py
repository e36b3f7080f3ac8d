"""The seccomp filter every fenced session runs under (docs/ARCHITECTURE.md#sealed, which lists each rule
and its errno): no unix socket that reaches out, no kernel keyring, no io_uring, no ABI but the machine's own.

A read-only bind does not stop ``connect()`` to a host service's socket file and hiding every such folder
cannot be complete, so a session may not *create* a unix socket that can address one. Other ABIs are killed
because the filter names calls by the native numbers only. Classic BPF as ``bwrap --seccomp FD`` takes it,
built with :mod:`struct` for x86-64 and aarch64 (elsewhere: none).
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

# classic BPF opcodes (linux/filter.h, linux/bpf_common.h)
_LD_W_ABS = 0x20
_AND_K = 0x54
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
# seccomp return actions (linux/seccomp.h)
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_KILL_PROCESS = 0x80000000
_EPERM = _ERRNO | errno.EPERM
# struct seccomp_data offsets: nr, arch, instruction pointer, then the six 64-bit arguments
_NR, _ARCH, _ARG0_LOW, _ARG1_LOW = 0, 4, 16, 24

AF_UNIX = 1
SOCK_STREAM = 1
_SOCK_TYPE_MASK = 0xF  # the type without SOCK_CLOEXEC and SOCK_NONBLOCK
_X32_BIT = 0x40000000
_IO_URING_SETUP = 425


@dataclass(frozen=True)
class _Abi:
    arch: int
    """The AUDIT_ARCH_* value the kernel puts in ``seccomp_data.arch``."""
    socket: int
    socketpair: int
    keys: tuple[int, int, int]
    """add_key, request_key, keyctl."""
    x32: bool = False


#: Machine → its native ABI.
_ABIS = {
    "x86_64": _Abi(0xC000003E, socket=41, socketpair=53, keys=(248, 249, 250), x32=True),
    "aarch64": _Abi(0xC00000B7, socket=198, socketpair=199, keys=(217, 218, 219)),
}

_Insn = tuple[int, int, int, int]


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> _Insn:
    return (code, jt, jf, k)


def _is(k: int, then: list[_Insn]) -> list[_Insn]:
    """``nr == k ? then : next``; ``then`` returns."""
    return [_insn(_JEQ_K, k, 0, len(then)), *then]


def _program(abi: _Abi) -> list[_Insn]:
    allow, deny = _insn(_RET_K, _ALLOW), _insn(_RET_K, _EPERM)
    unix = [_insn(_LD_W_ABS, _ARG0_LOW), _insn(_JEQ_K, AF_UNIX, 0, 1), deny, allow]
    pair = [
        _insn(_LD_W_ABS, _ARG0_LOW),
        _insn(_JEQ_K, AF_UNIX, 0, 3),
        _insn(_LD_W_ABS, _ARG1_LOW),
        _insn(_AND_K, _SOCK_TYPE_MASK),
        _insn(_JEQ_K, SOCK_STREAM, 0, 1),
        allow,
        deny,
    ]
    out = [_insn(_LD_W_ABS, _ARCH), _insn(_JEQ_K, abi.arch, 1, 0), _insn(_RET_K, _KILL_PROCESS)]
    out.append(_insn(_LD_W_ABS, _NR))
    if abi.x32:
        out += [_insn(_JGE_K, _X32_BIT, 0, 1), _insn(_RET_K, _KILL_PROCESS)]
    out += _is(_IO_URING_SETUP, [_insn(_RET_K, _ERRNO | errno.ENOSYS)])
    for key_call in abi.keys:
        out += _is(key_call, [deny])
    out += _is(abi.socket, unix)
    out += _is(abi.socketpair, pair)
    out.append(allow)
    return out


def filter_program(machine: str | None = None) -> bytes | None:
    """The compiled filter for ``machine`` (default: this one's), or None where ablate has none."""
    abi = _ABIS.get(machine or platform.machine())
    if abi is None:
        return None
    return b"".join(struct.pack("=HBBI", *insn) for insn in _program(abi))

"""The fence and the seccomp filter against the kernel's own ways out, under a real bubblewrap: keyrings,
``/proc/sys`` and ``/sys``, the hostname, unix sockets by every call (``socketpair`` and ``SCM_RIGHTS``
included) and every ABI the kernel runs (i386's ``socketcall``, x32).

Each attack (``tests/kernel_probe.py``) runs three ways: plain (in a throwaway UTS namespace, though its
writes only write back the values held), fenced without the filter, fenced and filtered as a session is. The
plain run is the positive control: what the sealed run refuses works there.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablate.isolate.fence import fence_argv
from ablate.isolate.seccomp import filter_program
from tests import kernel_probe
from tests.kernel_probe import SEALED, outcomes, plant_argv
from tests.run_folder import why

PROBE = Path(kernel_probe.__file__).resolve()
PYTHON = "/usr/bin/python3"


class Outside:
    """A datagram socket file and a stream listener of the host's, in ``base``."""

    def __init__(self, base: Path) -> None:
        self.dgram_path, self.stream_path = base / "dgram", base / "stream"
        self.dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.dgram.bind(str(self.dgram_path))
        self.dgram.setblocking(False)
        self.stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stream.bind(str(self.stream_path))
        self.stream.listen(4)
        self.stream.setblocking(False)

    def received(self) -> list[bytes]:
        out = []
        while True:
            try:
                out.append(self.dgram.recv(4096))
            except BlockingIOError:
                return out

    def close(self) -> None:
        self.dgram.close()
        self.stream.close()


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Outside]:
    o = Outside(tmp_path)
    try:
        yield o
    finally:
        o.close()


def _probe(outside: Outside, *, fenced: bool, filtered: bool = False) -> dict[str, str]:
    """The probe's outcomes, run with a planted session key: plain (as root in a UTS namespace of its own),
    or fenced as a session is (``filtered``: under the seccomp filter too)."""
    argv = [PYTHON, str(PROBE), "all", str(outside.dgram_path), str(outside.stream_path)]
    bwrap = shutil.which("bwrap")
    program = filter_program()
    if bwrap is None or program is None:
        pytest.skip("no bubblewrap, or no filter for this machine")
    with open(outside.dgram_path.parent / "f.bpf", "wb+") as fh:
        fh.write(program)
        fh.seek(0)
        if fenced:
            argv = fence_argv(bwrap, argv, writable=[], cwd="/")
            argv[1:1] = ["--seccomp", str(fh.fileno())] if filtered else []
        elif os.geteuid() == 0:
            argv = ["unshare", "--uts", *argv]  # the control's hostname writes stay in a throwaway namespace
        proc = subprocess.run(
            plant_argv("hush", argv, PYTHON),
            capture_output=True,
            text=True,
            timeout=60,
            pass_fds=(fh.fileno(),),
        )
    if fenced and proc.returncode != 0 and "KERNEL-DONE" not in proc.stdout:
        pytest.skip(f"bubblewrap refused here: {proc.stderr.strip()[:200]}")
    assert "KERNEL-DONE" in proc.stdout, why(proc.stdout, proc.stderr[-2000:])
    return outcomes(proc.stdout)


def test_a_sealed_process_reaches_no_keyring_kernel_setting_unix_socket_or_other_abi(
    outside: Outside,
) -> None:
    host = socket.gethostname()
    plain = _probe(outside, fenced=False)
    sent = outside.received()
    fenced = _probe(outside, fenced=True)
    sent_fenced = outside.received()
    sealed = _probe(outside, fenced=True, filtered=True)
    assert socket.gethostname() == host
    # the positive control: every attack works where nothing seals it (the kernel here has no x32 ABI:
    # ENOSYS; a stream pair is born connected, so even plain it reaches nothing)
    reached = {"keyread", "keyupdate", "keyadd", "keyadduser", "unixsocket", "dgrampair", "iouring"}
    reached |= {"hostname", "sethostname", "procsys", "sysfs"} if os.geteuid() == 0 else set()
    reached |= {"i386"} if _has_i386() else set()
    assert {k for k, v in plain.items() if v == "reached"} == reached, plain
    assert plain["streampair"] == "refused:EISCONN" and plain["x32"] in ("reached", "refused:ENOSYS")
    assert sent == [b"from the session"]  # the datagram (and its SCM_RIGHTS descriptor) got out
    # the fence alone: kernel settings read-only, the hostname its own; keys and sockets are the filter's
    assert {k: fenced[k] for k in ("hostname", "procsys", "sysfs")} == dict.fromkeys(
        ("hostname", "procsys", "sysfs"), "refused:EROFS"
    )
    assert fenced["sethostname"] == "refused:EPERM" and fenced["keyread"] == "reached"
    assert fenced["dgrampair"] == "reached" and sent_fenced == sent
    # sealed: every one refused, nothing sent
    assert sealed == SEALED
    assert outside.received() == []


def _has_i386() -> bool:
    return sys.platform == "linux" and os.uname().machine == "x86_64" and _ia32_enabled()


def _ia32_enabled() -> bool:
    proc = subprocess.run([PYTHON, str(PROBE), "one", "i386"], capture_output=True, text=True, timeout=30)
    return "i386=reached" in proc.stdout


def test_the_filter_is_built_for_the_machines_it_knows() -> None:
    assert filter_program("riscv64") is None
    for machine in ("x86_64", "aarch64"):
        program = filter_program(machine)
        assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 64

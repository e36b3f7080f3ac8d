"""A fenced session, sealed (docs/ARCHITECTURE.md#sealed): its own network namespace with the model's API
relayed in, no unix socket. :func:`seal` turns a bubblewrap command line into the session's whole command::

    python -I -S nsexec.py --net SOCKET TOKEN --seccomp FILTER VIEW -- \\
        bwrap --seccomp 4 … --unshare-net --unshare-ipc --dev /dev … -- \\
        python -I -S relay.py 3 -- claude -p …

VIEW is the ``namespace`` backend's mount spec, or ``-`` for ``links``. ``network=True`` (``--allow-network``)
keeps the host's network namespace; the seccomp filter, the private ``/dev`` and IPC stay.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ablate.isolate import nsexec, relay
from ablate.isolate.detect import namespace_check
from ablate.isolate.fence import bwrap_path, fence_argv, fence_support, sandbox_profile
from ablate.isolate.forwarder import shared_forwarder

NSEXEC = Path(nsexec.__file__).resolve()
RELAY = Path(relay.__file__).resolve()


def relay_python() -> str:
    """The interpreter the relay runs on inside the fence (a venv's python resolved to the real one: the
    relay needs the standard library only, and a venv under a private ``/tmp`` would be hidden)."""
    return os.path.realpath(sys.executable)


def program_folders(programs: Sequence[str | Path]) -> list[Path]:
    """The folders a sealed session runs programs from, which its view must show: each program's (resolved: a
    CLI under ``/tmp``, as in a fresh clone's ``.cache``), the relay's and its interpreter's."""
    return [*(Path(os.path.realpath(p)).parent for p in programs), RELAY.parent, Path(relay_python()).parent]


def seal(fence: Sequence[str], *, view: str = "-") -> list[str]:
    """The sealed command of the bubblewrap command line ``fence`` (``bwrap OPTIONS -- ARGV``)."""
    argv = list(fence)
    split = argv.index("--")
    bwrap, command = argv[:split], argv[split + 1 :]
    forwarder = shared_forwarder()
    session = command[command.index("--session-id") + 1] if "--session-id" in command[:-1] else ""
    opts = ["--net", str(forwarder.socket_path), forwarder.ticket(session)]
    if forwarder.filter_path is not None:
        opts += ["--seccomp", str(forwarder.filter_path)]
        bwrap = [bwrap[0], "--seccomp", str(nsexec.SECCOMP_FD), *bwrap[1:]]
    inner = [relay_python(), "-I", "-S", str(RELAY), str(nsexec.NET_FD), "--", *command]
    return [sys.executable, "-I", "-S", str(NSEXEC), *opts, view, "--", *bwrap, "--", *inner]


def fenced(
    argv: Sequence[str],
    *,
    root: Path,
    cwd: Path,
    visible: Sequence[Path] = (),
    through: Sequence[Path] = (),
    network: bool = False,
    sealed: bool = True,
    hidden: Sequence[Path] = (),
) -> list[str]:
    """A ``links`` session's command: fenced wherever that works (only ``root`` and ``through`` writable,
    ``root/tmp`` as ``/tmp``, ``visible`` readable under it, ``hidden`` empty) and sealed unless
    ``sealed=False`` (a command to run by hand); else as is."""
    support = fence_support()
    if support.ok and support.sandbox_exec is not None:
        return [support.sandbox_exec, "-p", sandbox_profile([root, *through], hidden), *argv]
    if not support.ok or support.bwrap is None:
        return list(argv)
    (root / "tmp").mkdir(exist_ok=True)
    writable = [root, *through]
    shown = [*visible, *program_folders(argv[:1] if argv and os.path.isabs(argv[0]) else [])]
    fence = fence_argv(
        support.bwrap,
        argv,
        writable=writable,
        cwd=cwd,
        tmp=root / "tmp",
        visible=shown,
        network=network or not sealed,
        hidden=hidden,
    )
    return seal(fence) if sealed else fence


def view_command(
    spec: Path,
    argv: list[str],
    *,
    writable: Sequence[Path] = (),
    cwd: Path | None = None,
    network: bool = False,
    sealed: bool = True,
    hidden: Sequence[Path] = (),
) -> list[str]:
    """``argv`` inside the view ``spec``, under bubblewrap (only ``writable`` writable, ``hidden`` empty) and
    sealed (:func:`seal`; ``network``: the host's) wherever :func:`~ablate.isolate.detect.namespace_check`
    found that it works."""
    bwrap = bwrap_path()
    if bwrap and cwd is not None and namespace_check().locked:
        ordered = sorted(writable, key=lambda p: str(p).count("/"))
        fence = fence_argv(
            bwrap, argv, writable=ordered, cwd=cwd, network=network or not sealed, hidden=hidden
        )
        if not sealed:
            return [sys.executable, "-I", str(NSEXEC), str(spec), "--", *fence]
        return seal(fence, view=str(spec))
    return [sys.executable, "-I", str(NSEXEC), str(spec), "--", *argv]


#: Provider switches: the CLI then talks to a cloud's own endpoint, which the forwarder does not carry.
PROVIDERS = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")


def unreachable_when_sealed(environ: Mapping[str, str], settings_env: Mapping[str, str]) -> list[str]:
    """Why a sealed session could not reach the model: a provider switch (its cloud endpoint is not relayed),
    or a ``settings.json`` ``env`` that sets ``ANTHROPIC_BASE_URL`` to anything but an
    ``http://127.0.0.1:PORT`` endpoint (the CLI would take it over the relay's URL, and go nowhere)."""
    why = [f"{key} is set: the CLI talks to that cloud directly" for key in PROVIDERS if environ.get(key)]
    for where, value in settings_env.items():
        if where.endswith("env.ANTHROPIC_BASE_URL") and not re.fullmatch(r"http://127\.0\.0\.1:\d+/?", value):
            why.append(
                f"{where.rsplit(':env.', 1)[0]}: env.ANTHROPIC_BASE_URL = {value} replaces the relay's URL"
            )
    return why

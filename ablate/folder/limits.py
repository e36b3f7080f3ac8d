"""The per-session limits as the manifest records them (``isolation.limits``, docs/ARCHITECTURE.md#limits):
their defaults, their minimums and the ``--limit WHAT=SIZE`` parse. :mod:`ablate.isolate.limits` holds them."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import Field

from ablate.core.errors import UsageError
from ablate.core.specs import Spec

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?", re.IGNORECASE)
#: The least each limit may be: below it a session cannot start (the CLI's own RSS, threads, transcript
#: and start-up requests).
MINIMUMS = dict(disk=16 << 20, memory=512 << 20, processes=64, stdout=64 << 10, stderr=64 << 10,
                request=1 << 20, forwarder_memory=16 << 20)  # fmt: skip


def parse_size(text: str) -> int:
    """``2GiB``, ``512M``, ``64k``, ``1048576`` → bytes (binary units; ``B`` and ``i`` optional)."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a size (a number with an optional unit: 512MiB, 2G, 64k)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def show(what: str, value: int) -> str:
    """A limit's value for people (and ``--limit``): a count for ``processes``, else ``2GiB``."""
    if what == "processes":
        return str(value)
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size and value % (size // 16) == 0:
            return f"{value / size:g}{unit}"
    return f"{value} bytes"


class Limits(Spec):
    """The manifest's ``isolation.limits``: each limit of every session of the invocation (bytes; processes
    a count) and how each was enforced here (``enforced_by``)."""

    disk: int = 2 << 30
    """Bytes a session may add under its slot's folder (its view's upper folders)."""
    memory: int = 4 << 30
    """Memory of the session's processes together."""
    processes: int = 1024
    """Tasks (processes and threads) of the session at once."""
    stdout: int = 16 << 20
    """Bytes the session may write to its stdout."""
    stderr: int = 16 << 20
    """Bytes the session may write to its stderr."""
    request: int = 32 << 20
    """Bytes of one request body sent through the relay (the Messages API's own limit is 32 MB)."""
    forwarder_memory: int = 256 << 20
    """Bytes of request bodies the forwarder holds in memory at once, over all sessions."""
    enforced_by: dict[str, str] = Field(default_factory=dict)
    """Limit → the mechanism that held it here (``cgroup v1``, ``RLIMIT_AS per process, total RSS
    watched`` …)."""


LIMITS = tuple(n for n in Limits.model_fields if n != "enforced_by")


def parse_limits(values: Sequence[str], option: str = "--limit") -> Limits:
    """``WHAT=SIZE`` pairs over the defaults; a bad pair is a located :class:`UsageError` (exit 2)."""
    given: dict[str, int] = {}
    for value in values:
        what, eq, size = value.partition("=")
        what = what.strip().replace("-", "_")
        where = f"{option} {value}"
        if not eq or what not in LIMITS:
            raise UsageError(
                f"{where}: expected WHAT=SIZE with WHAT one of {', '.join(LIMITS)}",
                hint=f"e.g. {option} disk=4GiB {option} processes=512",
            )
        try:
            got = int(size) if what == "processes" else parse_size(size)
        except ValueError as exc:
            said = "not a whole number of tasks" if what == "processes" else str(exc)
            hint = f"e.g. {option} {what}={show(what, MINIMUMS[what] * 4)}"
            raise UsageError(f"{where}: {said}", hint=hint) from None
        if got < MINIMUMS[what]:
            raise UsageError(
                f"{where}: below {show(what, MINIMUMS[what])}, the least a session needs to start",
                hint=f"give {what} at least {show(what, MINIMUMS[what])}",
            )
        given[what] = got
    return Limits(**given)


def limit_error(what: str, limits: Limits) -> str:
    """The item's error for a session stopped at a limit."""
    value = show(what, getattr(limits, what))
    return (
        f"limit:{what}: the session went over its {what} limit of {value} and was stopped "
        f"(raise it with --limit {what}=SIZE)"
    )

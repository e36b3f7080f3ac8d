"""A watchdog that kills a run's sessions when the runner dies, however it dies (``kill -9`` included): the
kernel closes the runner's pipe to it, and it kills every process tagged with the run's prefix
(:func:`ablate.core.proc.kill_tagged`). A session outliving its runner would write a stdout file no plan
record describes, and keep a cell busy."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import IO

from ablate.core.proc import kill_tagged


def main(argv: list[str]) -> int:
    """The watchdog process: wait for the pipe from the runner to close, then kill the tagged processes."""
    os.setsid()  # a Ctrl-C to the runner's process group must not take the watchdog first
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(4096):
            pass
    kill_tagged(argv[0])
    return 0


class Watchdog:
    """Kills every process tagged ``prefix…`` once :meth:`close` is called or the owner dies."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "ablate.core.watchdog", prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._pipe: IO[bytes] | None = self._proc.stdin

    def close(self, *, wait: bool = True) -> None:
        """Release the watchdog: it kills what is still tagged, then exits."""
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None
        if self._proc is not None and wait:
            self._proc.wait(timeout=30)
            self._proc = None

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

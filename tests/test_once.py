"""core.once: a probe worked out once per process, even when threads ask for it at the same time."""

from __future__ import annotations

import threading
import time

from ablate.core.once import once


def test_computes_once_for_concurrent_and_later_callers() -> None:
    calls: list[int] = []

    @once
    def probe() -> int:
        """The docstring stays."""
        time.sleep(0.05)  # long enough for the other threads to arrive while it runs
        calls.append(1)
        return len(calls)

    got: list[int] = []
    threads = [threading.Thread(target=lambda: got.append(probe())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [1, 1, 1, 1] and probe() == 1 and calls == [1]
    assert probe.__doc__ == "The docstring stays."

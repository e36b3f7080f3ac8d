"""A value worked out once per process, the first time it is asked for (a probe that starts processes)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def once(compute: Callable[[], T]) -> Callable[[], T]:
    """``compute`` wrapped so it runs at most once per process: callers arriving while it runs wait for its
    value (under a lock, so two threads never start the probe twice); every later call returns that value."""
    lock = threading.Lock()
    done: list[T] = []

    @functools.wraps(compute)
    def get() -> T:
        with lock:
            if not done:
                done.append(compute())
            return done[0]

    return get

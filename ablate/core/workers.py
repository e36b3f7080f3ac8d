"""Mapping a function over items in forked worker processes, in order: the pool of ``ablate mine``, ``usage``
and ``recover``."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

A = TypeVar("A")
T = TypeVar("T")


def in_workers(fn: Callable[[A], T], items: Sequence[A], jobs: int) -> Iterator[T]:
    """``fn`` of each item, in order, in ``jobs`` forked worker processes (here when ``jobs`` is 1 or there is
    one item); ``fn`` is module-level and its values are pickled back.

    What the process holds when it starts is frozen (``gc.freeze``, never undone): the collector stops walking
    the interpreter's imports, here and in the workers, whose pages it would copy (``ablate mine`` over 108 MB:
    1,639 → 1,481 M instructions; undone, the walk comes back at exit). Its callers are commands that end with
    it."""
    gc.freeze()
    if jobs <= 1 or len(items) < 2:
        yield from map(fn, items)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(jobs, len(items))) as pool:
        # Chunks of about a hundredth of the items: few round trips, and still an even split at the end.
        yield from pool.map(fn, items, chunksize=max(1, min(64, len(items) // (jobs * 8))))

"""Mapping a function over items in forked worker processes, in order: the pool of ``ablate mine``, ``usage``
and ``recover``."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import TypeVar

A = TypeVar("A")
T = TypeVar("T")

#: The most items a worker is handed at once.
CHUNK = 32


def in_workers(fn: Callable[[A], T], items: Iterable[A], jobs: int) -> Iterator[T]:
    """``fn`` of each item, in order, in ``jobs`` forked worker processes (here when ``jobs`` is 1 or there is
    one item); ``fn`` is module-level and its values are pickled back. A chunk is an eighth of a worker's
    share, at most :data:`CHUNK` items (few round trips, an even split at the end); only the items that decide
    that size are read before the workers start, so a generator (``mine`` walking a tree) overlaps them.

    What the process holds when it starts is frozen (``gc.freeze``, never undone): the collector stops walking
    the interpreter's imports, here and in the workers, whose pages it would copy (``ablate mine`` over 108 MB:
    1,639 → 1,481 M instructions; undone, the walk comes back at exit). Its callers end with it."""
    gc.freeze()
    if jobs <= 1:
        yield from map(fn, items)
        return
    first = list(islice(rest := iter(items), CHUNK * jobs * 8))
    if len(first) < 2:
        yield from map(fn, first)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(jobs, len(first))) as pool:
        yield from pool.map(fn, chain(first, rest), chunksize=max(1, min(CHUNK, len(first) // (jobs * 8))))

"""Mapping a function over items in forked worker processes, in order: the pool of ``ablate mine``, ``usage``
and ``recover``."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import TypeVar

A = TypeVar("A")
T = TypeVar("T")


def in_workers(fn: Callable[[A], T], items: Iterable[A], jobs: int) -> Iterator[T]:
    """``fn`` of each item, in order, in ``jobs`` forked worker processes (here when ``jobs`` is 1 or there is
    one item); ``fn`` is module-level and its values are pickled back. Items that are not a sequence are taken
    as they come, so the workers start while the caller is still finding the rest (``ablate mine``'s walk).

    What the process holds when it starts is frozen (``gc.freeze``, never undone): the collector stops walking
    the interpreter's imports, here and in the workers, whose pages it would copy (``ablate mine`` over 108 MB:
    1,639 → 1,481 M instructions; undone, the walk comes back at exit). Its callers are commands that end with
    it."""
    gc.freeze()
    if isinstance(items, Sequence):
        # Chunks of about a hundredth of the items: few round trips, and still an even split at the end.
        chunk, jobs = max(1, min(64, len(items) // (jobs * 8))), min(jobs, len(items))
    else:
        chunk = 16  # the count is not known yet
    it = iter(items)
    head = list(islice(it, 2))
    if jobs <= 1 or len(head) < 2:
        yield from map(fn, chain(head, it))
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(fn, chain(head, it), chunksize=chunk)

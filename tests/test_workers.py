"""The worker pool of ``mine``, ``usage`` and ``recover``: results in the items' order, whatever the pool, and
workers that start while a generator is still finding the items."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablate.core.workers import CHUNK, in_workers


def _square(x: int) -> int:
    return x * x


@pytest.mark.parametrize("generated", [False, True], ids=["list", "generator"])
@pytest.mark.parametrize("n", [0, 1, 2, 37, 300, 2 * CHUNK * 3 * 8 + 5])
@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_results_come_in_the_items_order(n: int, jobs: int, generated: bool) -> None:
    items = (i for i in range(n)) if generated else list(range(n))
    assert list(in_workers(_square, items, jobs)) == [i * i for i in range(n)]


def _mark_first(item: tuple[str, int]) -> int:
    folder, i = item
    if i == 0:
        Path(folder, "started").touch()
    return i


def test_workers_start_on_the_first_items_while_the_rest_are_still_being_found(tmp_path: Path) -> None:
    """The generator waits, past the items that size the chunks, until a worker has mined the first item: a
    pool that read every item before starting would leave it waiting out its 30 s."""
    jobs, waited = 2, []
    ahead = CHUNK * jobs * 8  # what in_workers reads before it starts the pool

    def items() -> Iterator[tuple[str, int]]:
        for i in range(ahead + 40):
            if i == ahead + 1:
                deadline = time.monotonic() + 30
                while not (tmp_path / "started").exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
                waited.append((tmp_path / "started").exists())
            yield str(tmp_path), i

    assert list(in_workers(_mark_first, items(), jobs)) == list(range(ahead + 40))
    assert waited == [True]

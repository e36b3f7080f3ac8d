"""The worker pool of ``mine``, ``usage`` and ``recover``: results in the items' order, however they come."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ablate.core.workers import in_workers


def _square(x: int) -> int:
    return x * x


def _items(n: int, taken: list[int]) -> Iterator[int]:
    for i in range(n):
        taken.append(i)
        yield i


@pytest.mark.parametrize("n", [0, 1, 2, 37])
@pytest.mark.parametrize("jobs", [1, 2])
def test_items_as_they_come_give_their_results_in_order(n: int, jobs: int) -> None:
    taken: list[int] = []
    assert list(in_workers(_square, _items(n, taken), jobs)) == [i * i for i in range(n)]
    assert taken == list(range(n))
    assert list(in_workers(_square, list(range(n)), jobs)) == [i * i for i in range(n)]

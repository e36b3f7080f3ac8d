"""The worker pool of ``mine``, ``usage`` and ``recover``: results in the items' order, whatever the pool."""

from __future__ import annotations

import pytest

from ablate.core.workers import in_workers


def _square(x: int) -> int:
    return x * x


@pytest.mark.parametrize("n", [0, 1, 2, 37, 300])
@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_results_come_in_the_items_order(n: int, jobs: int) -> None:
    assert list(in_workers(_square, list(range(n)), jobs)) == [i * i for i in range(n)]

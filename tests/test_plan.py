"""Planning: every item once, seeded order within (task, repeat) blocks, whole-block shards."""

from __future__ import annotations

import pytest

from ablate.core.errors import UsageError
from ablate.run.plan import (
    Shard,
    block_order,
    blocks,
    make_plan,
    parse_shard,
    plan_sha256,
    shard_items,
)

CELLS = [f"C{i}" for i in range(12)]


def test_plan_has_every_item_once_in_repeat_major_blocks() -> None:
    items = make_plan(["a", "b"], CELLS, repeats=2, seed=1)
    assert len(items) == 48
    assert [i.order for i in items] == list(range(48))
    assert len({i.item for i in items}) == 48
    assert items[0].item.startswith("a__") and items[0].item.endswith("__r00")
    # blocks: (r0, a), (r0, b), (r1, a), (r1, b); each holds all twelve cells once
    assert blocks(items) == [(0, "a"), (0, "b"), (1, "a"), (1, "b")]
    for k in range(4):
        block = items[12 * k : 12 * (k + 1)]
        assert sorted(i.cell for i in block) == sorted(CELLS)
        assert len({(i.task, i.repeat) for i in block}) == 1


def test_order_is_seeded_and_differs_between_blocks() -> None:
    one = [i.item for i in make_plan(["a", "b"], CELLS, repeats=2, seed=7)]
    assert one == [i.item for i in make_plan(["a", "b"], CELLS, repeats=2, seed=7)]
    assert one != [i.item for i in make_plan(["a", "b"], CELLS, repeats=2, seed=8)]
    orders = {tuple(block_order(CELLS, seed=7, task=t, repeat=r)) for t in "ab" for r in range(2)}
    assert len(orders) == 4  # no block reuses another's order, so no cell always runs first
    assert list(block_order(CELLS, seed=7, task="a", repeat=0)) != CELLS


def test_plan_hash_depends_on_shape_only() -> None:
    a = make_plan(["a"], CELLS, repeats=1, seed=3)
    b = make_plan(["a"], CELLS, repeats=1, seed=3)
    b[0].attempts = []
    assert plan_sha256(a) == plan_sha256(b)
    assert plan_sha256(a) != plan_sha256(make_plan(["a"], CELLS, repeats=1, seed=4))


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_shards_partition_the_plan_by_whole_blocks(n: int) -> None:
    items = make_plan(["a", "b"], CELLS, repeats=2, seed=1)
    shares = [shard_items(items, Shard(k, n)) for k in range(1, n + 1)]
    flat = [i.item for s in shares for i in s]
    assert sorted(flat) == sorted(i.item for i in items)  # disjoint and complete
    for share in shares:
        assert [i.order for i in share] == sorted(i.order for i in share)
        for key in {(i.repeat, i.task) for i in share}:
            assert sum(1 for i in share if (i.repeat, i.task) == key) == 12  # whole blocks only
    assert [i.item for i in shard_items(items, Shard(2, n))] == [i.item for i in shares[1 if n > 1 else 0]]


def test_too_many_shards_and_bad_specs_are_usage_errors() -> None:
    items = make_plan(["a"], CELLS, repeats=2, seed=1)
    with pytest.raises(UsageError, match="only 2"):
        shard_items(items, Shard(1, 3))
    for bad in ("0/2", "3/2", "x", "1/0", "1-2"):
        with pytest.raises(UsageError):
            parse_shard(bad)
    assert parse_shard(" 2/8 ") == Shard(2, 8)
    assert Shard(2, 8).suffix == "-shard-2-of-8"


def test_plan_rejects_empty_and_duplicate_input() -> None:
    with pytest.raises(UsageError):
        make_plan([], CELLS, repeats=1, seed=1)
    with pytest.raises(UsageError):
        make_plan(["a"], CELLS, repeats=0, seed=1)
    with pytest.raises(UsageError, match="duplicate cell"):
        make_plan(["a"], ["C0", "C0"], repeats=1, seed=1)

"""Planning a run: every (task, cell, repeat) item, its order and shards (its cost: ``ablate.run.estimate``).
Items come in (repeat, task) blocks, repeat-major, each shuffled from the seed; shards take whole blocks
(docs/ARCHITECTURE.md#running-sessions says why)."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ablate.core.errors import RunFolderError, UsageError
from ablate.folder.layout import PlanItem, RunManifest, item_id

#: Assumed size of one API call when nothing has been observed yet: Claude Code's system prompt, tool
#: definitions and a short conversation come to ~21k input tokens (measured: a one-word answer reports
#: 21,204), plus a few hundred output tokens.
ASSUMED_INPUT_TOKENS = 21_000
ASSUMED_OUTPUT_TOKENS = 400
#: Assumed API calls per session when nothing has been observed: capped by ``--max-turns``.
ASSUMED_CALLS_PER_SESSION = 6
#: Most items one plan holds (tasks × cells × repeats): 100 000 sessions is months of runs and a plan.jsonl of
#: tens of MB; beyond it the plan is refused before anything is drawn or written.
MAX_PLAN_ITEMS = 100_000


@dataclass(frozen=True)
class Shard:
    """Shard ``k`` of ``n`` (1-based), as in ``--shard 2/8``."""

    k: int
    n: int

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"

    @property
    def suffix(self) -> str:
        """Folder-name suffix of a shard's run folder."""
        return f"-shard-{self.k}-of-{self.n}"


_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str) -> Shard:
    """Parse ``K/N`` (1 <= K <= N)."""
    m = _SHARD_RE.match(text)
    if not m:
        raise UsageError(f"--shard {text!r}: expected K/N, e.g. 2/8", hint="K counts from 1")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= k <= n:
        raise UsageError(f"--shard {text}: K must be between 1 and N (N >= 1)")
    return Shard(k, n)


T = TypeVar("T")


def block_order(cells: Sequence[T], *, seed: int, task: str, repeat: int) -> list[T]:
    """The cells (or (cell, model) slots) of one (task, repeat) block in their seeded random order."""
    rng = random.Random(f"ablate-order:{seed}:{task}:{repeat}")
    order = list(cells)
    rng.shuffle(order)
    return order


def block_items(
    task: str, cells: Sequence[str], repeat: int, *, seed: int, models: Sequence[str], start: int
) -> list[PlanItem]:
    """One (task, repeat) block's items, every cell on every model, in one shuffled sweep."""
    slots = [(c, m) for c in cells for m in (models or (None,))]
    return [
        PlanItem(item=item_id(task, c, repeat, m), task=task, cell=c, repeat=repeat, order=start + i, model=m)
        for i, (c, m) in enumerate(block_order(slots, seed=seed, task=task, repeat=repeat))
    ]


def make_plan(
    tasks: Sequence[str],
    cells: Sequence[str],
    *,
    repeats: int,
    seed: int,
    cells_in: Callable[[int], Sequence[str]] | None = None,
    models: Sequence[str] = (),
) -> list[PlanItem]:
    """Every item of a run, in execution order; ``cells_in``: the cells repeat r's blocks run when not every
    cell (a drawn piece design's control and draw)."""
    if repeats < 1:
        raise UsageError(f"--repeats {repeats}: must be at least 1")
    if not tasks:
        raise UsageError("no tasks to plan")
    if not cells:
        raise UsageError("no cells to plan")
    # a drawn piece design's repeats run some of the cells; the bound is checked before any is listed
    size = len(tasks) * len(cells) * repeats if cells_in is None else len(tasks) * repeats
    per = None if size > MAX_PLAN_ITEMS or cells_in is None else [list(cells_in(r)) for r in range(repeats)]
    if per is not None:
        size = len(tasks) * sum(len(c) for c in per)
    size *= max(1, len(models))
    if size > MAX_PLAN_ITEMS:
        raise UsageError(
            f"--repeats {repeats}: the plan would hold {size} items ({len(tasks)} tasks × {len(cells)} cells × "
            f"{repeats} repeats"
            + (f" × {len(models)} models" if models else "")
            + f"), more than the {MAX_PLAN_ITEMS} one plan may hold",
            hint="lower --repeats, or run fewer tasks or cells per plan",
        )
    for what, ids in (("task", tasks), ("cell", cells)):
        if dup := sorted({i for i in ids if list(ids).count(i) > 1}):
            raise UsageError(f"duplicate {what} ids in the plan: {', '.join(dup)}")
    items: list[PlanItem] = []
    for r in range(repeats):
        for t in tasks:
            items += block_items(
                t, cells if per is None else per[r], r, seed=seed, models=models, start=len(items)
            )
    return items


def block_key(item: PlanItem) -> tuple[int, str]:
    return (item.repeat, item.task)


def blocks(items: Iterable[PlanItem]) -> list[tuple[int, str]]:
    """The (repeat, task) blocks of a plan, in execution order."""
    seen: dict[tuple[int, str], int] = {}
    for it in sorted(items, key=lambda i: i.order):
        seen.setdefault(block_key(it), len(seen))
    return list(seen)


def shard_items(items: Sequence[PlanItem], shard: Shard | None) -> list[PlanItem]:
    """The items shard ``k/n`` runs: whole blocks, block ``b`` (0-based, in order) to shard ``b mod n + 1``."""
    ordered = sorted(items, key=lambda i: i.order)
    if shard is None or shard.n == 1:
        return ordered
    index = {b: i for i, b in enumerate(blocks(ordered))}
    if shard.n > len(index):
        raise UsageError(
            f"--shard {shard}: the plan has only {len(index)} (task, repeat) blocks, so at most {len(index)} shards",
            hint="shards take whole blocks so that every cell of a block runs on the same machine",
        )
    return [it for it in ordered if index[block_key(it)] % shard.n == shard.k - 1]


def plan_sha256(items: Iterable[PlanItem]) -> str:
    """Hash of the plan's shape (item ids and orders), independent of attempts."""
    h = hashlib.sha256()
    for it in sorted(items, key=lambda i: i.order):
        h.update(f"{it.order}\t{it.item}\n".encode())
    return h.hexdigest()


def new_seed() -> int:
    """A fresh order seed (recorded in the manifest)."""
    return random.SystemRandom().randrange(1, 2**31)


def next_round_items(
    manifest: RunManifest,
    plan: Sequence[PlanItem],
    cells: Sequence[str],
    repeat: int,
    skip: Iterable[str] = (),
) -> list[PlanItem]:
    """The items of round ``repeat`` for ``cells`` on every task but ``skip``, each block shuffled."""
    items: list[PlanItem] = []
    order = max((p.order for p in plan), default=-1) + 1
    known = {p.item for p in plan}
    skipped = set(skip)
    for t in (t for t in manifest.tasks if t.id not in skipped):
        items += block_items(
            t.id, cells, repeat, seed=manifest.seed, models=manifest.models, start=order + len(items)
        )
    if clash := next((i.item for i in items if i.item in known), None):
        raise RunFolderError(f"plan.jsonl already holds {clash}: an adaptive round never runs twice")
    return items

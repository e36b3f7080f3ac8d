"""What the runner does to a session's tree before and after the session: the scheduler owns *when*, the hook
(``ablate.grade``) *what*, so ``run`` sits upstream of ``grade`` with no import between them."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ablate.folder.layout import RunFolder
from ablate.setup.tasks import Task


class HookRefused(Exception):
    """The hook refused the tree (a seed path through a symlink, …): the attempt is an error, not retried."""


class TreeState(Protocol):
    """What :meth:`TreeHook.before` kept about the seeded start (a snapshot to diff against)."""

    def discard(self) -> None: ...


class TreeHook(Protocol):
    def before(self, task: Task, checkout: Path) -> TreeState:
        """Prepare ``checkout`` for ``task`` (raise :class:`HookRefused` to refuse it)."""
        ...

    def after(
        self, folder: RunFolder, item: str, attempt: int, task: Task, checkout: Path, state: TreeState
    ) -> None:
        """Look at the checkout the session left (before it is reset) and record what it found."""
        ...

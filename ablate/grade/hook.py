"""The runner's tree hook: seed files before a session, execution checks after it."""

from __future__ import annotations

from pathlib import Path

from ablate.folder.layout import RunFolder
from ablate.grade.checkout import Baseline, UnsafePath, apply_seed_files
from ablate.grade.record import grade_attempt
from ablate.run.hooks import HookRefused, TreeState
from ablate.setup.tasks import Task


class GradingHook:
    """Writes each task's seed files and snapshots the start; grades the checkout the session left."""

    def before(self, task: Task, checkout: Path) -> TreeState:
        try:
            return apply_seed_files(task, checkout)
        except UnsafePath as exc:
            raise HookRefused(f"seed files not written: {exc}") from exc

    def after(
        self, folder: RunFolder, item: str, attempt: int, task: Task, checkout: Path, state: TreeState
    ) -> None:
        assert isinstance(state, Baseline)
        grade_attempt(folder, item, attempt, task, checkout, state)

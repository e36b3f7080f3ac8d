"""What a run's task split says about a cell's dev change (``ablate.grade.splits``), as report.json keeps it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class HoldoutFinding(BaseModel):
    """A cell whose dev gain reverses on the holdout tasks (a task-level test)."""

    model_config = ConfigDict(extra="ignore")  # as the report's models: a newer ablate's fields are read past

    cell: str
    metric: str
    kind: Literal["overfitting", "within-noise", "untested"]
    """overfitting: a significant reversal; within-noise: a reversal the data cannot tell from noise;
    untested: a reversal with fewer than two tasks in a split (nothing can be tested)."""
    dev_delta: float
    """Mean over dev tasks of the task's mean change (cell − control; lower-is-better metrics: control − cell)."""
    holdout_delta: float
    """The same on holdout."""
    n_dev_tasks: int
    n_holdout_tasks: int
    p: float | None
    """One-sided exact permutation p of dev > holdout over task means (None: untested)."""
    message: str
    """One line for the report."""

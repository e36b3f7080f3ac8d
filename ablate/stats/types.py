"""Result types shared by every statistic: a value is either computed or explicitly not computable."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NotComputable:
    """A statistic the data cannot give, with the reason (never a magic number such as 0, 1 or NaN)."""

    reason: str
    """Why, in words a report can print (``one paired block: nothing can be significant (n < 2)``)."""


@dataclass(frozen=True)
class Interval:
    """A confidence interval."""

    low: float
    high: float
    level: float
    """Confidence level (0.95)."""
    method: str
    """How it was computed (``wilson``, ``newcombe-paired``, ``bootstrap-stratified-percentile``)."""

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class PairedResult:
    """One paired comparison of a metric between a cell and the control (rates for binary metrics, means for
    counts and costs); ``interval`` and ``p`` are :class:`NotComputable` when the data cannot give them."""

    n_pairs: int
    """Paired (task, repeat) blocks compared."""
    cell_value: float | None
    """The cell's rate or mean (None: no blocks)."""
    control_value: float | None
    """The control's rate or mean."""
    delta: float | None
    """cell_value − control_value."""
    interval: Interval | NotComputable
    """Interval for delta."""
    p: float | NotComputable
    """Two-sided p of the paired test, unadjusted."""
    method: str
    """The test (``exact-binomial-discordant``, ``sign-flip-permutation``)."""
    gained: int | None = None
    """Binary metrics: blocks where only the cell succeeded."""
    lost: int | None = None
    """Binary metrics: blocks where only the control succeeded."""

    @property
    def p_value(self) -> float | None:
        return self.p if isinstance(self.p, float) else None

"""The metric registry: every outcome ablate compares between cells, declared once (:data:`METRICS`); every
stage that compares reads it, so adding an entry is adding a metric (docs/EXTENDING.md#adding-a-metric)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ablate.core.errors import UsageError

if TYPE_CHECKING:  # the registry loads no pydantic: the command line reads it for its help
    from ablate.folder.result import ItemResult

#: How a metric's values and changes are written: a ``rate`` in percent (changes in points), ``usd`` in
#: dollars, a ``count`` or a ``score`` as a plain number.
Unit = Literal["rate", "count", "usd", "score"]


@dataclass(frozen=True)
class Metric:
    """One metric ablate measures per session and compares between cells."""

    name: str
    label: str
    unit: Unit
    higher_is_better: bool
    value: Callable[[ItemResult], float | None] | None = None
    """The metric's value of one result (None: the result has none); None for a graded metric."""
    graded: bool = False
    """Read from ``grades/<item>.json`` (checks, judge): the report compares it only when some item has it."""
    primary_names: tuple[str, ...] = ()
    """``--primary`` spellings besides the name itself, the first one shown in help."""

    @property
    def binary(self) -> bool:
        """0/1 per session: its means are rates, written in percent and their changes in points."""
        return self.unit == "rate"

    def fmt_value(self, v: float | None) -> str:
        if v is None:
            return "–"
        if self.unit == "rate":
            return f"{100 * v:.0f}%"
        if self.unit == "usd":
            return f"${v:.4f}"
        return f"{v:.2f}"

    def fmt_delta(self, v: float | None) -> str:
        if v is None:
            return "–"
        if self.unit == "rate":
            return f"{100 * v:+.0f} pts"
        if self.unit == "usd":
            return f"{'+' if v >= 0 else '−'}${abs(v):.4f}"
        return f"{v:+.2f}"


def _pitfall_free(res: ItemResult) -> float:
    return 0.0 if any(n for n in res.pitfall_hits.values()) else 1.0


def _turns(res: ItemResult) -> float | None:
    return None if res.turns is None else float(res.turns)


def _tool_calls(res: ItemResult) -> float | None:
    return None if res.session is None else float(res.session.total.tool_calls)


def _cost_usd(res: ItemResult) -> float | None:
    return None if res.cost_usd is None else float(res.cost_usd)


#: Every metric, in report order (the session metrics first, then the graded ones).
METRICS: tuple[Metric, ...] = (
    Metric("pitfall_free", "pitfall-free rate", "rate", True, _pitfall_free, primary_names=("pitfall-free",)),
    Metric("turns", "turns", "count", False, _turns),
    Metric("tool_calls", "tool calls", "count", False, _tool_calls, primary_names=("tool-calls",)),
    Metric("cost_usd", "cost USD", "usd", False, _cost_usd, primary_names=("cost",)),
    Metric("checks_passed", "checks-passed rate", "rate", True, graded=True, primary_names=("checks",)),
    Metric(
        "checks_score", "grader score", "score", True, graded=True, primary_names=("score", "grader-score")
    ),
    Metric("judge_pass", "judge-pass rate", "rate", True, graded=True, primary_names=("judge",)),
)
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
#: The metric every run is decided on unless ``--primary`` (or a plugin-eval suite) says otherwise.
DEFAULT_PRIMARY = "pitfall_free"
#: Names of the binary metrics (rates) and of those where a larger value is better.
BINARY_METRICS: frozenset[str] = frozenset(m.name for m in METRICS if m.binary)
HIGHER_IS_BETTER: frozenset[str] = frozenset(m.name for m in METRICS if m.higher_is_better)
METRIC_LABELS: dict[str, str] = {m.name: m.label for m in METRICS}
#: ``--primary`` spellings → metric names.
PRIMARY_NAMES: dict[str, str] = {alias: m.name for m in METRICS for alias in (m.name, *m.primary_names)}
#: The ``--primary`` spellings help shows: each metric's first one, the default first.
PRIMARY_CHOICES: tuple[str, ...] = tuple(
    (m.primary_names or (m.name,))[0] for m in sorted(METRICS, key=lambda m: m.name != DEFAULT_PRIMARY)
)


def metric_named(name: str) -> Metric:
    """The registered metric called ``name``; an unknown name is a :class:`UsageError`."""
    if name not in BY_NAME:
        raise UsageError(f"{name}: not a metric", hint="metrics: " + ", ".join(BY_NAME))
    return BY_NAME[name]


def fmt_value(name: str, v: float | None) -> str:
    """A value of the metric ``name`` as the reports write it (a name not registered: a plain number)."""
    return BY_NAME[name].fmt_value(v) if name in BY_NAME else Metric(name, name, "count", False).fmt_value(v)


def fmt_delta(name: str, v: float | None) -> str:
    """A change of the metric ``name`` as the reports write it (a name not registered: a plain number)."""
    return BY_NAME[name].fmt_delta(v) if name in BY_NAME else Metric(name, name, "count", False).fmt_delta(v)

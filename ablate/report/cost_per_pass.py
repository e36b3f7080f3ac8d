"""Cost of a pass (docs/GUIDE.md, "The report"): a cell's Σ session cost / Σ passes of the primary outcome
(pitfall-free when the primary is not pass/fail) over its scored sessions, a session's cost the wire's, else
its recorded spend. Interval: scipy's seeded BCa bootstrap (:func:`scipy.stats.bootstrap`) of passes per dollar
over sessions, inverted (BCa respects a monotone transform, and passes per dollar has no zero denominator). A
cell against the control: the same bootstrap over their paired blocks of the ratio of their costs per pass,
cheaper when its interval lies below 1 at the report's level (uncorrected: a trade-off, not a verdict)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from ablate.folder.metrics import BINARY_METRICS, DEFAULT_PRIMARY, METRIC_LABELS, fmt_value
from ablate.report.blocks import layers_text
from ablate.report.context import Context
from ablate.report.items import Item, Key
from ablate.report.model import CellSummary, Comparison, CostPerPass, Report

#: How a trade-off said from the stripped side starts (the ranking's others are the layer's own).
STRIPPING = "stripping "
#: Bootstrap resamples (the intervals are descriptive; their seed is the run's).
RESAMPLES = 4000

Arrays = npt.NDArray[np.float64]


def pass_metric(primary: str) -> str:
    """The outcome a pass is counted on: the primary when it is pass/fail, else pitfall-free."""
    return primary if primary in BINARY_METRICS else DEFAULT_PRIMARY


def session_cost(it: Item) -> float | None:
    """The wire's cost of the session, else its recorded spend."""
    wire = it.result.wire
    return wire.cost_usd if wire is not None and wire.cost_usd is not None else it.result.cost_usd


def _interval(
    data: Sequence[Arrays], stat: Callable[..., Arrays], alpha: float, seed: int
) -> tuple[float, float] | None:
    """The 1 − alpha BCa interval of ``stat`` over the rows of ``data`` (paired); None when degenerate."""
    if len(data[0]) < 2:
        return None
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # degenerate data: a nan interval, said as none
        ci = sps.bootstrap(
            tuple(data),
            stat,
            paired=True,
            vectorized=True,
            n_resamples=RESAMPLES,
            confidence_level=1 - alpha,
            rng=np.random.default_rng(seed),
        ).confidence_interval
    lo, hi = float(ci.low), float(ci.high)
    return None if np.isnan(lo) or np.isnan(hi) else (lo, hi)


def _per_dollar(p: Arrays, c: Arrays, axis: int = -1) -> Arrays:
    return np.asarray(p.sum(axis=axis) / c.sum(axis=axis), dtype=np.float64)


def cell_cost_per_pass(
    items: Sequence[Item], metric: str, alpha: float, seed: int
) -> tuple[CostPerPass | None, str | None]:
    """A cell's cost per pass over its scored ``items`` with its interval, or None and why."""
    rows = [(it.values[metric], session_cost(it)) for it in items if metric in it.values]
    label = METRIC_LABELS.get(metric, metric)
    if not rows:
        return None, f"no scored session has {label}"
    if unpriced := sum(c is None for _, c in rows):
        return None, f"{unpriced} of {len(rows)} sessions have no known cost"
    p, c = (np.array(x, dtype=np.float64) for x in zip(*rows, strict=True))
    if not p.sum():
        return None, f"no session passed ({label}: 0 of {len(p)})"
    value = float(c.sum() / p.sum())
    ci = _interval((p, c), _per_dollar, alpha, seed) if c.sum() > 0 else None
    return CostPerPass(
        value=value,
        ci_low=None if ci is None else 1 / ci[1],
        ci_high=None if ci is None or ci[0] <= 0 else 1 / ci[0],
        passes=int(p.sum()),
        sessions=len(p),
        metric=metric,
    ), None


def _ratio(cp: Arrays, cc: Arrays, kp: Arrays, kc: Arrays, axis: int = -1) -> Arrays:
    """The cell's cost per pass over the control's."""
    return _per_dollar(kp, kc, axis) / _per_dollar(cp, cc, axis)


def cheaper_per_pass(
    scored: dict[Key, Item], cell: str, control: str, metric: str, alpha: float, seed: int
) -> tuple[float, float, float] | None:
    """The cell's cost per pass relative to the control's − 1 and its interval, when that lies below 0."""

    def side(c: str) -> dict[tuple[str, int], tuple[float, float | None]]:
        return {
            (t, r): (it.values[metric], session_cost(it))
            for (t, cid, r), it in scored.items()
            if cid == c and metric in it.values
        }

    mine, theirs = side(cell), side(control)
    rows = [(*mine[b], *theirs[b]) for b in sorted(mine.keys() & theirs.keys())]
    if not rows or any(x is None for row in rows for x in row):
        return None
    cp, cc, kp, kc = (np.array(x, dtype=np.float64) for x in zip(*rows, strict=True))
    if not (cp.sum() and kp.sum() and cc.sum() and kc.sum()):
        return None
    ci = _interval((cp, cc, kp, kc), _ratio, alpha, seed)
    if ci is None or ci[1] >= 1:
        return None
    return float(_ratio(cp, cc, kp, kc)) - 1, ci[0] - 1, ci[1] - 1


def cheaper_tradeoffs(ctx: Context, comparisons: Sequence[Comparison]) -> dict[str, str]:
    """Cell → ``stripping skills: −18% cost per pass [−30%, −5%], no real change in pitfall-free`` for every
    ranked cell cheaper per pass than the control."""
    metric = pass_metric(ctx.primary)
    pooled = {x.cell: x for x in comparisons if x.task is None and x.metric == metric}
    out: dict[str, str] = {}
    for cell in (c.id for c in ctx.ranked()):
        got = cheaper_per_pass(ctx.items.scored, cell, ctx.control.id, metric, ctx.alpha, ctx.manifest.seed)
        if got is None:
            continue
        x = pooled.get(cell)
        label = METRIC_LABELS.get(metric, metric)
        passes = (
            f"{label} {100 * x.delta:+.0f} pts (real)"
            if x is not None and x.real and x.delta is not None
            else f"no real change in {label}"
        )
        d, lo, hi = (f"{100 * v:+.0f}%".replace("-", "−") for v in got)
        out[cell] = f"{STRIPPING}{layers_text(ctx.layers[cell])}: {d} cost per pass [{lo}, {hi}], {passes}"
    return out


def per_pass_text(cell: CellSummary) -> str:
    """``$0.0412 [$0.0300, $0.0700]``, or ``– (no session passed …)``."""
    c = cell.cost_per_pass
    if c is None:
        return f"– ({cell.cost_per_pass_note})" if cell.cost_per_pass_note else "–"
    hi = fmt_value("cost_usd", c.ci_high) if c.ci_high is not None else "unbounded"
    ci = f" [{fmt_value('cost_usd', c.ci_low)}, {hi}]" if c.ci_low is not None else ""
    return fmt_value("cost_usd", c.value) + ci


def per_pass_line(report: Report) -> str:
    """The terminal's line: each cell's cost per pass, for the run's model and outcome."""
    label = METRIC_LABELS.get(m := pass_metric(report.primary_metric), m)
    cells = "; ".join(f"{c.cell} {per_pass_text(c)}" for c in report.cells)
    sim = ", simulated" if report.run.simulated else ""
    return f"cost per pass ({report.run.model}, {label}{sim}): {cells}"

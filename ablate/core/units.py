"""How a metric's values and changes are written, one unit per metric (percent points for the binary metrics,
dollars for cost): shared by the report's tables and the grade stage's findings, so they read alike."""

from __future__ import annotations

BINARY_METRICS: frozenset[str] = frozenset({"pitfall_free", "checks_passed", "judge_pass"})
"""Metrics that are 0/1 per attempt: their means are rates, written in percent and their changes in points."""


def fmt_value(metric: str, v: float | None) -> str:
    if v is None:
        return "–"
    if metric in BINARY_METRICS:
        return f"{100 * v:.0f}%"
    if metric == "cost_usd":
        return f"${v:.4f}"
    return f"{v:.2f}"


def fmt_delta(metric: str, v: float | None) -> str:
    if v is None:
        return "–"
    if metric in BINARY_METRICS:
        return f"{100 * v:+.0f} pts"
    if metric == "cost_usd":
        return f"{'+' if v >= 0 else '−'}${abs(v):.4f}"
    return f"{v:+.2f}"

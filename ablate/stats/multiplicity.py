"""Holm's step-down adjustment (Holm 1979), applied across every comparison of a report."""

from __future__ import annotations

from collections.abc import Sequence


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order.

    Sorted ascending, the i-th smallest (from 0) of m is multiplied by (m − i), made non-decreasing by a
    running maximum and capped at 1 (Holm S, "A simple sequentially rejective multiple test procedure",
    Scand J Statist 6:65–70, 1979). A hypothesis is rejected at level α when its adjusted p ≤ α, which is
    the same as Holm's sequential rule. scipy has no Holm (``false_discovery_control`` is BH/BY only)."""
    m = len(pvalues)
    for p in pvalues:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-value {p!r} outside [0, 1]")
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted

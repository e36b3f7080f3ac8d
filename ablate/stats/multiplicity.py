"""Holm's step-down adjustment (Holm 1979), applied across every comparison of a report."""

from __future__ import annotations

from collections.abc import Sequence


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order: the i-th smallest (from 0) of m times (m − i), made
    non-decreasing and capped at 1 (Holm S, "A simple sequentially rejective multiple test procedure", Scand J
    Statist 6:65–70, 1979); adjusted p ≤ α is Holm's sequential rule. scipy has none (BH/BY only)."""
    from ablate.stats.sequential import holm_adjust

    for p in pvalues:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-value {p!r} outside [0, 1]")
    return [float(p) for p in holm_adjust(list(pvalues))]

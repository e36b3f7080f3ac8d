"""Holm's step-down adjustment (Holm 1979), applied across every comparison of a report."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order: the i-th smallest (from 0) of m times (m − i), made
    non-decreasing and capped at 1 (Holm S, "A simple sequentially rejective multiple test procedure", Scand J
    Statist 6:65–70, 1979); adjusted p ≤ α is Holm's sequential rule. scipy has none (BH/BY only)."""
    for p in pvalues:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-value {p!r} outside [0, 1]")
    return [float(p) for p in holm_adjust(list(pvalues))]


def holm_adjust(p: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Holm-adjusted p-values along the last axis, vectorised (:func:`holm` says how);
    NaN (not computable) counts as 1."""
    pv = np.nan_to_num(np.asarray(p, dtype=np.float64), nan=1.0)
    m = pv.shape[-1]
    order = np.argsort(pv, axis=-1, kind="stable")
    sorted_p = np.take_along_axis(pv, order, axis=-1)
    scaled = np.minimum(1.0, sorted_p * (m - np.arange(m)))
    running = np.maximum.accumulate(scaled, axis=-1)
    out = np.empty_like(running)
    np.put_along_axis(out, order, running, axis=-1)
    return out

"""Did a cell's effect change between two independent runs? A task-stratified Welch test of the change in its
paired pass/fail differences (``ablate diff``, ``ablate gate --baseline``; docs/ARCHITECTURE.md#statistics).

Per task, a run's per-block differences d = cell − control in {−1, 0, 1}; Δ = the mean over tasks of the
task's mean difference (tasks weighted alike), the change Δ_B − Δ_A, its standard error
√(Σ_t w_t² (v_At / n_At + v_Bt / n_Bt)) and Welch–Satterthwaite degrees of freedom. A difference's variance
comes from its counts of +1 and −1 with half a count added to each (p± = (n± + ½) / (n + 1)), so a run whose
differences are all 0 still has a spread. Why not a permutation of blocks between the runs (Romano JP, "On the
behavior of randomization tests without a group invariance assumption", JASA 85:686–692, 1990): the docs.
Calibration and power are simulated in ``tests/test_run_change.py``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RunChange:
    """Δ_B − Δ_A, its interval and two-sided p (None: nothing to test)."""

    change: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None


def _counts(d: Sequence[float]) -> tuple[int, int, int]:
    a = np.asarray(d, dtype=np.float64)
    if a.size and not np.all(np.isin(a, (-1.0, 0.0, 1.0))):
        raise ValueError("paired differences of a pass/fail outcome are −1, 0 or 1")
    return int(np.sum(a > 0)), int(np.sum(a < 0)), int(a.size)


def _mean_var(plus: FloatArray, minus: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Mean difference and its smoothed per-block variance from the counts of +1 and −1 among n."""
    mean = (plus - minus) / n
    pp, pm = (plus + 0.5) / (n + 1), (minus + 0.5) / (n + 1)
    return mean, pp + pm - (pp - pm) ** 2


def run_change(
    a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], *, level: float = 0.95
) -> RunChange:
    """The change of a cell's effect from run ``a`` to run ``b`` (task → its per-block differences in each),
    over the tasks both runs have blocks of: the change, its Welch t interval at ``level`` and the two-sided
    p (None where no difference is nonzero: nothing to test)."""
    tasks = [t for t in a if len(a[t]) and t in b and len(b[t])]
    if not tasks:
        return RunChange(None, None, None, None)
    ca = np.array([_counts(a[t]) for t in tasks], dtype=np.float64).T
    cb = np.array([_counts(b[t]) for t in tasks], dtype=np.float64).T
    w = 1.0 / len(tasks)
    ma, va = _mean_var(ca[0], ca[1], ca[2])
    mb, vb = _mean_var(cb[0], cb[1], cb[2])
    change = float(np.sum(w * (mb - ma)))
    parts = np.concatenate([w * w * va / ca[2], w * w * vb / cb[2]])
    dof = np.concatenate([ca[2], cb[2]]) - 1
    se = math.sqrt(float(parts.sum()))
    df = float(parts.sum() ** 2 / np.sum(np.where(dof > 0, parts**2 / np.maximum(dof, 1), 0.0)))
    half = float(sps.t.ppf(0.5 + level / 2, df)) * se
    p = float(2 * sps.t.sf(abs(change) / se, df)) if np.any(ca[0] + ca[1] + cb[0] + cb[1]) else None
    return RunChange(change, max(-2.0, change - half), min(2.0, change + half), p)

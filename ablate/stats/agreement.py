"""Agreement between two raters (a judge and a human, two judges): Cohen's kappa."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

from ablate.stats.types import NotComputable


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | NotComputable:
    """Cohen's kappa (Cohen 1960): (p_o − p_e) / (1 − p_e) over paired labels ``a[i]``, ``b[i]``; not
    computable without items or when chance agreement is 1 (one and the same label throughout: 0/0)."""
    if len(a) != len(b):
        raise ValueError("one label per item from each rater")
    n = len(a)
    if n == 0:
        return NotComputable("no items rated by both")
    po = sum(1 for x, y in zip(a, b, strict=True) if x == y) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in ca) / (n * n)
    if pe == 1.0:
        return NotComputable("both raters gave one and the same label to every item (chance agreement = 1)")
    return (po - pe) / (1 - pe)

"""The paired-comparison pipeline shared by the report and ``ablate compare`` (docs/ARCHITECTURE.md#statistics):
pair two sides on their (task, repeat) blocks, test the pairs as the metric's kind asks, Holm-adjust a family
and mark what is real. One pipeline, so a report's comparison and compare's contrast of the same data agree."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate.folder.metrics import metric_named
from ablate.stats.multiplicity import holm
from ablate.stats.proportions import paired_binary
from ablate.stats.resampling import paired_mean
from ablate.stats.types import Interval, NotComputable, PairedResult

#: A block: one (task, repeat).
Block = tuple[str, int]


@dataclass
class Pairs:
    """Both sides' values on the blocks where both have one, in block order, and each block's task."""

    cell: list[float] = field(default_factory=list)
    control: list[float] = field(default_factory=list)
    strata: list[str] = field(default_factory=list)


def pair_blocks(
    cell: Mapping[Block, float], control: Mapping[Block, float], blocks: Iterable[Block]
) -> Pairs:
    """The pairs of ``cell`` and ``control`` over ``blocks`` (in that order), skipping a block either lacks."""
    out = Pairs()
    for b in blocks:
        if b in cell and b in control:
            out.cell.append(cell[b])
            out.control.append(control[b])
            out.strata.append(b[0])
    return out


def paired_test(
    metric: str, pairs: Pairs, *, level: float = 0.95, seed: int = 0, p_floor: float | None = None
) -> PairedResult:
    """``cell`` − ``control``: the exact discordant-block test for a rate, sign-flip otherwise (to ``p_floor``)."""
    if metric_named(metric).binary:
        return paired_binary([x > 0.5 for x in pairs.cell], [y > 0.5 for y in pairs.control], level=level)
    return paired_mean(pairs.cell, pairs.control, pairs.strata, level=level, seed=seed, p_floor=p_floor)


def holm_real(
    tests: Sequence[tuple[float | None, float | None]], alpha: float
) -> list[tuple[float | None, bool]]:
    """One family of (p, Δ): each test's Holm-adjusted p (None when it has no p) and whether it is real."""
    adjusted = holm_some([p for p, _d in tests])
    return [(a, bool(a is not None and a <= alpha and d)) for a, (_p, d) in zip(adjusted, tests, strict=True)]


def holm_some(ps: Sequence[float | None]) -> list[float | None]:
    """Holm over the p-values there are; a test without one stays without one."""
    idx = [i for i, p in enumerate(ps) if p is not None]
    adjusted = dict(zip(idx, holm([ps[i] or 0.0 for i in idx]), strict=True))
    return [adjusted.get(i) for i in range(len(ps))]


def interval(r: PairedResult) -> tuple[float | None, float | None, str | None]:
    """The result's interval as (low, high, method); all None when it could not be computed."""
    iv = r.interval
    return (iv.low, iv.high, iv.method) if isinstance(iv, Interval) else (None, None, None)


def estimate(r: PairedResult) -> dict[str, Any]:
    """The result's Δ, interval and p under the names a report's and a compare's rows give them."""
    lo, hi, method = interval(r)
    return {"delta": r.delta, "ci_low": lo, "ci_high": hi, "ci_method": method, "p": r.p_value}


def not_computable(r: PairedResult) -> list[str]:
    """Why the p-value or the interval is missing, each reason once, p first."""
    return list(dict.fromkeys(x.reason for x in (r.p, r.interval) if isinstance(x, NotComputable)))


def zero_tests(diffs: Sequence[Sequence[float]], *, alpha: float, seed: int) -> list[dict[str, Any]]:
    """Per subject, its per-block values tested against 0 (mean, t interval, sign-flip p), Holm over them."""
    results = [paired_mean(list(d), [0.0] * len(d), level=1 - alpha, seed=seed % 2**32) for d in diffs]
    marked = holm_real([(r.p_value, r.delta) for r in results], alpha)
    return [
        {"effect": r.delta, **dict(zip(("ci_low", "ci_high"), interval(r)[:2], strict=True)), "p_adjusted": p_adj,
         "real": real, "blocks": r.n_pairs, "reason": "; ".join(not_computable(r)) or None}
        for r, (p_adj, real) in zip(results, marked, strict=True)
    ]  # fmt: skip


def fmt_holm(p: float | None, none: str = "—") -> str:
    return none if p is None else f"{p:.3g}"


def fmt_tested(row: Mapping[str, Any]) -> str:
    """``(Holm p 0.004, 12 blocks)``: a :func:`zero_tests` row's adjusted p and blocks, as its sentence ends."""
    return f"(Holm p {fmt_holm(row['p_adjusted'], 'not computable')}, {row['blocks']} blocks)"

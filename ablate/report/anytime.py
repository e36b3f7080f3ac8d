"""The comparisons of a sequential report (an adaptive run, or a fixed run read before its end): the number of
blocks was not fixed in advance, so a fixed-n p is no test. Each cell's pooled comparison on the sequential
primary outcome takes the anytime-valid p, its Holm adjustment, the confidence sequence and so its ``real``
mark from :class:`~ablate.report.model.SequentialReport`; every other comparison stays as description, never
real (docs/ARCHITECTURE.md#statistics)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ablate.folder.adaptive import CellLook
from ablate.report.families import layer_verdict
from ablate.report.model import Comparison, Family, SequentialReport

ANYTIME_METHOD = (
    "anytime-valid: beta-binomial mixture e-process on the discordant blocks (p = 1 / its running maximum), "
    "Holm over the run's comparisons; interval: betting confidence sequence"
)
#: What a fixed-n figure's method says in a sequential design (description, never a test).
DESCRIPTIVE = " (fixed-n, descriptive in a sequential design)"


def anytime_figures(look: CellLook) -> dict[str, Any]:
    """A cell's pooled comparison as the anytime-valid look tests it: its p, Holm p and confidence sequence."""
    return {
        "p": look.p_anytime,
        "p_adjusted": look.p_holm,
        "ci_low": look.cs_low,
        "ci_high": look.cs_high,
        "method": ANYTIME_METHOD,
    }


def anytime_comparisons(
    comparisons: Sequence[Comparison], seq: SequentialReport, *, alpha: float
) -> list[Comparison]:
    """Every comparison, the sequential primary ones re-tested and the others made descriptive."""
    last = seq.looks[-1].cells if seq.looks else {}
    out: list[Comparison] = []
    for c in comparisons:
        look = last.get(c.cell)
        if c.task is None and c.metric == seq.primary and look is not None and look.blocks:
            real = bool(look.p_holm <= alpha and c.delta)
            out.append(
                c.model_copy(
                    update={
                        **anytime_figures(look),
                        "ci_method": "confidence sequence (betting, anytime-valid)",
                        "real": real,
                        "verdict": layer_verdict(c.metric, c.delta, real, look.p_anytime),
                        "not_computable": None,
                    }
                )
            )
        else:
            verdict = "not computable" if c.p is None else "draw"
            out.append(
                c.model_copy(update={"real": False, "verdict": verdict, "method": c.method + DESCRIPTIVE})
            )
    return out


def anytime_families(families: Sequence[Family], seq: SequentialReport, alpha: float) -> list[Family]:
    """The families with their rule rewritten for a sequential design."""
    rule = (
        f"sequential design: the pooled {seq.primary} comparison of each cell is tested with an anytime-valid "
        f"p-value, Holm-adjusted over the run's {len(seq.decisions)} comparisons, real at ≤ {alpha}; its "
        f"interval is the {100 * (1 - seq.alpha):.0f}% confidence sequence; every other p-value is fixed-n and "
        "descriptive (none is marked real)"
    )
    return [f.model_copy(update={"rule": rule}) for f in families]

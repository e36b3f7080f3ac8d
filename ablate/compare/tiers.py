"""Tiers of a comparison: how many repeats, and what a run of that size can and cannot claim."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ablate.core.errors import UsageError

TierName = Literal["smoke", "rigorous"]

#: Repeats per (task, arm): the tier's floor and default.
TIER_REPEATS: dict[TierName, int] = {"smoke": 5, "rigorous": 30}


@dataclass(frozen=True)
class Tier:
    name: TierName
    repeats: int


def resolve_tier(name: str, repeats: int | None) -> Tier:
    """The tier and its repeats; ``repeats`` may go above the tier's floor, never below it."""
    if name not in TIER_REPEATS:
        raise UsageError(f"--tier {name!r}: expected smoke or rigorous")
    tier: TierName = "smoke" if name == "smoke" else "rigorous"
    floor = TIER_REPEATS[tier]
    if repeats is None:
        return Tier(tier, floor)
    if repeats < floor:
        raise UsageError(
            f"--repeats {repeats}: the {tier} tier needs at least {floor} repeats per (task, arm)",
            hint=f"pass --repeats {floor} or more, or --tier smoke for a quick look"
            if tier == "rigorous"
            else f"pass --repeats {floor} or more",
        )
    return Tier(tier, repeats)


def detectable_effect(blocks: int, p_control: float, comparisons: int) -> float | None:
    """The smallest pass-rate change the exact paired test detects with 80% power over ``blocks`` blocks from
    ``p_control``, at Holm's first step 0.05 / ``comparisons``, arms independent in a block (the cautious figure)."""
    from ablate.stats.power import detectable_binary
    from ablate.stats.types import NotComputable

    d = detectable_binary(blocks, min(1.0, max(0.0, p_control)), alpha=0.05 / max(1, comparisons))
    return None if isinstance(d, NotComputable) else d


def claims(tier: Tier, blocks: int, contrasts: int, p_control: float | None) -> dict[str, list[str]]:
    """What this run can and cannot claim (``p_control``: the baseline's pooled rate; None: ½, the worst case)."""
    base = 0.5 if p_control is None else p_control
    mde = detectable_effect(blocks, base, contrasts)
    can: list[str] = []
    cannot: list[str] = []
    if mde is not None:
        mde_text = f"{100 * mde:.0f} points"
        can.append(
            f"detect a pooled pass-rate change of about {mde_text} or more from the baseline's {100 * base:.0f}% "
            f"with 80% power ({blocks} paired (task, repeat) blocks; exact test at 0.05/{contrasts}, arms "
            "assumed independent: the cautious figure); per-task contrasts need larger effects"
        )
    else:
        cannot.append(
            f"detect any pass-rate change from the baseline's {100 * base:.0f}% with 80% power: {blocks} paired "
            f"blocks are too few for the exact test at 0.05/{contrasts} (add repeats or tasks)"
        )
    can.append(f"mark a difference real only after Holm correction across all {contrasts} contrasts")
    cannot += [
        "speak for tasks beyond these (the task set was chosen, not sampled)",
        "speak for another model or Claude Code version than the pinned one",
    ]
    if tier.name == "smoke":
        can.insert(0, "catch a broken arm, a plumbing error or a large effect cheaply")
        cannot.insert(0, "support a published claim: a draw at this size is not evidence of no effect")
    else:
        can.insert(0, "support a claim about these tasks, with the intervals shown")
        if mde is not None:
            cannot.insert(0, f"rule out effects smaller than about {mde_text}: a draw means 'not detected'")
    return {"can": can, "cannot": cannot}

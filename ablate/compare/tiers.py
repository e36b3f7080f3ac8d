"""Tiers of a comparison: how many repeats, and what a run of that size can and cannot claim."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ablate.core.errors import UsageError

TierName = Literal["smoke", "rigorous"]

#: Repeats per (task, arm): the tier's floor and default.
TIER_REPEATS: dict[TierName, int] = {"smoke": 5, "rigorous": 30}

#: z for a two-sided 5% test plus z for 80% power.
_Z_SUM = 1.959964 + 0.841621


@dataclass(frozen=True)
class Tier:
    name: TierName
    repeats: int

    @property
    def floor(self) -> int:
        return TIER_REPEATS[self.name]


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


def detectable_effect(blocks: int) -> float | None:
    """The smallest difference in pass rate (0..1) a paired comparison over ``blocks`` (task, repeat) blocks
    detects with 80% power at a two-sided 5% level, in the worst case (rates near 50%, arms independent):
    ``(z_0.975 + z_0.8) * sqrt(2 * 0.25 / n)``. Correlated arms (the usual case) detect smaller effects."""
    if blocks < 2:
        return None
    return min(1.0, _Z_SUM * math.sqrt(0.5 / blocks))


def claims(tier: Tier, blocks: int, contrasts: int) -> dict[str, list[str]]:
    """What this run can and cannot claim, with the computed figures."""
    mde = detectable_effect(blocks)
    mde_text = f"{100 * mde:.0f} points" if mde is not None else "nothing (fewer than 2 blocks)"
    can = [
        f"detect a pass-rate difference of about {mde_text} or more at 80% power "
        f"({blocks} paired (task, repeat) blocks per contrast; worst-case variance)",
        f"mark a difference real only after Holm correction across all {contrasts} contrasts",
    ]
    cannot = [
        "speak for tasks beyond these (the task set was chosen, not sampled)",
        "speak for another model or Claude Code version than the pinned one",
    ]
    if tier.name == "smoke":
        can.insert(0, "catch a broken arm, a plumbing error or a large effect cheaply")
        cannot.insert(0, "support a published claim: a draw at this size is not evidence of no effect")
    else:
        can.insert(0, "support a claim about these tasks, with the intervals shown")
        cannot.insert(0, f"rule out effects smaller than about {mde_text}: a draw means 'not detected'")
    return {"can": can, "cannot": cannot}

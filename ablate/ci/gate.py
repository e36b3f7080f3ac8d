"""``ablate gate``: one CI decision from a report — pass, fail with the reasons, or inconclusive (exit 4).

The default rule and ``--require`` (:mod:`ablate.ci.rules`) are README.md's "The gate"; :func:`decide` applies
them in that order: untrustworthy (an unsealed run too, unless ``--allow-unsealed``), a real primary
regression, too small to detect ``detect``, else pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ablate.ci.rules import Rule
from ablate.ci.verdicts import Evidence, Finding, check_subject

Outcome = Literal[
    "better",
    "unconfirmed gain",
    "no real difference",
    "regressed",
    "untrustworthy",
    "rule failed",
    "inconclusive",
]

#: Default bound on the share of plan items left out of the comparisons (failed, not run, flagged).
MAX_EXCLUDED = 0.10
#: Default change of the primary rate a run must be able to detect (80% power, weaker direction) to pass.
DETECT = 0.2
#: Why an unsealed run is not trusted by default.
UNSEALED_REASON = "the sessions were not sealed (--unsealed: the host's network and sockets)"


@dataclass(frozen=True)
class Needed:
    """The run that would detect ``detect`` (80% power, both directions, the exact test) at this run's figures."""

    detect: float
    blocks_per_cell: int | None
    repeats: int | None
    this_run_repeats: int
    sessions: int | None
    cost_usd: float | None
    note: str = ""
    """Why the figures are missing, or what they assume."""

    def text(self) -> str:
        if self.repeats is None:
            return f"what a run that detects it would take is not computable ({self.note})"
        cost = f", about ${self.cost_usd:.2f}" if self.cost_usd is not None else ""
        return (
            f"detecting it takes {self.repeats} repeats (this run: {self.this_run_repeats}): "
            f"{self.blocks_per_cell} paired blocks per cell, {self.sessions} sessions{cost} ({self.note})"
        )


def needed(ev: Evidence, detect: float) -> Needed:
    """What :class:`Needed` says for ``ev``."""
    from ablate.stats.power import blocks_to_detect
    from ablate.stats.types import NotComputable

    s = ev.scale
    if s is None or not s.tasks:
        return Needed(detect, None, None, 0, None, None, "the report has no control rate")
    blocks = blocks_to_detect(s.base_rate, detect, s.alpha_each)
    if isinstance(blocks, NotComputable):
        return Needed(detect, None, None, s.repeats, None, None, blocks.reason)
    repeats = -(-blocks // s.tasks)
    sessions = repeats * s.sessions_per_repeat
    per = s.cost_per_session
    note = (
        f"exact discordant-block test at α/m {s.alpha_each:.2g} from the control's rate "
        f"{100 * s.base_rate:.0f}%" + (f", at this run's ${per:.4f} per session" if per is not None else "")
    )
    return Needed(
        detect, repeats * s.tasks, repeats, s.repeats, sessions, None if per is None else sessions * per, note
    )


@dataclass(frozen=True)
class RuleCheck:
    rule: str
    passed: bool
    detail: str


@dataclass
class GateResult:
    passed: bool
    outcome: Outcome
    headline: str
    evidence: Evidence
    reasons: list[str] = field(default_factory=list)
    """Why it failed (empty on a pass)."""
    checks: list[RuleCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    detect: float | None = DETECT
    """The change the run had to be able to detect (None: not required)."""
    inconclusive: list[str] = field(default_factory=list)
    """Subjects the run could not settle at ``detect`` (empty unless the outcome is inconclusive)."""
    needed: Needed | None = None
    """What a run that detects ``detect`` would take (inconclusive only)."""

    def to_json(self) -> dict[str, Any]:
        ev = self.evidence
        return {
            "schema_version": 1,
            "passed": self.passed,
            "outcome": self.outcome,
            "headline": self.headline,
            "reasons": self.reasons,
            "checks": [c.__dict__ for c in self.checks],
            "notes": self.notes,
            "source": str(ev.source),
            "kind": ev.kind,
            "primary": ev.primary,
            "detectable": ev.detectable,
            "detect": self.detect,
            "detect_test": ev.detect_test,
            "inconclusive": self.inconclusive,
            "needed": None if self.needed is None else self.needed.__dict__,
            "items": ev.items,
            "excluded": ev.excluded,
            "untrustworthy": ev.untrustworthy,
            "findings": [
                {
                    **{k: getattr(f, k) for k in _SHOWN},
                    "verdict": verdict_word(ev, f),
                    "detectable": f.detectable,
                }
                for f in ev.findings
            ],
        }


#: A finding's fields ``gate --json`` shows, in order (then its verdict word and detectable change).
_SHOWN = ("subject", "against", "label", "effect", "ci_low", "ci_high", "p_adjusted", "real", "no_op")


def verdict_word(ev: Evidence, f: Finding) -> str:
    """helps / hurts / draw for a layer; better / worse / draw for an arm; no-op; not computable."""
    if f.no_op:
        return "no-op"
    if f.effect is None:
        return "not computable"
    if f.good:
        return "helps" if ev.kind == "run" else "better"
    if f.bad:
        return "hurts" if ev.kind == "run" else "worse"
    return "draw"


def fmt_effect(ev: Evidence, x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f} pts" if ev.is_rate else f"{x:+.3g}"


def fmt_estimate(ev: Evidence, f: Finding) -> str:
    """``+40.0 pts [+30.0 pts, +50.0 pts]``: the effect and its interval."""
    return f"{fmt_effect(ev, f.effect)} [{fmt_effect(ev, f.ci_low)}, {fmt_effect(ev, f.ci_high)}]"


def _subject_text(ev: Evidence, f: Finding) -> str:
    if ev.kind == "run":
        return f"{f.subject} ({f.label}): the layer it strips"
    return f"{f.subject} against {f.against}"


def _check(ev: Evidence, rule: Rule) -> RuleCheck:
    if rule.subject.lower() in ("any", "all"):
        tested = [f for f in ev.findings if not f.no_op]
        results = [_holds(ev, rule, f) for f in tested]
        combine = any if rule.subject.lower() == "any" else all
        ok = bool(results) and combine(r[0] for r in results)
        detail = "; ".join(r[1] for r in results) or "no tested subject"
        return RuleCheck(rule.text, ok, detail)
    f = check_subject(ev, rule.subject, f"--require '{rule.text}'")
    ok, detail = _holds(ev, rule, f)
    return RuleCheck(rule.text, ok, detail)


def _holds(ev: Evidence, rule: Rule, f: Finding) -> tuple[bool, str]:
    est = f"{f.subject}: {fmt_estimate(ev, f)}"
    if f.no_op:
        return False, f"{f.subject} is a no-op cell (not tested)"
    if rule.claim == "not-worse":
        return (not f.bad), est + (", a real loss" if f.bad else ", no real loss")
    if not f.good:
        return False, est + ", not a real gain"
    if ev.kind == "compare" and f.claimed_better is False:
        return False, est + f", but compare's verdict failed {', '.join(f.why_not)}"
    if rule.min_effect is not None and (f.effect or 0.0) < rule.min_effect:
        return False, est + f", a real gain below the required {fmt_effect(ev, rule.min_effect)}"
    return True, est + ", a real gain"


def unsettled(ev: Evidence, detect: float | None) -> list[str]:
    """The tested subjects not real, not decided "no effect" at ``detect``, whose test cannot detect ``detect``."""
    if detect is None:
        return []
    out = []
    for f in ev.findings:
        if f.no_op or f.real:
            continue
        if f.no_effect_beyond is not None and f.no_effect_beyond <= detect + 1e-12:
            continue
        if f.detectable is not None and f.detectable <= detect + 1e-12:
            continue
        out.append(
            f"{f.subject} (detects {_pts(ev, f.detectable)} or more)"
            if f.detectable is not None
            else f"{f.subject} (too few blocks to state what it detects)"
        )
    return out


def _pts(ev: Evidence, x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} pts"


def decide(
    ev: Evidence,
    rules: Sequence[Rule],
    *,
    max_excluded: float = MAX_EXCLUDED,
    detect: float | None = DETECT,
    lost: Sequence[str] = (),
    allow_unsealed: bool = False,
) -> GateResult:
    """The gate's decision on ``ev`` under the default rule and ``rules``; ``lost``: each layer that helps less
    than in a ``--baseline`` run (:func:`ablate.report.rundiff.lost_help`), a regression."""
    reasons = [f"not trustworthy: {u}" for u in ev.untrustworthy]
    if ev.unsealed and not allow_unsealed:
        reasons.insert(0, f"not trustworthy: {UNSEALED_REASON} (pass --allow-unsealed to accept that)")
    share = ev.excluded / ev.items if ev.items else 0.0
    if ev.items and share > max_excluded:
        reasons.append(
            f"not trustworthy: {ev.excluded} of {ev.items} items ({100 * share:.0f}%) were excluded from the "
            f"comparisons, above the bound of {100 * max_excluded:.0f}% (--max-excluded)"
        )
    untrusted = bool(reasons)
    regressed = [f for f in ev.findings if f.bad]
    for f in regressed:
        reasons.append(
            f"regressed: {_subject_text(ev, f)} {'hurts' if ev.kind == 'run' else 'is worse'} — primary "
            f"{ev.primary} {fmt_estimate(ev, f)}, adjusted p {f.p_adjusted:.3g}"
            if f.p_adjusted is not None
            else f"regressed: {_subject_text(ev, f)}"
        )
    reasons += [f"regressed: {r}" for r in ev.also_regressed]
    reasons += [f"regressed against the baseline: {r}" for r in lost]
    checks = [_check(ev, r) for r in rules]
    reasons += [f"rule '{c.rule}' failed: {c.detail}" for c in checks if not c.passed]
    notes = list(ev.notes) + [f"secondary (not gated): {s}" for s in ev.secondary]
    if ev.unsealed and allow_unsealed:
        notes.insert(0, f"{UNSEALED_REASON}, accepted with --allow-unsealed")
    mde = _detectable_text(ev)
    better = [f for f in ev.findings if f.good and f.claimed_better is not False]
    unconfirmed = [f for f in ev.findings if f.good and f.claimed_better is False]
    blind = [] if reasons else unsettled(ev, detect)
    need = needed(ev, detect) if blind and detect is not None else None
    headline = f"FAIL — {reasons[0]}" if reasons else ""
    if untrusted:
        outcome: Outcome = "untrustworthy"
    elif regressed or ev.also_regressed or lost:
        outcome = "regressed"
    elif reasons:
        outcome = "rule failed"
    elif blind:
        outcome = "inconclusive"
        said = need.text() if need is not None else ""
        headline = (
            f"INCONCLUSIVE — this run cannot detect a change of {_pts(ev, detect)} in {ev.detect_metric} with "
            f"80% power in both directions: {', '.join(blind)}; a regression that size could be there unseen. "
            f"{said[:1].upper()}{said[1:]}; or set --detect"
        )
    elif better:
        outcome = "better"
        names = ", ".join(f.subject for f in better)
        headline = (
            f"PASS — better: {names} ({'helps' if ev.kind == 'run' else 'beats the baseline'} for real)"
        )
    elif unconfirmed:
        outcome = "unconfirmed gain"
        why = "; ".join(f"{f.subject}: failed {', '.join(f.why_not)}" for f in unconfirmed)
        headline = f"PASS — a real pooled gain, not confirmed by compare's verdict ({why})"
    else:
        outcome = "no real difference"
        headline = f"PASS — no real difference on {ev.primary}; {mde}"
    if not reasons:  # a pass or an inconclusive gate says what the run detects
        notes.insert(0, mde)
    passed = not reasons and outcome != "inconclusive"
    return GateResult(passed, outcome, headline, ev, reasons, checks, notes, detect, blind, need)


def _detectable_text(ev: Evidence) -> str:
    if ev.detectable is None:
        why = f" ({ev.detectable_note})" if ev.detectable_note else ""
        return f"this run is too small to state the smallest effect it detects{why}"
    by = f" by the test that decides ({ev.detect_test})" if ev.detect_test else ""
    return (
        f"this run detects a pooled change of {ev.detect_metric} of about {_pts(ev, ev.detectable)} or more "
        f"in either direction with 80% power{by}, for every tested subject; smaller effects may be there "
        "undetected"
    )

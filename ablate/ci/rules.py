"""A team's own gate rules: the ``--require`` grammar and ``--min-effect``, parsed with located errors.

Grammar (words separated by spaces, case-insensitive)::

    rule     :=  subject claim [ "by" effect ]
    subject  :=  a cell id (C1) | an arm name (new) | "any" | "all"
    claim    :=  "helps" | "better"  |  "not" ("worse" | "hurts")
    effect   :=  a number: 0.1 (a rate's fraction or a count), 10% or 10pts (= 0.1)

``helps`` holds when the primary effect is real, positive and at least the effect; ``not hurts`` when it is not
real and negative; ``any`` when one tested subject does, ``all`` when every one does (no-op cells are not
tested). The effect compared is the point estimate, + = good."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ablate.core.errors import UsageError

Claim = Literal["better", "not-worse"]

_CLAIMS: dict[str, Claim] = {"helps": "better", "better": "better"}
_NEGATED: dict[str, Claim] = {"worse": "not-worse", "hurts": "not-worse"}
_EFFECT = re.compile(r"^([+]?\d+(?:\.\d+)?|[+]?\.\d+)(%|pts?)?$", re.IGNORECASE)


@dataclass(frozen=True)
class Rule:
    text: str
    subject: str
    """A cell id or arm name, or ``any`` / ``all``."""
    claim: Claim
    min_effect: float | None
    """Only for ``better``: the smallest acceptable point estimate (None: any real gain)."""


def _bad(text: str, col: int, message: str, hint: str) -> UsageError:
    pointer = " " * (len("--require '") + col) + "^"
    return UsageError(f"--require '{text}': {message}\n  {pointer}", hint=hint)


def parse_effect(text: str, where: str) -> float:
    """``0.1``, ``10%`` or ``10pts`` → 0.1; anything else is a located :class:`UsageError`."""
    m = _EFFECT.match(text.strip())
    if not m:
        raise UsageError(
            f"{where} {text!r}: expected a non-negative number (0.1), a percentage (10%) or points (10pts)"
        )
    value = float(m.group(1))
    return value / 100 if m.group(2) else value


def parse_rule(text: str, min_effect: float | None = None) -> Rule:
    """One ``--require`` value; ``min_effect`` is the default ``by`` of a better/helps claim."""
    words = [(m.start(), m.group(0)) for m in re.finditer(r"\S+", text)]
    hint = "write e.g. 'C1 helps', 'new better by 10pts', 'all not worse'"
    if len(words) < 2:
        col = words[0][0] + len(words[0][1]) if words else 0
        raise _bad(text, col, "expected a subject and a claim (helps, better, not worse)", hint)
    subject = words[0][1]
    col, word = words[1]
    i = 2
    if word.lower() == "not":
        if len(words) < 3 or words[2][1].lower() not in _NEGATED:
            at = words[2][0] if len(words) > 2 else col + len(word) + 1
            raise _bad(text, at, "expected 'worse' or 'hurts' after 'not'", hint)
        claim = _NEGATED[words[2][1].lower()]
        i = 3
    elif word.lower() in _CLAIMS:
        claim = _CLAIMS[word.lower()]
    else:
        raise _bad(text, col, f"unknown claim {word!r}: expected helps, better, not worse or not hurts", hint)
    effect = min_effect if claim == "better" else None
    if i < len(words):
        at, by = words[i]
        if by.lower() != "by" or i + 1 >= len(words):
            raise _bad(text, at, f"unexpected {by!r}: only 'by EFFECT' may follow the claim", hint)
        if claim != "better":
            raise _bad(text, at, "'by' goes with helps/better, not with 'not worse'", hint)
        at, value = words[i + 1]
        if not _EFFECT.match(value):
            raise _bad(text, at, f"{value!r} is not an effect: expected 0.1, 10% or 10pts", hint)
        effect = parse_effect(value, "--require")
        if i + 2 < len(words):
            raise _bad(text, words[i + 2][0], f"unexpected {words[i + 2][1]!r} after the effect", hint)
    return Rule(text=text.strip(), subject=subject, claim=claim, min_effect=effect)

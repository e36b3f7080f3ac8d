"""``tool_used``: how often the session called a tool (a plugin-eval ``tool_used`` grader)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ablate.checks.base import EndState, Graded, Verdict


class ToolUsed(Graded):
    """The session called ``tool`` (with an input matching ``input_match``) between ``min`` and ``max`` times."""

    kind: Literal["tool_used"]
    tool: str = Field(min_length=1)
    input_match: str | None = None
    """A regex searched in the call's input (compact JSON)."""
    min: int | None = Field(default=None, ge=0)
    """Fewest calls (default 1)."""
    max: int | None = Field(default=None, ge=0)
    """Most calls (default: no limit)."""

    def evaluate(self, end: EndState) -> Verdict:
        trace, missing = end.session(needs_calls=True)
        if trace is None:
            return None, missing
        n = len(trace.calls(self.tool, self.input_match))
        lo, hi = 1 if self.min is None else self.min, self.max
        ok = n >= lo and (hi is None or n <= hi)
        return ok, "" if ok else f"called {n}x (expected {lo}..{'∞' if hi is None else hi})"

    def describe(self) -> str:
        return self.tool

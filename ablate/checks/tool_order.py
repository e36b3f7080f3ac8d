"""``tool_order``: one tool call comes before another (a plugin-eval ``tool_order`` grader)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ablate.checks.base import EndState, Graded, Verdict
from ablate.core.specs import Spec


class ToolRef(Spec):
    """A tool call: the tool's name, and optionally a regex its input (as JSON text) must match."""

    tool: str = Field(min_length=1)
    """Tool name as the transcript records it (``Read``, ``mcp__server__tool``)."""
    input_match: str | None = None
    """A regex searched in the call's input, serialised as compact JSON."""


class ToolOrder(Graded):
    """The first call matching ``before`` comes before the first call matching ``after``."""

    kind: Literal["tool_order"]
    before: ToolRef
    after: ToolRef

    def evaluate(self, end: EndState) -> Verdict:
        trace, missing = end.session(needs_calls=True)
        if trace is None:
            return None, missing
        first = trace.calls(self.before.tool, self.before.input_match)
        second = trace.calls(self.after.tool, self.after.input_match)
        if not first or not second:
            return False, f"{self.before.tool if not first else self.after.tool} never called"
        ok = first[0] < second[0]
        why = f"{self.before.tool}@{first[0]} does not precede {self.after.tool}@{second[0]}"
        return ok, "" if ok else why

    def describe(self) -> str:
        return f"{self.before.tool} before {self.after.tool}"

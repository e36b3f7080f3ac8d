"""``regex``: a regex over the session's final answer, its tool-call trace, the paths it changed, or a file
(a plugin-eval ``regex`` grader; see ``claude plugin eval``)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from ablate.checks.base import EndState, Graded, RelPath, Verdict, compiled

#: ``regex`` flags, as ``claude plugin eval`` spells them (JavaScript's): ``i`` ignore case, ``m`` multi-line,
#: ``s`` dot matches newline; ``g``, ``u``, ``d`` and ``v`` change nothing here (matches are counted anyway).
REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "g": 0, "u": 0, "d": 0, "v": 0}


def regex_flags(flags: str) -> int:
    """Python ``re`` flags for a ``regex`` check's JavaScript flags (``ValueError`` for an unsupported one)."""
    out = 0
    for ch in flags:
        if ch not in REGEX_FLAGS:
            raise ValueError(
                f"flag {ch!r} is not supported (use i, m, s; g, u, d, v are accepted and ignored)"
            )
        out |= REGEX_FLAGS[ch]
    return out


class RegexCheck(Graded):
    """A regex over the session: its final answer, its tool-call trace, the paths it changed, or a file."""

    kind: Literal["regex"]
    pattern: Annotated[str, Field(min_length=1), AfterValidator(compiled)]
    """A Python regex (``claude plugin eval`` uses JavaScript's; the common syntax is shared)."""
    target: Literal["last_message", "trace", "files", "file"] = "last_message"
    """``last_message``: the final answer; ``trace``: one line per tool call (``name <input JSON>``);
    ``files``: the changed paths, one per line; ``file``: the content of ``file`` in the checkout."""
    file: RelPath | None = None
    """The file read when ``target = "file"``."""
    flags: str = ""
    """JavaScript-style flags (``i``, ``m``, ``s``)."""
    match: str = Field(default="contains", pattern=r"^(contains|not_contains|count:[0-9]+)$")
    """``contains``, ``not_contains`` or ``count:N`` (exactly N matches)."""

    @field_validator("flags")
    @classmethod
    def _flags(cls, v: str) -> str:
        regex_flags(v)
        return v

    def problems(self) -> list[tuple[str, str]]:
        if (self.target == "file") != (self.file is not None):
            return [("file", 'give `file` exactly when target = "file"')]
        return []

    def files(self) -> list[str]:
        return [self.file] if self.file is not None else []

    def describe(self) -> str:
        return self.file if self.target == "file" and self.file else self.target

    def evaluate(self, end: EndState) -> Verdict:
        text, why = self._text(end)
        if text is None:
            return None, why
        found = len(re.findall(self.pattern, text, regex_flags(self.flags)))
        if self.match == "contains":
            return found > 0, "" if found else "pattern not found"
        if self.match == "not_contains":
            return found == 0, "" if not found else f"pattern found {found} time(s)"
        want = int(self.match.removeprefix("count:"))
        return found == want, "" if found == want else f"found {found} matches (expected {want})"

    def _text(self, end: EndState) -> tuple[str | None, str]:
        """The text the pattern is searched in, or (None, why)."""
        if self.target == "file":
            assert self.file is not None
            data, why = end.read(self.file)
            if data is None:
                return None, f"{self.file}: {why}"
            return data.decode("utf-8", "replace"), ""
        if self.target == "files":
            return ("\n".join(end.changed), "") if end.changed is not None else (None, end.no_diff())
        trace, missing = end.session(needs_calls=self.target == "trace")
        if trace is None:
            return None, missing
        if self.target == "trace":
            return trace.trace_text(), ""
        if trace.last_message is None:
            return None, "the session has no final answer"
        return trace.last_message, ""

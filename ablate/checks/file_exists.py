"""``file_exists``: a path the session changed matches a glob, or none does (a plugin-eval ``file_exists``
grader)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from ablate.checks.base import EndState, Graded, Verdict


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A ``file_exists`` glob as ``claude plugin eval`` reads it: ``**/`` any folders (or none), ``**`` anything,
    ``*`` anything within a folder, ``?`` one character; the whole path must match."""
    out = "^"
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
            continue
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        out += "[^/]*" if ch == "*" else "." if ch == "?" else re.escape(ch)
        i += 1
    return re.compile(out + "$")


class FileExists(Graded):
    """A path the session changed matches the glob ``path`` (``exists = false``: none does)."""

    kind: Literal["file_exists"]
    path: str = Field(min_length=1)
    """A glob over checkout-relative paths: ``*`` within a folder, ``**`` across folders, ``?`` one char."""
    exists: bool = True
    """Whether a matching changed path must exist (true) or must not (false)."""

    def evaluate(self, end: EndState) -> Verdict:
        if end.changed is None:
            return None, end.no_diff()
        rx = glob_regex(self.path)
        hits = [p for p in end.changed if rx.match(p)]
        ok = bool(hits) == self.exists
        return ok, "" if ok else (f"changed: {', '.join(hits[:5])}" if hits else "no changed path matches")

    def describe(self) -> str:
        return self.path

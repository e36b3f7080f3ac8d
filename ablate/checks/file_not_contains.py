"""``file_not_contains``: the file does not contain a plain substring (a missing file passes)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ablate.checks.base import EndState, FileCheck, Verdict, file_or_verdict


class FileNotContains(FileCheck):
    """The file does not contain ``text`` (a missing file passes: it contains nothing)."""

    kind: Literal["file_not_contains"]
    text: str = Field(min_length=1)
    """The substring that must not occur."""

    def evaluate(self, end: EndState) -> Verdict:
        data, missing = file_or_verdict(end, self.file, absent=True)
        if data is None:
            return missing
        found = self.text.encode("utf-8") in data
        return not found, f"contains {self.text!r}" if found else ""

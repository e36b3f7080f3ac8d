"""``file_contains``: the file exists and contains a plain substring."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ablate.checks.base import EndState, FileCheck, Verdict, file_or_verdict


class FileContains(FileCheck):
    """The file exists and contains ``text`` (a plain substring)."""

    kind: Literal["file_contains"]
    text: str = Field(min_length=1)
    """The substring that must occur."""

    def evaluate(self, end: EndState) -> Verdict:
        data, missing = file_or_verdict(end, self.file, absent=False)
        if data is None:
            return missing
        found = self.text.encode("utf-8") in data
        return found, "" if found else f"does not contain {self.text!r}"

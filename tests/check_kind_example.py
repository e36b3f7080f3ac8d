"""The worked example of docs/EXTENDING.md#adding-a-check-kind, kept as a module the tests register."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ablate.checks.base import CheckSpec, EndState, RelPath, Verdict, file_or_verdict


class FileLines(CheckSpec):
    """The file exists and has at most ``max`` lines (a change that bloats it fails)."""

    kind: Literal["file_lines"]
    """Check kind."""
    file: RelPath
    """The file, relative to the checkout."""
    max: int = Field(ge=0)
    """The most lines it may have."""

    def evaluate(self, end: EndState) -> Verdict:
        data, missing = file_or_verdict(end, self.file, absent=False)
        if data is None:
            return missing
        n = len(data.splitlines())
        return n <= self.max, "" if n <= self.max else f"{n} lines, more than {self.max}"

    def describe(self) -> str:
        return self.file

    def files(self) -> list[str]:
        return [self.file]

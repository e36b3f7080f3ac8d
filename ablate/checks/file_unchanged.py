"""``file_unchanged``: the file is byte-identical to its state when the session started."""

from __future__ import annotations

from typing import Literal

from ablate.checks.base import CheckSpec, EndState, RelPath, Verdict


class FileUnchanged(CheckSpec):
    """The file is byte-identical to its state when the session started (after the seed files)."""

    kind: Literal["file_unchanged"]
    """Check kind."""
    file: RelPath
    """The file, relative to the checkout."""

    def evaluate(self, end: EndState) -> Verdict:
        return end.unchanged(self.file)

    def describe(self) -> str:
        return self.file

    def files(self) -> list[str]:
        return [self.file]

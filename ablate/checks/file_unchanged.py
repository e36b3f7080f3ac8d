"""``file_unchanged``: the file is byte-identical to its state when the session started."""

from __future__ import annotations

from typing import Literal

from ablate.checks.base import EndState, FileCheck, Verdict


class FileUnchanged(FileCheck):
    """The file is byte-identical to its state when the session started (after the seed files)."""

    kind: Literal["file_unchanged"]

    def evaluate(self, end: EndState) -> Verdict:
        return end.unchanged(self.file)

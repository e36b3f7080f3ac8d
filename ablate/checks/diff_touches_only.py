"""``diff_touches_only``: every path the session changed lies under one of the allowed paths."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from ablate.checks.base import CheckSpec, EndState, RelPrefix, Verdict


class DiffTouchesOnly(CheckSpec):
    """Every path the session changed (added, modified, deleted) lies under one of ``paths``."""

    kind: Literal["diff_touches_only"]
    paths: list[RelPrefix] = Field(min_length=1)
    """Allowed files, or folders ending in ``/``."""

    def evaluate(self, end: EndState) -> Verdict:
        if end.changed is None:
            return None, end.no_diff()
        outside = [p for p in end.changed if not _under(p, self.paths)]
        return not outside, f"changed outside the allowed paths: {', '.join(outside[:10])}" if outside else ""

    def describe(self) -> str:
        return ", ".join(self.paths)


def _under(path: str, prefixes: Sequence[str]) -> bool:
    """Whether ``path`` is one of ``prefixes``' files, or lies under one of its folders (``src/``)."""
    return any(path.startswith(p if p.endswith("/") else p + "/") or path == p for p in prefixes)

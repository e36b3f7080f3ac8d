"""What every check kind shares (docs/EXTENDING.md#adding-a-check-kind): the spec it extends, the end state of a
session it reads, and plain paths. Nothing a check reads is ever executed."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import AfterValidator, Field

from ablate.core.specs import Spec

Reader = Callable[[str], tuple[bytes | None, str]]
"""Reads a checkout-relative file: (bytes, "") or (None, why)."""
UnchangedTest = Callable[[str], tuple[bool | None, str]]
"""Whether a checkout-relative file is as it was at the start: (verdict, why)."""
Verdict = tuple[bool | None, str]
"""(passed, detail): True / False, or None when it could not be evaluated; detail says why (empty: passed)."""


@dataclass(frozen=True)
class ToolCall:
    """One tool call: the tool's name and its input as compact JSON (what ``input_match`` searches)."""

    name: str
    input_text: str


@dataclass
class SessionTrace:
    """The final answer and the tool calls of one session (None / empty list: not read)."""

    last_message: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    transcript_read: bool = False
    """Whether a transcript was read (without one, tool-call checks are not evaluable)."""

    def trace_text(self) -> str:
        """One line per tool call, ``name <input JSON>`` (a ``regex`` check's ``trace`` target)."""
        return "\n".join(f"{c.name} {c.input_text}" for c in self.tool_calls)

    def calls(self, tool: str, input_match: str | None) -> list[int]:
        """Indexes of the calls of ``tool`` whose input matches the regex ``input_match``."""
        rx = re.compile(input_match) if input_match else None
        return [
            i
            for i, c in enumerate(self.tool_calls)
            if c.name == tool and (rx is None or rx.search(c.input_text) is not None)
        ]


@dataclass(frozen=True)
class EndState:
    """What a check reads of an attempt: its files, whether one is unchanged, the changed paths, its trace."""

    read: Reader
    unchanged: UnchangedTest
    changed: list[str] | None
    """Paths the session added, modified or deleted (None: the diff could not be taken, see ``diff_error``)."""
    diff_error: str | None = None
    trace: SessionTrace | None = None
    """The session's final answer and tool calls (None: not available to this grading)."""

    def no_diff(self) -> str:
        return self.diff_error or "no diff"

    def session(self, needs_calls: bool) -> tuple[SessionTrace | None, str]:
        """The trace, or (None, why it cannot be read)."""
        if self.trace is None:
            return None, "the session's transcript and answer are not available to this grading"
        if needs_calls and not self.trace.transcript_read:
            return None, "no transcript: the session's tool calls are unknown"
        return self.trace, ""


def check_rel_path(value: str, *, folder: bool = False) -> str:
    """Refuse anything but a plain relative path inside the checkout (``src/a.py``; ``src/`` when ``folder``):
    ablate never writes git's own files (a hook written there would be executed); symlinks are checked where the
    checkout is touched."""
    if not value or value.strip() != value:
        raise ValueError("must be a non-empty relative path without surrounding spaces")
    if "\\" in value or "\x00" in value:
        raise ValueError(f"{value!r}: use forward slashes; backslashes and NUL are refused")
    if value.startswith("/") or (len(value) > 1 and value[1] == ":"):
        raise ValueError(f"{value!r}: absolute paths are refused; give a path relative to the checkout")
    body = value[:-1] if folder and value.endswith("/") else value
    parts = body.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise ValueError(
                f"{value!r}: empty, '.' and '..' components are refused (stay inside the checkout)"
            )
    if parts[0] == ".git":
        raise ValueError(f"{value!r}: git's own files are off limits")
    return value


RelPath = Annotated[str, AfterValidator(check_rel_path)]
"""A relative file path inside the checkout."""
RelPrefix = Annotated[str, AfterValidator(functools.partial(check_rel_path, folder=True))]
"""A relative file or folder path inside the checkout (``src/greet/``: everything under that folder)."""


def compiled(pattern: str, flags: int = 0) -> str:
    """``pattern`` if it compiles as a Python regex (a field validator's ``ValueError`` otherwise)."""
    try:
        re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"invalid regex: {exc}") from exc
    return pattern


class CheckSpec(Spec):
    """One ``[[checks]]`` table: deterministic, read-only, evaluated on the end state the session left."""

    kind: str
    """Check kind (each kind narrows it to its own literal)."""
    description: str = ""
    """What the check means, for the report."""

    def evaluate(self, end: EndState) -> Verdict:
        """This check's verdict on an attempt's end state."""
        raise NotImplementedError

    def describe(self) -> str:
        """What the report names the check by: the file it reads, the paths it allows, the tool it counts."""
        raise NotImplementedError

    def files(self) -> list[str]:
        """Checkout files the check reads (hashed at the start, so a change git ignores is still seen)."""
        return []

    def problems(self) -> list[tuple[str, str]]:
        """(field, message) of what is wrong across fields, which no single field's validation sees."""
        return []

    def graded(self) -> tuple[str | None, float]:
        """The name the check is reported under and its weight in the grader score."""
        return None, 1.0


class FileCheck(CheckSpec):
    """A check of one checkout file, named by it in the report."""

    file: RelPath
    """The file, relative to the checkout."""

    def describe(self) -> str:
        return self.file

    def files(self) -> list[str]:
        return [self.file]


class Graded(CheckSpec):
    """A check a plugin-eval grader becomes: reported under its name, weighted in the score."""

    name: str = ""
    """Reported under this name (a plugin-eval grader's file name)."""
    weight: float = Field(default=1.0, gt=0)
    """Weight in the task's grader score (``checks_score``)."""

    def graded(self) -> tuple[str | None, float]:
        return self.name or None, self.weight


def file_or_verdict(end: EndState, rel: str, *, absent: bool | None) -> tuple[bytes | None, Verdict]:
    """The bytes of ``rel``, or the verdict when it cannot be read: ``absent`` for a missing file, None
    (not evaluable) for anything else (a link out, too large, an unknown start)."""
    data, why = end.read(rel)
    if data is not None:
        return data, (None, "")
    if why == "absent":
        return None, (absent, "" if absent else why)
    return None, (None, why)

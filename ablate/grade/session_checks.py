"""The plugin-eval grader kinds that read the session rather than a checked file: ``regex`` over the final
answer, the transcript's trace, the changed paths or a file; ``tool_used`` and ``tool_order`` over the
transcript's tool calls; ``file_exists`` as a glob over the changed paths (see ``claude plugin eval``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ablate.grade.trace import SessionTrace
from ablate.setup.tasks import FileExists, RegexCheck, ToolOrder, ToolRef, ToolUsed, regex_flags

Reader = Callable[[str], tuple[bytes | None, str]]
"""Reads a checkout-relative file: (bytes, "") or (None, why)."""


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


def _calls(trace: SessionTrace, ref: ToolRef | ToolUsed) -> list[int]:
    """Indexes of the calls of ``ref.tool`` whose input matches ``ref.input_match``."""
    rx = re.compile(ref.input_match) if ref.input_match else None
    return [
        i
        for i, c in enumerate(trace.tool_calls)
        if c.name == ref.tool and (rx is None or rx.search(c.input_text) is not None)
    ]


def _no_trace(trace: SessionTrace | None, needs_calls: bool) -> str:
    if trace is None:
        return "the session's transcript and answer are not available to this grading"
    if needs_calls and not trace.transcript_read:
        return "no transcript: the session's tool calls are unknown"
    return ""


def _regex_text(
    check: RegexCheck,
    read: Reader,
    changed: list[str] | None,
    diff_error: str | None,
    trace: SessionTrace | None,
) -> tuple[str | None, str]:
    if check.target == "file":
        assert check.file is not None
        data, why = read(check.file)
        if data is None:
            return None, f"{check.file}: {why}"
        return data.decode("utf-8", "replace"), ""
    if check.target == "files":
        return ("\n".join(changed), "") if changed is not None else (None, diff_error or "no diff")
    missing = _no_trace(trace, check.target == "trace")
    if missing:
        return None, missing
    assert trace is not None
    if check.target == "trace":
        return trace.trace_text(), ""
    if trace.last_message is None:
        return None, "the session has no final answer"
    return trace.last_message, ""


def evaluate_session_check(
    check: RegexCheck | ToolUsed | ToolOrder | FileExists,
    read: Reader,
    changed: list[str] | None,
    diff_error: str | None,
    trace: SessionTrace | None,
) -> tuple[bool | None, str, str]:
    """(passed, detail, target) of a plugin-eval grader."""
    if isinstance(check, FileExists):
        if changed is None:
            return None, diff_error or "no diff", check.path
        rx = glob_regex(check.path)
        hits = [p for p in changed if rx.match(p)]
        ok = bool(hits) == check.exists
        detail = "" if ok else (f"changed: {', '.join(hits[:5])}" if hits else "no changed path matches")
        return ok, detail, check.path
    if isinstance(check, RegexCheck):
        target = check.file if check.target == "file" and check.file else check.target
        text, why = _regex_text(check, read, changed, diff_error, trace)
        if text is None:
            return None, why, target
        found = len(re.findall(check.pattern, text, regex_flags(check.flags)))
        if check.match == "contains":
            return found > 0, "" if found else "pattern not found", target
        if check.match == "not_contains":
            return found == 0, "" if not found else f"pattern found {found} time(s)", target
        want = int(check.match.removeprefix("count:"))
        return found == want, "" if found == want else f"found {found} matches (expected {want})", target
    missing = _no_trace(trace, True)
    if isinstance(check, ToolUsed):
        if missing:
            return None, missing, check.tool
        assert trace is not None
        n = len(_calls(trace, check))
        lo, hi = 1 if check.min is None else check.min, check.max
        ok = n >= lo and (hi is None or n <= hi)
        return ok, "" if ok else f"called {n}x (expected {lo}..{'∞' if hi is None else hi})", check.tool
    target = f"{check.before.tool} before {check.after.tool}"
    if missing:
        return None, missing, target
    assert trace is not None
    first, second = _calls(trace, check.before), _calls(trace, check.after)
    if not first or not second:
        never = check.before.tool if not first else check.after.tool
        return False, f"{never} never called", target
    ok = first[0] < second[0]
    return (
        ok,
        "" if ok else f"{check.before.tool}@{first[0]} does not precede {check.after.tool}@{second[0]}",
        target,
    )

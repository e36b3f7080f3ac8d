"""A plugin-eval case's graders as ablate checks: a ``[[checks]]`` table per deterministic grader (validated in
its own file), the ``llm`` graders as the judge's rubric; ``baseline`` graders refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ablate.checks.registry import validate_check
from ablate.core.errors import Problem
from ablate.setup.casefiles import read_text, split_frontmatter

#: ``claude plugin eval init --bare`` writes this line; the CLI refuses a grader that still holds it.
TEMPLATE_CRITERIA = "TODO: describe what a successful response looks like"

GRADER_KEYS: dict[str, set[str]] = {
    "regex": {"type", "name", "target", "pattern", "flags", "match", "weight", "arm"},
    "tool_used": {"type", "name", "tool", "input_match", "min", "max", "weight", "arm"},
    "tool_order": {"type", "name", "before", "after", "weight", "arm"},
    "file_exists": {"type", "name", "path", "exists", "weight", "arm"},
    "llm": {"type", "name", "criteria", "focus", "weight", "arm"},
    "baseline": {"type", "name", "baseline_file", "criteria", "weight", "arm"},
}


def grader_from_md(path: Path, problems: list[Problem]) -> dict[str, Any] | None:
    text = read_text(path, problems)
    if text is None:
        return None
    front, body, had = split_frontmatter(text, path, problems)
    if not had or front is None:
        return None
    if not isinstance(front.get("type"), str):
        kinds = "regex | tool_order | tool_used | file_exists | llm | baseline"
        problems.append(Problem(str(path), "type", f'frontmatter must include "type:" ({kinds})'))
        return None
    grader: dict[str, Any] = {"name": path.stem, **front}
    key = {"llm": "criteria", "baseline": "criteria", "regex": "pattern"}.get(front["type"])
    if key and key not in grader and body.strip():
        grader[key] = body.strip()
    grader["__file__"] = str(path)
    return grader


def _tool_ref(value: Any, where: str, file: str, problems: list[Problem]) -> dict[str, Any] | None:
    if isinstance(value, str) and value:
        return {"tool": value}
    if isinstance(value, dict) and isinstance(value.get("tool"), str):
        extra = set(value) - {"tool", "input_match"}
        if extra:
            problems.append(
                Problem(file, where, f"unknown field(s) {', '.join(sorted(extra))} (tool, input_match)")
            )
        return {k: v for k, v in value.items() if k in ("tool", "input_match")}
    problems.append(Problem(file, where, "must be a tool name or {tool: NAME, input_match: REGEX}"))
    return None


#: The grader fields a kind's check takes as they are (after ``target`` and ``before``/``after``, converted).
COPIED = {
    "regex": ("pattern", "flags", "match"),
    "tool_used": ("tool", "input_match", "min", "max"),
    "file_exists": ("path", "exists"),
}
MOCK_CALLS = "mock_calls: ablate runs real MCP servers of the setup, never mock stand-ins; use last_message, trace or files"


def _check(grader: dict[str, Any], file: str, where: str, problems: list[Problem]) -> dict[str, Any] | None:
    """A regex / tool_used / tool_order / file_exists grader as a ``[[checks]]`` table."""
    kind = grader["type"]
    out: dict[str, Any] = {"kind": kind, "name": grader.get("name", "")}
    if "weight" in grader:
        out["weight"] = grader["weight"]
    if kind == "regex":
        target = grader.get("target", "last_message")
        if isinstance(target, dict):
            if target.get("source") != "file" or not isinstance(target.get("path"), str) or len(target) != 2:
                problems.append(Problem(file, f"{where}.target", "must be {source: file, path: PATH}"))
                return None
            out["target"], out["file"] = "file", target["path"]
        elif target == "mock_calls":
            problems.append(Problem(file, f"{where}.target", MOCK_CALLS))
            return None
        else:
            out["target"] = target
    elif kind == "tool_order":
        for key in ("before", "after"):
            ref = _tool_ref(grader.get(key), f"{where}.{key}", file, problems)
            if ref is None:
                return None
            out[key] = ref
    return out | {key: grader[key] for key in COPIED.get(kind, ()) if key in grader}


def _valid_check(check: dict[str, Any], file: str, where: str, problems: list[Problem]) -> bool:
    """Validate one converted grader as a check, so a bad value is reported in the grader's own file."""
    try:
        validate_check(check)
    except ValidationError as exc:
        for err in exc.errors():
            loc = [str(x) for x in err["loc"]]
            if loc and loc[0] == check["kind"]:
                loc = loc[1:]
            if loc and loc[0] == "file":
                loc = ["target", "path"]
            message = str(err["msg"]).removeprefix("Value error, ")
            problems.append(Problem(file, ".".join([where, *loc]), message))
        return False
    return True


def _rubric(
    llm: list[dict[str, Any]], file_of: dict[str, str], problems: list[Problem]
) -> dict[str, str] | None:
    if not llm:
        return None
    parts = []
    for g in llm:
        focus = g.get("focus", "last_message")
        if focus not in ("last_message", "files"):
            said = f"{focus!r}: ablate's judge sees the final answer and the session's diff only (use last_message or files)"
            problems.append(Problem(file_of[g["name"]], "focus", said))
        criteria = g.get("criteria")
        if not isinstance(criteria, str) or not criteria.strip():
            problems.append(Problem(file_of[g["name"]], "criteria", "is missing or empty"))
            continue
        parts.append(f"{g['name']}: {criteria.strip()}" if len(llm) > 1 else criteria.strip())
    if not parts:
        return None
    return {
        "pass": "\n".join(parts),
        "fail": "The answer falls short of "
        + ("any of the criteria above." if len(parts) > 1 else "the above."),
    }


BASELINE_REFUSAL = (
    "baseline graders are not supported: they compare an answer with a stored answer of a run without the "
    "plugin, and ablate's cells already are that comparison, measured in the same run; turn the grader into "
    "an llm grader (its criteria), or remove it"
)


def _grader_problem(g: dict[str, Any], where: str, file: str, names: dict[str, str]) -> Problem | None:
    """Why a grader cannot be converted (None: it can)."""
    kind, name = g.get("type"), g.get("name")
    if kind not in GRADER_KEYS:
        return Problem(
            file, f"{where}.type", f"unknown grader type {kind!r} (known: {', '.join(GRADER_KEYS)})"
        )
    if not isinstance(name, str) or not name:
        return Problem(file, f"{where}.name", "is missing")
    if name in names:
        return Problem(file, f"{where}.name", f"duplicate grader name {name!r}")
    names[name] = file
    unknown = sorted(set(g) - GRADER_KEYS[kind])
    if unknown:
        known = ", ".join(sorted(GRADER_KEYS[kind]))
        return Problem(file, f"{where}.{unknown[0]}", f"unknown field for a {kind} grader (known: {known})")
    if TEMPLATE_CRITERIA in str(g.get("criteria", g.get("pattern", ""))):
        said = f"still the blank `init` template: replace the {TEMPLATE_CRITERIA!r} line"
        return Problem(file, f"{where}.criteria", said)
    if kind == "baseline":
        return Problem(file, f"{where}.type", BASELINE_REFUSAL)
    return None


def convert_graders(
    graders: list[tuple[dict[str, Any], str, str]], problems: list[Problem]
) -> tuple[list[dict[str, Any]], dict[str, str] | None]:
    """The ``[[checks]]`` tables and the judge's rubric the graders become."""
    checks: list[dict[str, Any]] = []
    llm: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for g, file, where in graders:
        problem = _grader_problem(g, where, file, names)
        if problem is not None:
            problems.append(problem)
        elif g["type"] == "llm":
            llm.append(g)
        elif (check := _check(g, file, where, problems)) is not None and _valid_check(
            check, file, where, problems
        ):
            checks.append(check)
    return checks, _rubric(llm, names, problems)

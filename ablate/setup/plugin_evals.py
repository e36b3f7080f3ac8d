"""Plugin-eval suites as tasks: ``claude plugin eval``'s cases and skill-creator's ``evals/evals.json``.

``--tasks DIR`` accepts a plugin folder (``.claude-plugin/plugin.json``; its eval dir is the manifest's
``experimental.evals``, else ``evals/``), a skill folder or any folder holding an ``evals/`` of cases, the eval
dir itself, or a skill-creator ``evals.json``. The format is the pinned CLI's (docs/CLAUDE-CODE.md#plugin-eval):

* a **case** is a folder (found at any depth under the eval dir; ``results/``, ``mocks/`` and hidden folders
  are skipped) holding ``prompt.md`` (YAML frontmatter + the prompt as its body) and/or ``case.yaml``, plus
  ``graders/*.md`` (frontmatter with ``type:``; the body is an ``llm`` grader's ``criteria`` or a ``regex``
  grader's ``pattern``; the file name is the grader's name; a file without frontmatter is not a grader);
* each case becomes one task named after its folder; each grader one check reported under its name
  (``regex``, ``tool_used``, ``tool_order``, ``file_exists``: :mod:`ablate.grade.checks`), their weights
  giving the task's grader score; ``llm`` graders become the judge's rubric (``ablate judge --judge-model``);
  ``baseline`` graders are refused: ablate's cells already are the with/without comparison.

skill-creator's ``evals.json`` is :mod:`ablate.setup.skill_evals`'s. The converted task is written as TOML into the run folder (``tasks/<id>.toml``), so the run stands alone.
YAML is read by :mod:`ablate.setup.yamlsub` (a documented subset). Every problem is a located
:class:`~ablate.core.errors.SpecError` naming the file and the field.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

from ablate.core.errors import Problem, SpecError
from ablate.core.fsutil import sha256_bytes
from ablate.core.specs import validate
from ablate.setup.tasks import Check, Task, TaskSpec
from ablate.setup.tomltext import dumps
from ablate.setup.yamlsub import YamlSubsetError, loads

CASE_FILES = ("case.yaml", "prompt.md")
SKIP_DIRS = {"results", "mocks", "graders", "node_modules"}
MAX_DEPTH = 8
MAX_FILE_BYTES = 1 << 20

#: ``claude plugin eval init --bare`` writes these lines; the CLI refuses a case that still holds them.
TEMPLATE_PROMPT = "TODO: describe what the agent should do"
TEMPLATE_CRITERIA = "TODO: describe what a successful response looks like"

TOP_KEYS = {
    "schema_version",
    "name",
    "description",
    "tags",
    "plugins",
    "context",
    "execution",
    "runs",
    "graders",
    "expected_outcome",
}
#: prompt.md frontmatter: these keys go to the top of the case, the others to ``execution``.
FRONT_TOP = {"schema_version", "name", "description", "tags", "plugins", "runs", "expected_outcome"}
EXECUTION_KEYS = {
    "prompt",
    "model",
    "max_turns",
    "timeout_seconds",
    "allowed_tools",
    "disallowed_tools",
    "artifact_publish",
    "growthbook_overrides",
    "append_system_prompt",
    "env",
}
GRADER_KEYS: dict[str, set[str]] = {
    "regex": {"type", "name", "target", "pattern", "flags", "match", "weight", "arm"},
    "tool_used": {"type", "name", "tool", "input_match", "min", "max", "weight", "arm"},
    "tool_order": {"type", "name", "before", "after", "weight", "arm"},
    "file_exists": {"type", "name", "path", "exists", "weight", "arm"},
    "llm": {"type", "name", "criteria", "focus", "weight", "arm"},
    "baseline": {"type", "name", "baseline_file", "criteria", "weight", "arm"},
}
#: Execution keys ablate accepts but does not apply per task (said as notes): the run decides them.
RUN_WIDE = {
    "model": "the run's --model applies to every task",
    "allowed_tools": "every cell runs with the CLI's whole tool set (the setup is what is measured)",
    "disallowed_tools": "every cell runs with the CLI's whole tool set (the setup is what is measured)",
    "runs": "the run's --repeats applies to every task",
    "tags": "tags are not used",
}
#: Keys that would change what the session sees in a way ablate does not reproduce: refused, with why.
REFUSED = {
    "append_system_prompt": "ablate does not add to the system prompt per task (it would be a layer of its own); "
    "put the instruction in the prompt",
    "growthbook_overrides": "feature-flag overrides are not applied by ablate; remove them",
    "artifact_publish": "artifact publishing is not part of an ablate session; remove it",
    "plugins": "the plugins of a cell come from the setup being measured, not from the case; remove it",
}
_CHECK: TypeAdapter[Check] = TypeAdapter(Check)


@dataclass
class Suite:
    """The tasks converted from one suite, with what ablate does not apply (notes for the user)."""

    root: Path
    tasks: list[Task] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_text(path: Path, problems: list[Problem]) -> str | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            problems.append(Problem(str(path), "", f"is larger than {MAX_FILE_BYTES} bytes"))
            return None
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(Problem(str(path), "", f"not UTF-8 text ({exc.reason} at byte {exc.start})"))
    except OSError as exc:
        problems.append(Problem(str(path), "", f"unreadable: {exc.strerror}"))
    return None


def _yaml(text: str, path: Path, problems: list[Problem], *, first_line: int = 1) -> Any:
    try:
        return loads(text, first_line=first_line)
    except YamlSubsetError as exc:
        problems.append(Problem(str(path), f"line {exc.line}", exc.message))
        return None


def split_frontmatter(
    text: str, path: Path, problems: list[Problem]
) -> tuple[dict[str, Any] | None, str, bool]:
    """(frontmatter, body, had frontmatter) of a Markdown file; the frontmatter must be a YAML mapping."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        return {}, text, False
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() == "---":
            before = len(problems)
            data = _yaml("".join(lines[1:i]), path, problems, first_line=2)
            body = "".join(lines[i + 1 :])
            if len(problems) > before:
                return None, body, True
            if data is None:
                return {}, body, True
            if not isinstance(data, dict):
                problems.append(
                    Problem(str(path), "frontmatter", "must be a YAML mapping (key: value lines)")
                )
                return None, body, True
            return data, body, True
    problems.append(
        Problem(str(path), "frontmatter", 'unterminated (an opening "---" with no closing "---")')
    )
    return None, "", True


# ----------------------------------------------------------------------------------------------------------
# Finding a suite


def _eval_dir_of_plugin(root: Path) -> Path:
    manifest = root / ".claude-plugin" / "plugin.json"
    try:
        data = orjson.loads(manifest.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return root / "evals"
    exp = data.get("experimental") if isinstance(data, dict) else None
    name = exp.get("evals") if isinstance(exp, dict) else None
    return root / name if isinstance(name, str) and name else root / "evals"


def _has_cases(folder: Path) -> bool:
    return bool(case_dirs(folder))


def find_suite(path: Path) -> Path | None:
    """The eval dir (or ``evals.json``) ``--tasks path`` names, or None when it is not a plugin-eval suite.

    A folder with ``*.toml`` task files is never a suite (the ordinary task folder wins)."""
    if path.is_file():
        return path if path.name == "evals.json" else None
    if not path.is_dir() or any(path.glob("*.toml")):
        return None
    if (path / ".claude-plugin" / "plugin.json").is_file():
        evals = _eval_dir_of_plugin(path)
    elif (path / "evals").is_dir():
        evals = path / "evals"
    else:
        evals = path
    if (evals / "evals.json").is_file() and not _has_cases(evals):
        return evals / "evals.json"
    return evals if evals.is_dir() and _has_cases(evals) else None


def case_dirs(evals: Path) -> list[Path]:
    """Every case folder under ``evals`` (a folder holding ``prompt.md`` or ``case.yaml``), sorted."""
    out: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        if any((folder / f).is_file() for f in CASE_FILES):
            out.append(folder)
            return
        if depth >= MAX_DEPTH:
            return
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            return
        for child in children:
            if child.name.startswith(".") or child.name in SKIP_DIRS:
                continue
            walk(child, depth + 1)

    walk(evals, 0)
    return out


# ----------------------------------------------------------------------------------------------------------
# One case


def task_id(name: str) -> str:
    """A task id from a case folder's name: lower case, runs of other characters as ``-``, 64 at most."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")
    return slug[:64] or "case"


def _merge(case: dict[str, Any] | None, front: dict[str, Any], body: str | None, name: str) -> dict[str, Any]:
    """case.yaml + prompt.md the way the CLI merges them: frontmatter over case.yaml, the body as the prompt."""
    base: dict[str, Any] = dict(case) if case is not None else {"schema_version": "1.1", "name": name}
    execution = dict(base.get("execution") or {}) if isinstance(base.get("execution"), dict) else {}
    for key, value in front.items():
        if key in FRONT_TOP:
            base[key] = value
        else:
            execution[key] = value
    if body is not None and body.strip():
        execution["prompt"] = body.strip()
    base["execution"] = execution
    return base


def _grader_from_md(path: Path, problems: list[Problem]) -> dict[str, Any] | None:
    text = read_text(path, problems)
    if text is None:
        return None
    front, body, had = split_frontmatter(text, path, problems)
    if not had or front is None:
        return None
    if not isinstance(front.get("type"), str):
        problems.append(
            Problem(
                str(path),
                "type",
                'frontmatter must include "type:" (regex | tool_order | tool_used | file_exists | llm | baseline)',
            )
        )
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


def _check(grader: dict[str, Any], file: str, where: str, problems: list[Problem]) -> dict[str, Any] | None:
    """A regex / tool_used / tool_order / file_exists grader as a ``[[checks]]`` table."""
    kind = grader["type"]
    out: dict[str, Any] = {"kind": kind, "name": grader.get("name", "")}
    if "weight" in grader:
        out["weight"] = grader["weight"]
    if kind == "regex":
        target = grader.get("target", "last_message")
        if isinstance(target, dict):
            if (
                target.get("source") != "file"
                or not isinstance(target.get("path"), str)
                or set(target)
                - {
                    "source",
                    "path",
                }
            ):
                problems.append(Problem(file, f"{where}.target", "must be {source: file, path: PATH}"))
                return None
            out["target"], out["file"] = "file", target["path"]
        elif target == "mock_calls":
            problems.append(
                Problem(
                    file,
                    f"{where}.target",
                    "mock_calls: ablate runs real MCP servers of the setup, never mock stand-ins; "
                    "use last_message, trace or files",
                )
            )
            return None
        else:
            out["target"] = target
        for key in ("pattern", "flags", "match"):
            if key in grader:
                out[key] = grader[key]
    elif kind == "tool_used":
        for key in ("tool", "input_match", "min", "max"):
            if key in grader:
                out[key] = grader[key]
    elif kind == "tool_order":
        for key in ("before", "after"):
            ref = _tool_ref(grader.get(key), f"{where}.{key}", file, problems)
            if ref is None:
                return None
            out[key] = ref
    else:
        for key in ("path", "exists"):
            if key in grader:
                out[key] = grader[key]
    return out


def _valid_check(check: dict[str, Any], file: str, where: str, problems: list[Problem]) -> bool:
    """Validate one converted grader as a check, so a bad value is reported in the grader's own file."""
    try:
        _CHECK.validate_python(check)
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
            problems.append(
                Problem(
                    file_of[g["name"]],
                    "focus",
                    f"{focus!r}: ablate's judge sees the final answer and the session's diff only "
                    "(use last_message or files)",
                )
            )
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


@dataclass(frozen=True)
class _Files:
    """Where a case's problems are reported: ``main`` holds the prompt, ``fields`` the case-level fields."""

    main: str
    fields: str


def _read_case(folder: Path, problems: list[Problem]) -> tuple[dict[str, Any], list[dict[str, Any]], _Files]:
    """The merged case (case.yaml + prompt.md), its grader files, and which file says what."""
    yaml_path, md_path = folder / "case.yaml", folder / "prompt.md"
    case: dict[str, Any] | None = None
    if yaml_path.is_file():
        text = read_text(yaml_path, problems)
        parsed = _yaml(text, yaml_path, problems) if text is not None else None
        if parsed is not None and not isinstance(parsed, dict):
            problems.append(Problem(str(yaml_path), "", "case.yaml must be a YAML mapping"))
        elif isinstance(parsed, dict):
            case = parsed
    front: dict[str, Any] = {}
    body: str | None = None
    if md_path.is_file():
        text = read_text(md_path, problems)
        if text is not None:
            fm, body, _ = split_frontmatter(text, md_path, problems)
            front = fm or {}
            known = FRONT_TOP | EXECUTION_KEYS - {"prompt"}
            problems.extend(
                Problem(
                    str(md_path),
                    key,
                    f"unknown frontmatter key (expected one of: {', '.join(sorted(known))})",
                )
                for key in front
                if key not in known
            )
    md_graders = [
        g
        for path in (sorted((folder / "graders").glob("*.md")) if (folder / "graders").is_dir() else [])
        if (g := _grader_from_md(path, problems)) is not None
    ]
    files = _Files(
        main=str(md_path if md_path.is_file() else yaml_path),
        fields=str(yaml_path if case is not None else md_path),
    )
    return _merge(case, front, body, folder.name), md_graders, files


def _check_case(merged: dict[str, Any], files: _Files, problems: list[Problem]) -> None:
    """Unknown fields, the schema version, and what ablate refuses to apply."""
    unknown = [k for k in merged if k not in TOP_KEYS]
    problems.extend(
        Problem(files.fields, k, f"unknown field (expected one of: {', '.join(sorted(TOP_KEYS))})")
        for k in unknown
    )
    version = str(merged.get("schema_version", ""))
    if not re.match(r"^1(\.|$)", version):
        problems.append(
            Problem(
                files.fields,
                "schema_version",
                f'{version!r}: ablate reads plugin-eval schema 1.x (e.g. "1.0")',
            )
        )
    execution = merged["execution"]
    problems.extend(
        Problem(
            files.fields,
            f"execution.{k}",
            f"unknown field (expected one of: {', '.join(sorted(EXECUTION_KEYS))})",
        )
        for k in execution
        if k not in EXECUTION_KEYS
    )
    for key, why in REFUSED.items():
        if execution.get(key, merged.get(key)) not in (None, "", [], {}, False):
            problems.append(Problem(files.main, key, f"not supported: {why}"))
    if execution.get("env"):
        problems.append(
            Problem(
                files.main,
                "env",
                "not supported: a case's EVAL_* variables are not set by ablate; remove them",
            )
        )
    context = merged.get("context") or {}
    if isinstance(context, dict) and any(
        context.get(k) for k in ("scaffold_script", "history_file", "add_dirs")
    ):
        problems.append(
            Problem(
                files.fields,
                "context",
                "not supported: ablate runs every case in the repository it is given, "
                "without scaffold scripts, resumed history or extra folders",
            )
        )


def _prompt(execution: dict[str, Any], files: _Files, problems: list[Problem]) -> str:
    prompt = execution.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        problems.append(
            Problem(files.main, "prompt", "is missing (the prompt.md body, or execution.prompt in case.yaml)")
        )
        return ""
    if TEMPLATE_PROMPT in prompt:
        problems.append(
            Problem(
                files.main, "prompt", f"still the blank `init` template: replace the {TEMPLATE_PROMPT!r} line"
            )
        )
    return prompt.strip()


def _graders(
    merged: dict[str, Any], md_graders: list[dict[str, Any]], files: _Files, problems: list[Problem]
) -> list[tuple[dict[str, Any], str, str]]:
    """Every grader with the file and the field path that define it: case.yaml's, then graders/*.md's."""
    listed = merged.get("graders") or []
    if not isinstance(listed, list):
        problems.append(Problem(files.fields, "graders", "must be a list of graders"))
        listed = []
    out: list[tuple[dict[str, Any], str, str]] = []
    for i, g in enumerate(listed):
        if isinstance(g, dict):
            out.append((g, files.fields, f"graders.{i}"))
        else:
            problems.append(Problem(files.fields, f"graders.{i}", "must be a mapping with a type"))
    for g in md_graders:
        g = dict(g)
        out.append((g, g.pop("__file__"), "frontmatter"))
    return out


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
        return Problem(
            file,
            f"{where}.criteria",
            f"still the blank `init` template: replace the {TEMPLATE_CRITERIA!r} line",
        )
    if kind == "baseline":
        return Problem(file, f"{where}.type", BASELINE_REFUSAL)
    return None


def _convert_graders(
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


def convert_case(folder: Path, suite_root: Path, notes: list[str]) -> Task:
    """One case folder as a task (located :class:`SpecError` for anything ablate cannot apply); what it asks
    that ablate does not apply per task is appended to ``notes``."""
    problems: list[Problem] = []
    merged, md_graders, files = _read_case(folder, problems)
    _check_case(merged, files, problems)
    execution = merged["execution"]
    prompt = _prompt(execution, files, problems)
    graders = _graders(merged, md_graders, files, problems)
    if not graders and not problems:
        problems.append(
            Problem(str(folder), "graders", "the case has no graders (graders/*.md or graders: in case.yaml)")
        )
    checks, rubric = _convert_graders(graders, problems)
    if problems:
        raise SpecError(problems)
    label = folder.relative_to(suite_root).as_posix() if folder != suite_root else folder.name
    for key, why in RUN_WIDE.items():
        if execution.get(key, merged.get(key)) not in (None, [], ""):
            notes.append(f"{label}: {key} not applied ({why})")
    data: dict[str, Any] = {
        "schema_version": 1,
        "id": task_id(folder.name),
        "prompt": prompt,
        "description": str(merged.get("description") or merged.get("expected_outcome") or ""),
        "max_turns": execution.get("max_turns", 10),
        "timeout_s": execution.get("timeout_seconds", 300),
        "checks": checks,
        "rubric": rubric,
    }
    return task(data, Path(files.main), folder.resolve())


def task(data: dict[str, Any], source: Path, origin: Path) -> Task:
    """A converted task: ``data`` written as the TOML the run folder keeps, validated, hashed."""
    text = dumps(
        {k: v for k, v in data.items() if v not in (None, "", [])},
        header=f"Converted by ablate from {origin}; edit the suite, not this copy.",
    ).encode("utf-8")
    spec = validate(TaskSpec, tomllib.loads(text.decode("utf-8")), source)
    return Task(spec=spec, source=source.resolve(), sha256=sha256_bytes(text), text=text)


def load_suite(path: Path) -> Suite:
    """Every case of the suite ``path`` (from :func:`find_suite`) as a task; all problems reported together."""
    if path.is_file():
        from ablate.setup.skill_evals import convert_evals_json

        return Suite(root=path, tasks=convert_evals_json(path))
    suite = Suite(root=path)
    problems: list[Problem] = []
    for folder in case_dirs(path):
        try:
            suite.tasks.append(convert_case(folder, path, suite.notes))
        except SpecError as exc:
            problems.extend(exc.problems)
    if problems:
        raise SpecError(problems)
    return suite


__all__ = ["Suite", "case_dirs", "convert_case", "find_suite", "load_suite", "read_text", "task", "task_id"]

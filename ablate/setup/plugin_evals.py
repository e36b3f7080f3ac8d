"""Plugin-eval suites as tasks: ``claude plugin eval``'s cases (docs/CLAUDE-CODE.md#plugin-eval), found under a
plugin folder, any folder holding an ``evals/``, the eval dir itself, or a skill-creator ``evals.json``; each
task is written as TOML into the run folder, so the run stands alone."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ablate.core.errors import Problem, SpecError
from ablate.setup.casefiles import load_yaml, read_text, split_frontmatter
from ablate.setup.plugin_graders import convert_graders, grader_from_md
from ablate.setup.skill_evals import convert_evals_json
from ablate.setup.task_session import eval_var_problem
from ablate.setup.tasks import Task, converted_task, task_id

CASE_FILES = ("case.yaml", "prompt.md")
SKIP_DIRS = {"results", "mocks", "graders", "node_modules"}
MAX_DEPTH = 8

#: ``claude plugin eval init --bare`` writes this line; the CLI refuses a case that still holds it.
TEMPLATE_PROMPT = "TODO: describe what the agent should do"

#: prompt.md frontmatter: these keys go to the top of the case, the others to ``execution``.
FRONT_TOP = {"schema_version", "name", "description", "tags", "plugins", "runs", "expected_outcome"}
TOP_KEYS = FRONT_TOP | {"context", "execution", "graders"}
EXECUTION_KEYS = {"prompt", "model", "max_turns", "timeout_seconds", "allowed_tools", "disallowed_tools"}
EXECUTION_KEYS |= {"artifact_publish", "growthbook_overrides", "append_system_prompt", "env"}
#: Execution keys ablate accepts but does not apply per task (said as notes): the run decides them.
RUN_WIDE = {
    "model": "the run's --model applies to every task",
    "allowed_tools": "every cell runs with the CLI's whole tool set (the setup is what is measured)",
    "disallowed_tools": "every cell runs with the CLI's whole tool set (the setup is what is measured)",
    "tags": "tags are not used",
}
#: Keys that would change what the session sees in a way ablate does not reproduce: refused, with why.
REFUSED = {
    "growthbook_overrides": "feature-flag overrides are not applied by ablate; remove them",
    "artifact_publish": "artifact publishing is not part of an ablate session; remove it",
}
#: ``plugins`` naming anything but the plugin the suite belongs to is refused with this.
PLUGINS_REFUSED = (
    "not supported: the plugins of a cell come from the setup being measured, not from the case; "
    "a case may name only the plugin it belongs to"
)


@dataclass
class Suite:
    """The tasks converted from one suite, with what ablate does not apply (notes for the user)."""

    root: Path
    tasks: list[Task] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


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


def find_suite(path: Path) -> Path | None:
    """The eval dir (or ``evals.json``) ``path`` names, or None (a folder of ``*.toml`` tasks wins)."""
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
    if (evals / "evals.json").is_file() and not case_dirs(evals):
        return evals / "evals.json"
    return evals if evals.is_dir() and case_dirs(evals) else None


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
        parsed = load_yaml(text, yaml_path, problems) if text is not None else None
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
            known = ", ".join(sorted(FRONT_TOP | EXECUTION_KEYS - {"prompt"}))
            problems.extend(
                Problem(str(md_path), key, f"unknown frontmatter key (expected one of: {known})")
                for key in front
                if key not in FRONT_TOP | EXECUTION_KEYS - {"prompt"}
            )
    md_graders = [
        g
        for path in (sorted((folder / "graders").glob("*.md")) if (folder / "graders").is_dir() else [])
        if (g := grader_from_md(path, problems)) is not None
    ]
    files = _Files(
        main=str(md_path if md_path.is_file() else yaml_path),
        fields=str(yaml_path if case is not None else md_path),
    )
    return _merge(case, front, body, folder.name), md_graders, files


def _check_case(merged: dict[str, Any], files: _Files, problems: list[Problem]) -> None:
    """Unknown fields, the schema version, and what ablate refuses to apply."""

    def unknown(given: dict[str, Any], known: set[str], prefix: str = "") -> list[Problem]:
        expected = ", ".join(sorted(known))
        said = f"unknown field (expected one of: {expected})"
        return [Problem(files.fields, prefix + k, said) for k in given if k not in known]

    problems += unknown(merged, TOP_KEYS)
    version = str(merged.get("schema_version", ""))
    if not re.match(r"^1(\.|$)", version):
        said = f'{version!r}: ablate reads plugin-eval schema 1.x (e.g. "1.0")'
        problems.append(Problem(files.fields, "schema_version", said))
    execution = merged["execution"]
    problems += unknown(execution, EXECUTION_KEYS, "execution.")
    for key, why in REFUSED.items():
        if execution.get(key, merged.get(key)) not in (None, "", [], {}, False):
            problems.append(Problem(files.main, key, f"not supported: {why}"))
    _check_env(execution.get("env"), files, problems)
    context = merged.get("context") or {}
    if isinstance(context, dict) and any(
        context.get(k) for k in ("scaffold_script", "history_file", "add_dirs")
    ):
        said = "ablate runs every case in the repository it is given, without scaffold scripts, resumed history or extra folders"
        problems.append(Problem(files.fields, "context", f"not supported: {said}"))


def _check_env(env: object, files: _Files, problems: list[Problem]) -> None:
    """``env``: a mapping of ``EVAL_*`` names to strings, refused otherwise as the CLI refuses it."""
    if env in (None, {}):
        return
    if not isinstance(env, dict):
        problems.append(Problem(files.main, "env", "must be a mapping of EVAL_* names to strings"))
        return
    for key, value in env.items():
        problem = eval_var_problem(str(key))
        if problem is not None:
            problems.append(Problem(files.main, f"env.{key}", problem))
        elif not isinstance(value, str):
            problems.append(Problem(files.main, f"env.{key}", f"{value!r} must be a string: quote it"))


def _plugins(merged: dict[str, Any], folder: Path, files: _Files, problems: list[Problem]) -> str | None:
    """``plugins``: the note when every entry is the plugin the suite belongs to (``../..``), else refused."""
    listed = merged.get("plugins")
    if listed in (None, []):
        return None
    entries = listed if isinstance(listed, list) else [listed]
    own = _own_plugin(folder)
    for entry in entries:
        if not isinstance(entry, str) or own is None or (folder / entry).resolve() != own:
            problems.append(Problem(files.main, "plugins", PLUGINS_REFUSED))
            return None
    return (
        f"plugins names the plugin under test ({own}): ablate measures the setup it is given; "
        "install the plugin there (--config-dir) for every cell to have it"
    )


def _own_plugin(folder: Path) -> Path | None:
    """The nearest folder at or above the case ``folder`` with ``.claude-plugin/plugin.json``, resolved."""
    marked = (p for p in [folder, *folder.parents] if (p / ".claude-plugin" / "plugin.json").is_file())
    return next((p.resolve() for p in marked), None)


def _prompt(execution: dict[str, Any], files: _Files, problems: list[Problem]) -> str:
    prompt = execution.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        said = "is missing (the prompt.md body, or execution.prompt in case.yaml)"
        problems.append(Problem(files.main, "prompt", said))
        return ""
    if TEMPLATE_PROMPT in prompt:
        said = f"still the blank `init` template: replace the {TEMPLATE_PROMPT!r} line"
        problems.append(Problem(files.main, "prompt", said))
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


def convert_case(folder: Path, suite_root: Path, notes: list[str]) -> Task:
    """One case folder as a task; what it asks that ablate does not apply per task is appended to ``notes``."""
    problems: list[Problem] = []
    merged, md_graders, files = _read_case(folder, problems)
    _check_case(merged, files, problems)
    execution = merged["execution"]
    prompt = _prompt(execution, files, problems)
    graders = _graders(merged, md_graders, files, problems)
    if not graders and not problems:
        said = "the case has no graders (graders/*.md or graders: in case.yaml)"
        problems.append(Problem(str(folder), "graders", said))
    checks, rubric = convert_graders(graders, problems)
    plugins_note = _plugins(merged, folder, files, problems)
    if problems:
        raise SpecError(problems)
    label = folder.relative_to(suite_root).as_posix() if folder != suite_root else folder.name
    for key, why in RUN_WIDE.items():
        if execution.get(key, merged.get(key)) not in (None, [], ""):
            notes.append(f"{label}: {key} not applied ({why})")
    if plugins_note is not None:
        notes.append(f"{label}: {plugins_note}")
    data: dict[str, Any] = {
        "schema_version": 1,
        "id": task_id(folder.name),
        "prompt": prompt,
        "description": str(merged.get("description") or merged.get("expected_outcome") or ""),
        "max_turns": execution.get("max_turns", 10),
        "timeout_s": execution.get("timeout_seconds", 300),
        "append_system_prompt": execution.get("append_system_prompt"),
        "env": execution.get("env") or None,
        "runs": merged.get("runs"),
        "checks": checks,
        "rubric": rubric,
    }
    return converted_task(data, Path(files.main), folder.resolve())


def load_suite(path: Path) -> Suite:
    """Every case of the suite ``path`` (from :func:`find_suite`) as a task; all problems reported together."""
    if path.is_file():
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

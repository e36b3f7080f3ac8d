"""skill-creator's ``evals/evals.json`` as tasks (``--tasks`` with the file, its ``evals/`` or the skill folder;
the format: docs/CLAUDE-CODE.md#plugin-eval). An unknown field is a located error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ablate.core.errors import Problem, SpecError
from ablate.setup.casefiles import read_text
from ablate.setup.tasks import Task, converted_task, task_id

EVALS_JSON_KEYS = {"id", "prompt", "expected_output", "files", "expectations"}
BINARY = (
    "ablate seeds text files only, so a binary input (a PDF, an image) cannot be given to the session this way: "
    "commit it to the repository instead and drop it here"
)


def _seed_files(
    listed: list[Any], skill_root: Path, path: Path, where: str, problems: list[Problem]
) -> dict[str, str]:
    """The eval's input files as seed files (text only: a seed file is written as UTF-8 text)."""
    files: dict[str, str] = {}
    for j, rel in enumerate(listed):
        src = skill_root / str(rel)
        field = f"{where}.files.{j}"
        if not src.is_file():
            problems.append(Problem(str(path), field, f"{rel}: no such file under {skill_root}"))
            continue
        try:
            files[str(rel)] = src.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            problems.append(Problem(str(path), field, f"{rel}: not UTF-8 text; {BINARY}"))
        except OSError as exc:
            problems.append(Problem(str(path), field, f"{rel}: unreadable: {exc.strerror}"))
    return files


def convert_evals_json(path: Path) -> list[Task]:
    """skill-creator's ``evals.json`` (``{skill_name, evals: [{id, prompt, expected_output, files,
    expectations}]}``): one task per eval, its expectations the judge's rubric, its files seed files."""
    problems: list[Problem] = []
    text = read_text(path, problems)
    if text is None:
        raise SpecError(problems)
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise SpecError.single(path, "", f"invalid JSON: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("evals"), list):
        raise SpecError.single(path, "evals", "must be an object with an `evals` list")
    extra = set(doc) - {"skill_name", "evals"}
    if extra:
        problems.append(Problem(str(path), sorted(extra)[0], "unknown field (skill_name, evals)"))
    skill_root = path.parent.parent if path.parent.name == "evals" else path.parent
    prefix = task_id(str(doc.get("skill_name") or skill_root.name))
    tasks: list[Task] = []
    for i, ev in enumerate(doc["evals"]):
        where = f"evals.{i}"
        if not isinstance(ev, dict):
            problems.append(Problem(str(path), where, "must be an object"))
            continue
        known = ", ".join(sorted(EVALS_JSON_KEYS))
        problems += [
            Problem(str(path), f"{where}.{k}", f"unknown field (known: {known})")
            for k in sorted(set(ev) - EVALS_JSON_KEYS)
        ]
        prompt = ev.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            problems.append(Problem(str(path), f"{where}.prompt", "is missing or empty"))
            continue
        expectations = ev.get("expectations") or []
        if not isinstance(expectations, list) or not all(isinstance(e, str) for e in expectations):
            problems.append(Problem(str(path), f"{where}.expectations", "must be a list of strings"))
            continue
        expected = ev.get("expected_output")
        lines = ([str(expected).strip()] if expected else []) + [f"- {e}" for e in expectations]
        files = _seed_files(ev.get("files") or [], skill_root, path, where, problems)
        data: dict[str, Any] = {
            "schema_version": 1,
            "id": f"{prefix}-{ev.get('id', i + 1)}"[:64],
            "prompt": prompt,
            "description": str(expected or ""),
            "files": files or None,
            "rubric": {"pass": "\n".join(lines), "fail": "The answer misses one of the expectations above."}
            if lines
            else None,
        }
        try:
            tasks.append(converted_task(data, path, path.resolve()))
        except SpecError as exc:
            problems.extend(Problem(str(path), f"{where}.{p.field}", p.message) for p in exc.problems)
    if problems:
        raise SpecError(problems)
    return tasks

"""Reading a plugin-eval case's text files: size-capped UTF-8 text, the YAML subset, Markdown frontmatter;
every problem a located :class:`~ablate.core.errors.Problem` (file and field)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablate.core.errors import Problem
from ablate.setup.yamlsub import YamlSubsetError, loads

MAX_FILE_BYTES = 1 << 20


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


def load_yaml(text: str, path: Path, problems: list[Problem], *, first_line: int = 1) -> Any:
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
            data = load_yaml("".join(lines[1:i]), path, problems, first_line=2)
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

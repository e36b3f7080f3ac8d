"""``file_parses``: the file exists and parses as Python, JSON or TOML (parsed only, never executed)."""

from __future__ import annotations

import ast
import json
import tomllib
from typing import Literal

from ablate.checks.base import EndState, FileCheck, Verdict, file_or_verdict


class FileParses(FileCheck):
    """The file exists and parses in ``language`` (parsed only, never executed)."""

    kind: Literal["file_parses"]
    language: Literal["python", "json", "toml"]
    """python: ``ast.parse``; json: ``json.loads``; toml: ``tomllib.loads``."""

    def evaluate(self, end: EndState) -> Verdict:
        data, missing = file_or_verdict(end, self.file, absent=False)
        if data is None:
            return missing
        problem = parse_problem(data, self.language)
        return not problem, problem


def parse_problem(data: bytes, language: str) -> str:
    """Why ``data`` does not parse as ``language`` (empty: it parses)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 ({exc.reason} at byte {exc.start})"
    try:
        if language == "python":
            ast.parse(text)
        elif language == "json":
            json.loads(text)
        else:
            tomllib.loads(text)
    except SyntaxError as exc:
        return f"does not parse as python: {exc.msg} (line {exc.lineno})"
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        return f"does not parse as {language}: {exc}"
    except (RecursionError, MemoryError):
        return f"too deeply nested to parse as {language}"
    return ""

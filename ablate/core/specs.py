"""Loading pydantic-validated spec files (TOML/JSON) with located, one-line-per-problem errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ablate.core.errors import NotFound, Problem, SpecError

M = TypeVar("M", bound=BaseModel)


class Spec(BaseModel):
    """Base for every spec model: unknown fields are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def read_spec_data(path: Path) -> dict[str, Any]:
    """Parse a TOML or JSON file into a dict, raising a located :class:`SpecError` on syntax errors."""
    if not path.exists():
        raise NotFound(f"{path}: no such file")
    if path.is_dir():
        raise SpecError.single(path, "", "is a folder, expected a .toml or .json file")
    if not path.is_file():
        raise SpecError.single(
            path, "", "not a regular file (a FIFO, socket or device): give a .toml or .json file"
        )
    raw = path.read_bytes()
    try:
        data = orjson.loads(raw) if path.suffix == ".json" else tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SpecError.single(path, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SpecError.single(path, "", f"invalid TOML: {exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise SpecError.single(path, "", f"invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise SpecError.single(path, "", "expected a table/object at the top level")
    return data


def problems_from_validation(file: Path | str, exc: ValidationError, prefix: str = "") -> list[Problem]:
    """Turn a pydantic ``ValidationError`` into located problems (``field.path: message``)."""
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if p != "[key]")  # a dict key's error names the key
        if prefix:
            loc = f"{prefix}.{loc}" if loc else prefix
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; see the documented fields)"
        problems.append(Problem(str(file), loc, msg))
    return problems


def validate(model: type[M], data: Any, file: Path | str, prefix: str = "") -> M:
    """Validate ``data`` against ``model`` or raise a :class:`SpecError` listing every problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problems_from_validation(file, exc, prefix)) from exc


def load_spec(model: type[M], path: Path) -> M:
    """Read and validate a spec file in one step."""
    return validate(model, read_spec_data(path), path)


def require_schema(data: dict[str, Any], source: str | Path, expected: int, what: str, *, hint: str) -> None:
    """Refuse a document whose ``schema_version`` is not ``expected`` (a located :class:`SpecError`): the one
    rule of every run-folder reader; a newer version is refused with the fix, upgrade ablate."""
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > expected:
        raise SpecError.single(
            source,
            "schema_version",
            f"written by a newer ablate (version {version} > {expected}): upgrade ablate",
            hint=f"this ablate reads {what} schema {expected}; `pip install -U ablate` reads the newer one",
        )
    if version != expected:
        raise SpecError.single(
            source, "schema_version", f"is {version!r}; this ablate reads {what} schema {expected}", hint=hint
        )


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object at ``path``, or None when there is no file; invalid JSON or another JSON value is a
    located :class:`SpecError` (run-folder files are written atomically, so a torn one was edited by hand)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # a file given where a folder holding this one was expected
        raise SpecError.single(
            path, "", f"cannot be read: {path.parent} is a file, not a folder", hint="pass the folder"
        ) from None
    except OSError as exc:  # a folder, a link loop, unreadable
        raise SpecError.single(
            path, "", f"cannot be read: {exc.strerror}", hint="it must be a JSON file"
        ) from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SpecError.single(path, "", f"invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise SpecError.single(path, "", f"expected a JSON object, found {type(data).__name__}")
    return data

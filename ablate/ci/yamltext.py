"""YAML text from plain data, for the generated CI files: a deliberately small emitter, so ablate needs no YAML
library. Strings are plain only when no YAML 1.1 or 1.2 reader can take them for anything but a string, else
double-quoted (JSON escapes, which YAML shares); keys such as ``on`` (a boolean to YAML 1.1) are quoted."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./@+-]*$")
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        if _PLAIN.match(value) and value.lower() not in _RESERVED:
            return value
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"cannot write {type(value).__name__} as YAML")


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"mapping keys must be strings, not {type(key).__name__}")
    return _scalar(key)


def _block(text: str, indent: int) -> str | None:
    """A literal block for a multi-line string, or None when one cannot hold it exactly."""
    if "\n" not in text or text.startswith((" ", "\n")) or "\r" in text or "\t" in text:
        return None
    body = text[:-1] if text.endswith("\n") else text
    if body.endswith("\n") or any(line != line.rstrip() for line in body.split("\n")):
        return None
    pad = " " * indent
    lines = [pad + line if line else "" for line in body.split("\n")]
    return ("|" if text.endswith("\n") else "|-") + "\n" + "\n".join(lines)


def _value(value: object, indent: int) -> str:
    """The text after ``key:`` or ``-``: a scalar on the same line, or a newline and an indented block."""
    if isinstance(value, Mapping):
        return "\n" + _mapping(value, indent) if value else " {}"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "\n" + _sequence(value, indent) if value else " []"
    if isinstance(value, str):
        block = _block(value, indent)
        if block is not None:
            return " " + block
    return " " + _scalar(value)


def _mapping(data: Mapping[str, object] | Mapping[object, object], indent: int) -> str:
    pad = " " * indent
    return "\n".join(f"{pad}{_key(k)}:{_value(v, indent + 2)}" for k, v in data.items())


def _sequence(items: Sequence[object], indent: int) -> str:
    pad = " " * indent
    out = []
    for item in items:
        if isinstance(item, Mapping) and item:
            inner = _mapping(item, indent + 2)
            out.append(f"{pad}- {inner[indent + 2 :]}")
        elif isinstance(item, Sequence) and not isinstance(item, str) and item:
            out.append(f"{pad}-\n{_sequence(item, indent + 2)}")
        else:
            out.append(f"{pad}-{_value(item, indent + 2)}")
    return "\n".join(out)


def dump(data: Mapping[str, object], *, header: str = "") -> str:
    """``data`` as a YAML document; ``header`` lines become ``#`` comments above it."""
    return "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) + _mapping(data, 0) + "\n"

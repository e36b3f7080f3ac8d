"""TOML text from plain data, for the task files ablate writes: a deliberately small emitter (the standard
library reads TOML but writes none). Strings take JSON's escapes (TOML shares them); ``None`` is left out."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _key(key: str) -> str:
    return key if _BARE.match(key) else _string(key)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value!r} as TOML")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _is_table_array(value: object) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and bool(value)
        and all(isinstance(v, Mapping) for v in value)
    )


def dumps(data: Mapping[str, object], *, header: str = "") -> str:
    """``data`` as a TOML document; ``header`` lines become ``#`` comments at the top."""
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    tables: list[str] = []
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            body = [f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None]
            tables.append(f"\n[{_key(key)}]\n" + "".join(line + "\n" for line in body))
        elif _is_table_array(value):
            assert isinstance(value, Sequence)
            for item in value:
                assert isinstance(item, Mapping)
                body = [f"{_key(k)} = {_value(v)}" for k, v in item.items() if v is not None]
                tables.append(f"\n[[{_key(key)}]]\n" + "".join(line + "\n" for line in body))
        else:
            out.append(f"{_key(key)} = {_value(value)}")
    return "\n".join(out) + "\n" + "".join(tables)

"""The registry of check kinds, :data:`KINDS`: a ``[[checks]]`` table is validated as the kind its ``kind``
names. A kind is one module of this package and its line here (docs/EXTENDING.md#adding-a-check-kind)."""

from __future__ import annotations

import functools
import operator
from importlib import import_module
from typing import Annotated, Any

from pydantic import Field, PlainValidator, TypeAdapter

from ablate.checks.base import CheckSpec

#: Every check kind (its module of this package, its class), in the order error messages list them.
KINDS: list[type[CheckSpec]] = [
    getattr(import_module(f"ablate.checks.{module}"), name)
    for module, name in (
        ("file_contains", "FileContains"),
        ("file_not_contains", "FileNotContains"),
        ("file_parses", "FileParses"),
        ("file_unchanged", "FileUnchanged"),
        ("diff_touches_only", "DiffTouchesOnly"),
        ("regex", "RegexCheck"),
        ("tool_used", "ToolUsed"),
        ("tool_order", "ToolOrder"),
        ("file_exists", "FileExists"),
    )
]


@functools.cache
def _adapter(kinds: tuple[type[CheckSpec], ...]) -> TypeAdapter[CheckSpec]:
    union: Any = functools.reduce(operator.or_, kinds)
    return TypeAdapter(Annotated[union, Field(discriminator="kind")])


def validate_check(data: Any) -> CheckSpec:
    """One ``[[checks]]`` table as the registered kind it names (pydantic's ``ValidationError`` otherwise)."""
    return _adapter(tuple(KINDS)).validate_python(data)


Check = Annotated[CheckSpec, PlainValidator(validate_check)]
"""One ``[[checks]]`` table, of a kind in :data:`KINDS`."""

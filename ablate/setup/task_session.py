"""What a task adds to its own sessions beyond its prompt, the same in every cell: ``EVAL_*`` variables (names
checked as ``claude plugin eval`` checks them) and the repeats it asks for (``runs``)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

#: Most repeats a task may ask for (``runs``; ``claude plugin eval`` caps a case's runs at 50 too).
MAX_RUNS = 50
#: A task's environment variable names: ``EVAL_`` and upper-case letters, digits, ``_`` (the CLI's rule for
#: a case's ``execution.env``).
EVAL_VAR = re.compile(r"^EVAL_[A-Z0-9_]*$")


def eval_var_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a task's (or a plugin-eval case's) variable, or None."""
    if EVAL_VAR.match(name):
        return None
    return (
        "only EVAL_* variables can be set by a task (EVAL_ then A-Z, 0-9, _), as `claude plugin eval` allows; "
        "anything else comes from the environment ablate runs in"
    )


def _eval_var(name: str) -> str:
    problem = eval_var_problem(name)
    if problem is not None:
        raise ValueError(f"{name!r}: {problem}")
    return name


def _env_value(value: str) -> str:
    if "\0" in value:
        raise ValueError("contains a NUL byte (\\0), which no environment variable can carry; remove it")
    return value


EvalVar = Annotated[str, AfterValidator(_eval_var)]
"""The name of a task's environment variable (``EVAL_*``)."""
EnvValue = Annotated[str, AfterValidator(_env_value)]
"""The value of a task's environment variable (no NUL byte)."""

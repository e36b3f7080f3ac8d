"""What a task adds to its own sessions beyond its prompt, the same in every cell: ``EVAL_*`` variables (their
names checked here, as ``claude plugin eval`` checks a case's ``execution.env``), and the repeats it asks for
(``runs``, turned into the run's repeats by :func:`task_repeats`). The text a task appends to the system prompt
becomes command-line options in :func:`ablate.core.claude.task_args`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator

if TYPE_CHECKING:
    from ablate.setup.tasks import Task

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


def task_repeats(tasks: Sequence[Task], repeats: int, *, decided_by: str | None) -> tuple[int, str | None]:
    """The repeats a run plans, and what to say of them when a task asks for ``runs``. ``decided_by`` names
    what chose the repeats (``--repeats 2``, ``--adaptive``) and wins; None: the largest ``runs`` of the
    tasks (every (task, cell) is repeated alike)."""
    asked = [(t.spec.runs, t.id) for t in tasks if t.spec.runs is not None]
    if not asked:
        return repeats, None
    most, who = max(asked)
    if decided_by is not None:
        return (
            repeats,
            f"{decided_by} decides the repeats of every task; the tasks' runs ({most}, task {who}) are not used",
        )
    return (
        most,
        f"repeats: {most}, the largest runs the tasks ask for (task {who}); --repeats chooses another",
    )

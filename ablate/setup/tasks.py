"""Task files (``tasks/*.toml``, README.md's "Tasks" and "Graded outcomes"): what each session is asked to do.
Paths must stay inside the checkout (symlink escapes are refused where it is touched: ``grade.checkout``)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator

from ablate.checks.base import RelPath, compiled
from ablate.checks.registry import Check
from ablate.core.constants import MAX_TIMEOUT_S, MAX_TURNS
from ablate.core.errors import Problem, SpecError
from ablate.core.fsutil import sha256_bytes
from ablate.core.specs import Spec, read_spec_data, validate
from ablate.setup.layers import Catalog
from ablate.setup.task_session import MAX_RUNS, EnvValue, EvalVar
from ablate.setup.tomltext import dumps


@dataclass(frozen=True)
class PitfallPattern:
    """A task's pitfall: a case-insensitive regex matched against the model's own words."""

    id: str
    pattern: str
    scope: Literal["text", "text+tools"] = "text"


ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"


class Pitfall(Spec):
    """A mistake the task invites: a regex whose match in the session counts as a hit."""

    id: str = Field(pattern=ID_PATTERN)
    """Unique within the task (``skipped-tests``)."""
    pattern: Annotated[str, Field(min_length=1), AfterValidator(partial(compiled, flags=re.IGNORECASE))]
    """A Python regex, matched case-insensitively (``re.search``) against the assistant's text."""
    scope: Literal["text", "text+tools"] = "text"
    """``text``: the assistant's text blocks only; ``text+tools``: also every string in its tool inputs."""
    description: str = ""
    """What the pitfall means, for the report."""


class Rubric(Spec):
    """What the blind judge grades the final answer against (``[rubric]``)."""

    pass_: str = Field(alias="pass", min_length=1)
    """What a passing answer does."""
    fail: str = Field(min_length=1)
    """What a failing answer does (and what does not count)."""


#: Longest prompt in bytes: one command-line argument (Linux MAX_ARG_STRLEN, 32 pages, less its NUL).
MAX_PROMPT_BYTES = 128 * 1024 - 1


def _argument(v: str, too_long: str) -> str:
    """``v`` when one command-line argument can carry it (refused here, not half way through a run)."""
    if "\0" in v:
        raise ValueError("contains a NUL byte (\\0), which no command line can carry; remove it")
    size = len(v.encode("utf-8"))
    if size > MAX_PROMPT_BYTES:
        raise ValueError(f"is {size} bytes; {too_long}")
    return v


class TaskSpec(Spec):
    """One task file."""

    schema_version: Literal[1] = 1
    id: str = Field(pattern=ID_PATTERN)
    """Unique task id (lower case, digits, ``-`` and ``_``); it names result files."""
    prompt: str = Field(min_length=1)
    """The prompt given to ``claude -p``, verbatim."""

    @field_validator("prompt")
    @classmethod
    def _passable(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("is blank")
        return _argument(
            v,
            f"the prompt is one command-line argument, and Linux caps one argument at {MAX_PROMPT_BYTES} bytes "
            "(MAX_ARG_STRLEN): shorten it, or put the bulk in a seed file the prompt names",
        )

    draft: bool = False
    """``true`` in a task drafted by ``ablate tasks suggest``: refused by every command that runs tasks until
    the user has reviewed the file and deleted the line."""
    split: Literal["dev", "holdout"] = "dev"
    """``dev`` tasks may be tuned against; ``holdout`` tasks are kept for the final measurement."""
    description: str = ""
    """What the task exercises, for the report."""
    expects: list[str] = Field(default_factory=list)
    """Layer ids the author expects to matter for this task (recorded as the author's prior)."""
    pitfalls: list[Pitfall] = Field(default_factory=list)
    max_turns: int | None = Field(default=None, ge=1, le=MAX_TURNS)
    """Overrides ``--max-turns`` for this task."""
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    """Overrides ``--timeout`` (seconds) for this task."""
    files: dict[RelPath, str] = Field(default_factory=dict)
    """Seed files (``[files]``: path = content) written identically into every cell's checkout before the
    session, replacing a file of the repo at that path."""
    checks: list[Check] = Field(default_factory=list)
    """Execution checks (``[[checks]]``), evaluated read-only on the checkout the session left."""
    reference: str | None = Field(default=None, min_length=1)
    """A reference solution, relative to the task file: a patch (``git diff`` output) or a folder of files laid
    over the checkout. Before any session the checks must pass on it (:mod:`ablate.grade.vet`)."""
    guard_only: bool = False
    """The checks only guard against harm (they pass when the model does nothing): the task is run although
    its checks cannot tell doing nothing from doing the task (its pitfalls or rubric measure it)."""
    rubric: Rubric | None = None
    """The blind judge's rubric (``[rubric]``); tasks without one are not judged."""
    append_system_prompt: str = ""
    """Text added to the end of the CLI's system prompt in this task's sessions (``--append-system-prompt``),
    identical in every cell: part of the task, like its prompt (a plugin-eval case's ``append_system_prompt``)."""
    env: dict[EvalVar, EnvValue] = Field(default_factory=dict)
    """``EVAL_*`` variables set in this task's sessions (``[env]``), on top of each cell's environment and
    identical in every cell; only ``EVAL_*`` names, as ``claude plugin eval`` allows: ablate's own, the
    endpoint's and the credentials' variables can never be set from a task."""
    runs: int | None = Field(default=None, ge=1, le=MAX_RUNS)
    """Repeats this task asks for (a plugin-eval case's ``runs``): when no ``--repeats`` is given, the run
    repeats every (task, cell) the largest ``runs`` of its tasks; a given ``--repeats`` wins (both said)."""

    @field_validator("append_system_prompt")
    @classmethod
    def _appendable(cls, v: str) -> str:
        return _argument(v, f"it is one command-line argument, capped at {MAX_PROMPT_BYTES} bytes")


@dataclass(frozen=True)
class Task:
    """A loaded, checked task."""

    spec: TaskSpec
    source: Path
    sha256: str
    """Hash of the file's bytes: recorded in the manifest so a changed task is noticed."""
    text: bytes | None = None
    """The task file ablate wrote for a task it converted (a plugin-eval case): the run folder keeps this
    instead of a copy of ``source``, and ``sha256`` is its hash. None for a task file read as it is."""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def prompt(self) -> str:
        return self.spec.prompt

    def pitfall_patterns(self) -> list[PitfallPattern]:
        """The pitfalls in the miner's form."""
        return [PitfallPattern(id=p.id, pattern=p.pattern, scope=p.scope) for p in self.spec.pitfalls]

    def manifest_entry(self) -> dict[str, object]:
        return {
            "id": self.id,
            "sha256": self.sha256,
            "source": str(self.source),
            "split": self.spec.split,
            "expects": list(self.spec.expects),
            "max_turns": self.spec.max_turns,
            "timeout_s": self.spec.timeout_s,
        }

    @property
    def split(self) -> str:
        return self.spec.split

    @property
    def reference(self) -> Path | None:
        """The reference solution's path (relative to the task file), or None."""
        return self.source.parent / self.spec.reference if self.spec.reference else None


def load_task(path: Path, catalog: Catalog | None = None) -> Task:
    """Read and validate one task file; with a catalog, unknown ``expects`` layer ids are errors."""
    raw = path.read_bytes() if path.is_file() else b""
    spec = validate(TaskSpec, read_spec_data(path), path)
    problems: list[Problem] = []
    seen: set[str] = set()
    for i, pit in enumerate(spec.pitfalls):
        if pit.id in seen:
            problems.append(Problem(str(path), f"pitfalls.{i}.id", f"duplicate pitfall id {pit.id!r}"))
        seen.add(pit.id)
    for i, check in enumerate(spec.checks):
        problems.extend(Problem(str(path), f"checks.{i}.{where}", what) for where, what in check.problems())
    seeded: dict[str, str] = {}
    for name in spec.files:
        for other in seeded:
            if name.startswith(other + "/") or other.startswith(name + "/"):
                problems.append(Problem(str(path), f"files.{name}", f"conflicts with seed file {other!r}"))
        seeded[name] = name
    for i, lid in enumerate(spec.expects):
        if catalog is not None and lid not in catalog:
            known = ", ".join(catalog.ids)
            problems.append(Problem(str(path), f"expects.{i}", f"unknown layer {lid!r} (known: {known})"))
    if problems:
        raise SpecError(problems)
    return Task(spec=spec, source=path.resolve(), sha256=sha256_bytes(raw))


def task_id(name: str) -> str:
    """A task id from a case folder's name: lower case, runs of other characters as ``-``, 64 at most."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")
    return slug[:64] or "case"


def converted_task(data: dict[str, Any], source: Path, origin: Path) -> Task:
    """A converted task: ``data`` written as the TOML the run folder keeps, validated, hashed."""
    text = dumps(
        {k: v for k, v in data.items() if v not in (None, "", [])},
        header=f"Converted by ablate from {origin}; edit the suite, not this copy.",
    ).encode("utf-8")
    spec = validate(TaskSpec, tomllib.loads(text.decode("utf-8")), source)
    return Task(spec=spec, source=source.resolve(), sha256=sha256_bytes(text), text=text)

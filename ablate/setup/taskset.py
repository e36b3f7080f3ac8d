"""The tasks ``--tasks`` names (task files, folders of them, plugin-eval suites), loaded together with every
problem reported at once; one split of them; the repeats they ask for."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ablate.core.errors import NotFound, Problem, SpecError
from ablate.setup.layers import Catalog
from ablate.setup.plugin_evals import find_suite, load_suite
from ablate.setup.tasks import Task, load_task

DRAFT = (
    "a draft written by `ablate tasks suggest`, never run unreviewed: review the prompt and the suggested "
    "pitfalls, then delete the `draft = true` line"
)


def task_files(paths: Iterable[Path]) -> list[Path]:
    """Expand folders to their ``*.toml`` files (sorted); files are kept as given."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(p.glob("*.toml"))
            if not found:
                raise NotFound(
                    f"{p}: no *.toml task files in this folder, and no plugin-eval suite "
                    "(evals/<case>/prompt.md or case.yaml, or evals/evals.json)"
                )
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise NotFound(
                f"{p}: no such task file or folder", hint="pass --tasks with a folder of *.toml files"
            )
    return out


def load_tasks(
    paths: Sequence[Path], catalog: Catalog | None = None, notes: list[str] | None = None
) -> list[Task]:
    """Every task under ``paths``, all problems reported together; what ablate skips goes to ``notes``."""
    tasks: list[Task] = []
    problems: list[Problem] = []
    plain: list[Path] = []
    for p in paths:
        suite = find_suite(p) if p.exists() else None
        if suite is None:
            plain.append(p)
            continue
        try:
            loaded = load_suite(suite)
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        tasks.extend(loaded.tasks)
        if notes is not None:
            notes.extend(loaded.notes)
    files = task_files(plain)
    if not files and not tasks and not problems:
        raise NotFound("no task files given", hint="pass --tasks DIR or --tasks FILE")
    for f in files:
        try:
            tasks.append(load_task(f, catalog))
        except SpecError as exc:
            problems.extend(exc.problems)
    by_id: dict[str, Path] = {}
    for t in tasks:
        if t.spec.draft:
            problems.append(Problem(str(t.source), "draft", DRAFT))
        if t.id in by_id:
            problems.append(
                Problem(str(t.source), "id", f"duplicate task id {t.id!r} (also in {by_id[t.id]})")
            )
        by_id[t.id] = t.source
    if problems:
        raise SpecError(problems)
    return tasks


def select_split(paths: Sequence[Path], split: str) -> list[Path]:
    """The task files under ``paths`` whose ``split`` is ``split`` (``both``: every file, unchanged)."""
    if split == "both":
        return list(paths)
    # a plugin-eval suite has no split: its cases are dev tasks
    suites = [p for p in paths if p.exists() and find_suite(p) is not None]
    files = task_files([p for p in paths if p not in suites])
    chosen = [f for f in files if load_task(f).spec.split == split] + (suites if split == "dev" else [])
    if not chosen:
        raise NotFound(
            f"no {split} tasks among {len(files)} task files",
            hint="check the tasks' `split`, or pass --split both",
        )
    return chosen


def task_repeats(tasks: Sequence[Task], repeats: int, *, decided_by: str | None) -> tuple[int, str | None]:
    """The repeats a run plans, and what to say of them when a task asks for ``runs``: ``decided_by`` (the
    option that chose them) wins, else the tasks' largest ``runs``."""
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

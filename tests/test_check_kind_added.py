"""Adding a check kind is one module and its line in the registry (docs/EXTENDING.md#adding-a-check-kind):
registered, the kind is loaded from a task file, evaluated on a real checkout and named in the grade."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.checks import registry
from ablate.core.errors import SpecError
from ablate.grade.checkout import apply_seed_files, grade_checkout
from ablate.setup.tasks import load_task
from tests.check_kind_example import FileLines
from tests.test_grade_checks import git

TASK = """
id = "short"
prompt = "Keep notes.md short."

[files]
"notes.md" = "one\\ntwo\\n"

[[checks]]
kind = "file_lines"
file = "notes.md"
max = 3
"""


def test_a_registered_kind_is_loaded_evaluated_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "task.toml"
    spec.write_text(TASK)
    with pytest.raises(SpecError, match="file_lines"):  # not a kind until it is registered
        load_task(spec)
    monkeypatch.setattr(registry, "KINDS", [*registry.KINDS, FileLines])
    task = load_task(spec)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("r\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    base = apply_seed_files(task, repo)
    (repo / "notes.md").write_text("one\ntwo\nthree\nfour\n")
    grade = grade_checkout(task, repo, base)
    assert grade is not None
    (result,) = grade.results
    assert (result.kind, result.target, result.passed, result.detail) == (
        "file_lines", "notes.md", False, "4 lines, more than 3"
    )  # fmt: skip


def test_a_bad_table_of_the_new_kind_is_a_located_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "KINDS", [*registry.KINDS, FileLines])
    spec = tmp_path / "task.toml"
    spec.write_text(TASK.replace("max = 3", "max = -1"))
    with pytest.raises(SpecError, match=r"checks.*max"):
        load_task(spec)

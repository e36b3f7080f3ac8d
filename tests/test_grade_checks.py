"""Execution checks on real git checkouts: seeding, read-only grading, the saved diff, path escapes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ablate.core.errors import SpecError
from ablate.grade.checkout import (
    UnsafePath,
    apply_seed_files,
    grade_checkout,
    grade_from_diff,
)
from ablate.grade.patch import parse_patch
from ablate.setup.tasks import Task, load_task

TASK = """
id = "billing"
prompt = "Fix the greeting; leave billing alone."

[files]
"src/billing.py" = "def total(a, b):\\n    return round(a + b, 2)\\n"
"src/greet/hello.py" = "def greet(name):\\n    return 'Hello, ' + name\\n"

[[checks]]
kind = "file_unchanged"
file = "src/billing.py"

[[checks]]
kind = "diff_touches_only"
paths = ["src/greet/"]

[[checks]]
kind = "file_contains"
file = "src/greet/hello.py"
text = "!"

[[checks]]
kind = "file_parses"
file = "src/greet/hello.py"
language = "python"

[[checks]]
kind = "file_not_contains"
file = "src/greet/hello.py"
text = "Hey"
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    ).stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "billing.py").write_text("old billing\n")
    (repo / "README.md").write_text("readme\n")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def task(tmp_path: Path, text: str = TASK) -> Task:
    path = tmp_path / "task.toml"
    path.write_text(text)
    return load_task(path)


def test_seed_files_replace_repo_files_and_an_untouched_session_fails_only_the_edit_checks(
    tmp_path: Path, checkout: Path
) -> None:
    t = task(tmp_path)
    (checkout / "src/billing.py").chmod(0o640)
    base = apply_seed_files(t, checkout)
    assert (checkout / "src/billing.py").read_text().startswith("def total")
    assert (checkout / "src/billing.py").stat().st_mode & 0o777 == 0o640  # a replaced file keeps its mode
    assert (checkout / "src/greet/hello.py").stat().st_mode & 0o777 == 0o644
    assert (checkout / "src/greet/hello.py").is_file()
    git_dir_before = sorted(p.name for p in (checkout / ".git").iterdir())
    grade = grade_checkout(t, checkout, base, attempt=2, patch_path=tmp_path / "d.patch", patch_rel="d.patch")
    assert grade is not None
    assert sorted(p.name for p in (checkout / ".git").iterdir()) == git_dir_before
    assert [r.passed for r in grade.results] == [True, True, False, True, True]
    assert (grade.attempt, grade.passed, grade.n_passed, grade.changed) == (2, False, 4, [])
    assert (tmp_path / "d.patch").read_text() == ""
    assert base.scratch is None  # the snapshot is removed


def test_a_session_that_edits_the_protected_file_fails_unchanged_and_touches_only(
    tmp_path: Path, checkout: Path
) -> None:
    t = task(tmp_path)
    base = apply_seed_files(t, checkout)
    hello = checkout / "src/greet/hello.py"
    hello.write_text(hello.read_text().replace("name\n", "name + '!'\n"))
    (checkout / "src/billing.py").write_text("def total(a, b):\n    return a + b\n")
    (checkout / "notes.log").write_text("ignored by git, not a checked file\n")
    patch = tmp_path / "d.patch"
    grade = grade_checkout(t, checkout, base, patch_path=patch, patch_rel="diffs/x.a1.patch")
    assert grade is not None
    assert [r.passed for r in grade.results] == [False, False, True, True, True]
    assert grade.changed == ["src/billing.py", "src/greet/hello.py"]
    assert "src/billing.py" in grade.results[1].detail
    assert grade.diff == "diffs/x.a1.patch"
    # the same verdicts from the saved diff alone
    again = grade_from_diff(t, patch.read_text(), patch_rel="diffs/x.a1.patch")
    assert again is not None and again.source == "diff"
    assert [r.passed for r in again.results] == [r.passed for r in grade.results]


def test_checks_never_follow_a_link_out_of_the_checkout(tmp_path: Path, checkout: Path) -> None:
    t = task(tmp_path)
    base = apply_seed_files(t, checkout)
    outside = tmp_path / "outside.py"
    outside.write_text("def greet(name):\n    return 'Hello!'\n")
    hello = checkout / "src/greet/hello.py"
    hello.unlink()
    hello.symlink_to(outside)
    grade = grade_checkout(t, checkout, base)
    assert grade is not None
    contains = grade.results[2]
    assert (contains.passed, contains.detail) == (None, "a symlink out of the checkout (not followed)")
    assert [r.passed for r in grade.results] == [True, True, None, None, None]
    assert grade.passed is None  # none failed, three could not be evaluated: not a pass


def test_a_deleted_file_and_a_syntax_error_are_reported(tmp_path: Path, checkout: Path) -> None:
    t = task(tmp_path)
    base = apply_seed_files(t, checkout)
    (checkout / "src/billing.py").unlink()
    (checkout / "src/greet/hello.py").write_text("def greet(name:\n    return 'Hello!'\n")
    grade = grade_checkout(t, checkout, base, patch_path=tmp_path / "d.patch")
    assert grade is not None
    assert grade.results[0].passed is False and "absent" in grade.results[0].detail
    assert grade.results[3].passed is False and "does not parse as python" in grade.results[3].detail
    again = grade_from_diff(t, (tmp_path / "d.patch").read_text())
    assert again is not None
    assert [r.passed for r in again.results] == [r.passed for r in grade.results]


def test_seed_files_are_never_written_through_a_symlink(tmp_path: Path, checkout: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (checkout / "src" / "greet").symlink_to(target)
    with pytest.raises(UnsafePath, match="symlink"):
        apply_seed_files(task(tmp_path), checkout)
    assert list(target.iterdir()) == []
    assert (checkout / "src/billing.py").read_text() == "old billing\n"  # nothing written before refusing


@pytest.mark.parametrize(
    ("snippet", "where"),
    [
        ('[files]\n"../escape.py" = "x"\n', "files"),
        ('[files]\n"/etc/passwd" = "x"\n', "files"),
        ('[files]\n"src\\\\win.py" = "x"\n', "files"),
        ('[files]\n".git/hooks/pre-commit" = "x"\n', "files"),
        ('[[checks]]\nkind = "file_unchanged"\nfile = "../../etc/passwd"\n', "checks.0.file_unchanged.file"),
        ('[[checks]]\nkind = "file_contains"\nfile = "/abs"\ntext = "x"\n', "checks.0.file_contains.file"),
        (
            '[[checks]]\nkind = "diff_touches_only"\npaths = ["src/", "a/./b"]\n',
            "checks.0.diff_touches_only.paths.1",
        ),
        (
            '[[checks]]\nkind = "file_parses"\nfile = "a.py"\nlanguage = "python"\ncmd = "x"\n',
            "checks.0.file_parses.cmd",
        ),
        ('[[checks]]\nkind = "run_tests"\nfile = "a.py"\n', "checks.0"),
    ],
)
def test_path_escapes_and_unknown_fields_are_refused_with_a_location(
    tmp_path: Path, snippet: str, where: str
) -> None:
    with pytest.raises(SpecError) as err:
        task(tmp_path, 'id = "t"\nprompt = "p"\n' + snippet)
    assert f"task.toml: {where}" in str(err.value)


def test_parse_patch_reads_adds_and_deletes() -> None:
    text = (
        "diff --git a/x.py b/x.py\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/x.py\n"
        "@@ -0,0 +1,2 @@\n+a\n+b\n"
        "diff --git a/y.py b/y.py\ndeleted file mode 100644\n--- a/y.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n"
    )
    files = parse_patch(text)
    assert [(f.path, f.old_path, f.new_path) for f in files] == [
        ("x.py", None, "x.py"),
        ("y.py", "y.py", None),
    ]

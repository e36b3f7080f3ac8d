"""A view held in another process's mount namespace (an ordinary user's session tree), read, seeded and
graded from outside through ``/proc/<pid>/root``: links resolve inside the view, git runs inside it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ablate.grade.checkout import apply_seed_files, grade_checkout, read_checkout_file
from ablate.isolate.detect import namespace_check
from ablate.isolate.namespace import Mount, fresh_uppers, held_view
from ablate.isolate.viewpath import as_seen_inside, real_path, split_view, view_command
from tests.test_grade_checks import git, task


def test_paths_not_through_a_holder_are_left_alone(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert split_view(tmp_path) is None and as_seen_inside(tmp_path / "link") == str(tmp_path / "link")
    assert real_path(tmp_path / "link") == os.path.realpath(tmp_path / "link")
    assert view_command(tmp_path, ["git", "status"]) == (["git", "status"], tmp_path)
    assert split_view("/proc/12/root") == (12, "/")
    assert split_view("/proc/12/root/x/../y") == (12, "/y") and split_view("/proc/12/cwd/x") is None


def test_a_held_view_is_seeded_read_and_graded_from_outside(tmp_path: Path) -> None:
    ok, why = namespace_check().ok, namespace_check().reason
    if not ok:
        pytest.skip(f"namespace backend unavailable: {why}")
    lower = tmp_path / "lower"
    (lower / "src").mkdir(parents=True)
    (lower / "src" / "billing.py").write_text("old billing\n")
    (lower / "README.md").write_text("readme\n")
    git(lower, "init", "-q", "-b", "main")
    git(lower, "add", "-A")
    git(lower, "commit", "-q", "-m", "init")
    merged = tmp_path / "merged"
    merged.mkdir()
    (lower / "inside").symlink_to(merged / "README.md")  # absolute, as the view has it
    (lower / "outside").symlink_to(lower / "README.md")  # the lower folder itself: out of the checkout
    fresh_uppers(tmp_path, ("repo",))
    mounts = [Mount(str(merged), (str(lower),), str(tmp_path / "up/repo"), str(tmp_path / "wk/repo"))]
    seeded = task(tmp_path)
    with held_view(tmp_path / "view.json", mounts) as pid:
        view = Path(f"/proc/{pid}/root{merged}")
        assert (view / "README.md").read_text() == "readme\n" and not list(merged.iterdir())
        assert real_path(view / "inside") == f"{view}/README.md"
        assert read_checkout_file(view, "inside") == (b"readme\n", "")
        assert read_checkout_file(view, "outside") == (None, "a symlink out of the checkout (not followed)")
        argv, cwd = view_command(view, ["git", "rev-parse", "--show-toplevel"])
        top = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
        assert top == str(merged)  # git found the view's repository, not the host's empty mount point

        baseline = apply_seed_files(seeded, view)
        assert baseline.error is None and baseline.tree
        (view / "src" / "greet" / "hello.py").write_text(
            "def greet(name):\n    return 'Hello, ' + name + '!'\n"
        )
    with held_view(
        tmp_path / "view.json", mounts
    ) as pid:  # graded through another holder, as the runner does
        view = Path(f"/proc/{pid}/root{merged}")
        grade = grade_checkout(seeded, view, baseline, patch_path=tmp_path / "d.patch", patch_rel="d.patch")
    assert grade is not None and grade.diff_error is None, grade
    assert grade.changed == ["src/greet/hello.py"], grade  # the seeds are the start, not the session's
    assert [r.passed for r in grade.results] == [True, True, True, True, True], grade.results
    assert "+    return 'Hello, ' + name + '!'" in (tmp_path / "d.patch").read_text()
    assert not list(merged.iterdir())  # nothing was ever written at the host's mount point

"""Checks on real checkouts after real `claude -p` sessions (scripted by ablate.sim): one session edits the
file it was told to leave alone, one does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ablate.grade.checkout import apply_seed_files, grade_checkout, grade_from_diff
from ablate.setup.tasks import load_task
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import make_repo, run_claude

pytestmark = pytest.mark.e2e

TASK = """
id = "hands-off"
prompt = "unused: each test sends its own prompt"

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
text = "name + '!'"
"""

HELLO = {"old_string": "return 'Hello, ' + name", "new_string": "return 'Hello, ' + name + '!'"}
BILLING = {"old_string": "return round(a + b, 2)", "new_string": "return a + b"}


def rules() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for marker, files in (
        ("CAREFUL", ["src/greet/hello.py"]),
        ("CARELESS", ["src/greet/hello.py", "src/billing.py"]),
    ):
        out.append(
            {
                "name": f"{marker.lower()}-read",
                "where": "prompt",
                "contains": [marker],
                "turn": 0,
                "tool_use": [{"name": "Read", "input": {"file_path": "${cwd}/" + f}} for f in files],
            }
        )
        edits = [{"name": "Edit", "input": {"file_path": "${cwd}/src/greet/hello.py", **HELLO}}]
        if marker == "CARELESS":
            edits.append({"name": "Edit", "input": {"file_path": "${cwd}/src/billing.py", **BILLING}})
        out.append(
            {
                "name": f"{marker.lower()}-edit",
                "where": "prompt",
                "contains": [marker],
                "turn": 1,
                "tool_use": edits,
            }
        )
        out.append(
            {"name": f"{marker.lower()}-done", "where": "prompt", "contains": [marker], "text": "Done."}
        )
    return out


@pytest.fixture(scope="module")
def sim() -> Any:
    with SimServer(script_from_data({"rules": rules()})) as server:
        yield server


@pytest.mark.parametrize(
    ("marker", "expected", "changed"),
    [
        ("CAREFUL", [True, True, True], ["src/greet/hello.py"]),
        ("CARELESS", [False, False, True], ["src/billing.py", "src/greet/hello.py"]),
    ],
)
def test_checks_read_the_checkout_a_real_session_left(
    claude: Path, sim: SimServer, tmp_path: Path, marker: str, expected: list[bool], changed: list[str]
) -> None:
    task_file = tmp_path / "task.toml"
    task_file.write_text(TASK)
    task = load_task(task_file)
    repo = make_repo(tmp_path / "repo", {"README.md": "# app\n", "src/billing.py": "old\n"})
    baseline = apply_seed_files(task, repo)
    home = tmp_path / "home"
    home.mkdir()
    run = run_claude(
        claude,
        f"{marker}: make greet() end with an exclamation mark. Leave src/billing.py alone.",
        cwd=repo,
        home=home,
        config_dir=home / ".claude",
        base_url=sim.base_url,
    )
    assert run.returncode == 0, run.stderr
    patch = tmp_path / "session.patch"
    grade = grade_checkout(task, repo, baseline, patch_path=patch, patch_rel="diffs/x.a1.patch")
    assert grade is not None
    assert [r.passed for r in grade.results] == expected
    assert grade.changed == changed
    assert grade.passed is all(expected)
    assert "+    return 'Hello, ' + name + '!'" in patch.read_text()
    again = grade_from_diff(task, patch.read_text())
    assert again is not None and [r.passed for r in again.results] == expected

"""Graders checked before a cent is spent (issue 40 item 1): weak checks and a reference that does not apply
refuse the run before any session (exit 2, nothing spent); guard_only, --allow-weak-checks, `tasks check`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from ablate.folder.layout import RunFolder, read_manifest
from ablate.grade.vet import head_reader, vet_task
from ablate.report.caveats import weak_checks
from ablate.setup.examples import materialise_example
from ablate.setup.tasks import load_task
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import invoke

CELLS = 'schema_version = 1\nname = "one"\ncontrol = "C0"\n[[cell]]\nid = "C0"\nstrip = []\n'
WEAK = 'id = "weak"\nprompt = "Add a farewell."\n[[checks]]\nkind = "file_contains"\nfile = "app.py"\ntext = "Hello"\n'
TELLS = WEAK + '[[checks]]\nkind = "file_contains"\nfile = "app.py"\ntext = "def farewell"\n'
BAD_PATCH = """diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
 def greet(name: str) -> str:
-    return "Howdy, " + name
+    return "Hello, " + name + "!"
"""
GOOD_PATCH = """diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,5 @@
 def greet(name: str) -> str:
     return "Hello, " + name
+
+def farewell(name: str) -> str:
+    return "Bye, " + name
"""


def _repo(tmp_path: Path) -> Path:
    ex = materialise_example(tmp_path / "ex")
    return ex.repo


def _run(tmp_path: Path, claude: Path, task: str, *extra: str, files: dict[str, str] | None = None):
    ex = materialise_example(tmp_path / "ex")
    tdir = tmp_path / "tasks"
    tdir.mkdir()
    (tdir / "t.toml").write_text(task)
    for name, text in (files or {}).items():
        (tdir / name).write_text(text)
    (tmp_path / "cells.toml").write_text(CELLS)
    with SimServer(script_from_data({"rules": []})) as sim:
        args = ["run", "--tasks", str(tdir / "t.toml"), "--cells", str(tmp_path / "cells.toml")]
        args += [
            "--out",
            str(tmp_path / "runs"),
            "--work-dir",
            str(tmp_path / "envs"),
            "--claude-bin",
            str(claude),
        ]
        args += ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--report", "none", *extra]
        env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": sim.base_url}
        res = invoke(args, env=env)
        messages = [r for r in sim.requests() if r.is_messages]
    (run_dir,) = (tmp_path / "runs").iterdir()
    return res.exit_code, res.output, run_dir, messages


def _spent(run_dir: Path) -> list[Path]:
    return [*(run_dir / "results").glob("*.json"), *(run_dir / "stdout").glob("*")]


@pytest.mark.e2e
def test_a_check_that_passes_untouched_refuses_the_run_before_any_session(
    tmp_path: Path, claude: Path
) -> None:
    code, out, run_dir, messages = _run(tmp_path, claude, WEAK, "--no-probe")
    assert code == 2, out
    assert "task weak" in out and "#1 file_contains app.py passed" in out and "nothing was spent" in out
    assert messages == [] and _spent(run_dir) == []
    graders = orjson.loads((run_dir / "probe.json").read_bytes())["graders"]
    assert graders["weak"] == ["weak"] and graders["tasks"][0]["untouched"][0]["passed"] is True


@pytest.mark.e2e
def test_a_reference_patch_that_does_not_apply_is_located(tmp_path: Path, claude: Path) -> None:
    task = 'reference = "fix.patch"\n' + TELLS
    code, out, run_dir, messages = _run(tmp_path, claude, task, "--no-probe", files={"fix.patch": BAD_PATCH})
    assert code == 2, out
    flat = " ".join(out.split())
    assert "t.toml: reference" in flat and "fix.patch does not apply to app.py: hunk 1" in flat
    assert "Howdy" in flat and "Traceback" not in out
    assert messages == [] and _spent(run_dir) == []


@pytest.mark.e2e
def test_allow_weak_checks_is_recorded_in_the_manifest(tmp_path: Path, claude: Path) -> None:
    # --budget-usd 0: no session starts; what the run recorded before is what matters
    _code, out, run_dir, _ = _run(
        tmp_path, claude, WEAK, "--no-probe", "--allow-weak-checks", "--budget-usd", "0"
    )
    assert "weak, run anyway (--allow-weak-checks): weak" in out, out
    manifest = read_manifest(RunFolder(run_dir))
    assert manifest.weak_checks == ["weak"]
    caveat = weak_checks(None, manifest)  # type: ignore[arg-type]
    assert caveat is not None and caveat.id == "weak-checks" and "weak" in caveat.text
    assert weak_checks(None, manifest.model_copy(update={"weak_checks": []})) is None  # type: ignore[arg-type]


def _task(tmp_path: Path, text: str, **files: str):
    (tmp_path / "t.toml").write_text(text)
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    return load_task(tmp_path / "t.toml")


def _head(repo: Path) -> str:
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    env = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@b",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@b",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", "commit", "-qm", "x"], cwd=repo, check=True, env=env)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()


def test_the_check_logic(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text('def greet(name: str) -> str:\n    return "Hello, " + name\n')
    base = head_reader(repo, _head(repo))
    weak = vet_task(_task(tmp_path, WEAK), base)
    assert weak["weak"] and "every check passes on the untouched checkout" in weak["weak"]
    guard = vet_task(_task(tmp_path, "guard_only = true\n" + WEAK), base)
    assert guard["weak"] is None and guard["guard_only"]
    tells = vet_task(_task(tmp_path, 'reference = "fix.patch"\n' + TELLS, **{"fix.patch": GOOD_PATCH}), base)
    assert tells["weak"] is None and [r["passed"] for r in tells["reference"]] == [True, True]
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "app.py").write_text("def greet(name: str) -> str:\n    return 'Hi'\n")
    fails = vet_task(_task(tmp_path, 'reference = "ref"\n' + TELLS), base)
    assert fails["weak"] and "a check fails on its reference ref" in fails["weak"]


def test_tasks_check(tmp_path: Path) -> None:
    repo = _repo(tmp_path)  # the example repository, committed
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "t.toml").write_text(WEAK)
    res = invoke(["tasks", "check", str(tmp_path / "w"), "--repo", str(repo)])
    assert (
        res.exit_code == 2 and "weak: WEAK" in res.output and "#1 file_contains app.py passed" in res.output
    )
    (tmp_path / "w" / "t.toml").write_text(TELLS)
    res = invoke(["tasks", "check", str(tmp_path / "w"), "--repo", str(repo), "--json"])
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.output)["weak"] == []

"""`ablate ab --split holdout --judge-model M`: a fake claude in real cell environments, ablate.sim as judge."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.result import iter_results
from ablate.grade.record import read_grade
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import invoke
from tests.runner_support import write_fake_claude

TASKS = str(Path(__file__).resolve().parent.parent / "tasks")


@pytest.fixture
def judge_sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimServer]:
    ex = materialise_example(tmp_path / "ex")
    monkeypatch.setenv("HOME", str(ex.home))
    monkeypatch.setenv("ABLATE_CLAUDE_BIN", str(write_fake_claude(tmp_path / "claude")))
    monkeypatch.setenv("ABLATE_WORK_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("GRADE_TEST_SETUP", f"{ex.config_dir}\n{ex.repo}")
    with SimServer(
        script_from_data({"default": {"text": '{"verdict": "fail", "reason": "scripted"}'}})
    ) as sim:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", sim.base_url)
        yield sim


def test_run_with_a_split_and_a_judge_grades_as_it_goes(tmp_path: Path, judge_sim: SimServer) -> None:
    config_dir, repo = os.environ["GRADE_TEST_SETUP"].split("\n")
    where = ["--config-dir", config_dir, "--repo", repo]
    args = ["ab", "--tasks", TASKS, "--split", "holdout", "--judge-model", "claude-haiku-4-5", *where]
    res = invoke([*args, "--out", str(tmp_path / "runs"), "--json", "--jobs", "2"])
    assert res.exit_code == 0, res.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    folder = RunFolder(run_dir)
    assert [t.id for t in read_manifest(folder).tasks] == ["no-framework", "release-notes"]
    results = iter_results(folder)
    assert len(results) == 4
    for r in results:
        grade = read_grade(folder, r.item)
        assert grade is not None
        verdict = grade.verdict("claude-haiku-4-5", r.attempt)
        assert verdict is not None and (verdict.verdict, verdict.reason) == ("fail", "scripted")
        checks = grade.checks_for(r.attempt)
        if r.task == "release-notes":  # seeded VERSION and CHANGELOG.md untouched; no notes written
            assert checks is not None
            assert [c.passed for c in checks.results] == [True, True, True, False]
        else:
            assert checks is None
    assert len([r for r in judge_sim.requests() if r.is_messages]) == 4

    out = ["--out", str(tmp_path / "refused")]
    same = invoke(["ab", "--tasks", TASKS, "--judge-model", "claude-sonnet-4-6", *where, *out])
    assert same.exit_code == 2 and "model under test" in same.stderr
    assert not (tmp_path / "refused").exists()  # refused before any run folder was made
    resumed = invoke(["run", "--resume", str(run_dir), "--split", "dev"])
    assert resumed.exit_code == 2 and "--split" in resumed.stderr

"""The runner's grading hook: seed files before each session, checks and the diff after it, results untouched."""

from __future__ import annotations

from pathlib import Path

import orjson

from ablate.core.claude import ClaudeBinary
from ablate.core.fsutil import sha256_file
from ablate.folder.result import read_result
from ablate.grade.hook import GradingHook
from ablate.grade.record import read_grade
from ablate.run.create import create_run, load_run_tasks, open_run
from ablate.run.scheduler import Runner, RunOptions
from ablate.setup.cells import load_cell_set
from ablate.setup.layers import load_catalog
from ablate.setup.tasks import load_task
from tests.runner_support import FakeBackend, base_env, write_fake_claude

TASK = """id = "seeded"
prompt = "Say done."

[files]
"src/billing.py" = "def total(a, b):\\n    return a + b\\n"

[[checks]]
kind = "file_unchanged"
file = "src/billing.py"

[[checks]]
kind = "file_contains"
file = "src/billing.py"
text = "def total"

[[checks]]
kind = "file_contains"
file = "NOTES.md"
text = "never written"
"""


def test_the_runner_seeds_each_checkout_and_records_checks_per_attempt(tmp_path: Path) -> None:
    claude_path = write_fake_claude(tmp_path / "claude")
    claude = ClaudeBinary(path=claude_path, version="2.1.332", sha256=sha256_file(claude_path))
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "seeded.toml").write_text(TASK)
    cs = load_cell_set("binary", load_catalog())
    folder, _ = create_run(
        tmp_path / "runs",
        tasks=[load_task(tmp_path / "tasks" / "seeded.toml")],
        cell_set=cs.name,
        cells=list(cs.cells),
        repeats=2,
        seed=3,
        model="claude-sonnet-4-6",
        max_turns=3,
        claude=claude,
        timeout_s=20,
    )
    folder, manifest = open_run(folder.root)
    backend = FakeBackend(tmp_path / "envs", base_env(tmp_path))
    summary = Runner(
        folder,
        manifest,
        tasks={t.id: t for t in load_run_tasks(folder, manifest)},
        cells={c.id: c for c in cs.cells},
        backend=backend,
        options=RunOptions(jobs=2, retry_delay_s=0.05),
        tree_hook=GradingHook(),
        claude=claude,
    ).run()
    assert summary.outcome == "finished" and summary.done == 4
    for item in ("seeded__C0__r00", "seeded__C11__r00", "seeded__C0__r01", "seeded__C11__r01"):
        result = read_result(folder, item)
        grade = read_grade(folder, item)
        assert result is not None and grade is not None
        checks = grade.checks_for(result.attempt)
        assert checks is not None and checks.source == "checkout"
        assert [r.passed for r in checks.results] == [True, True, False]
        assert checks.results[2].detail == "absent"
        assert checks.changed == [] and checks.diff == f"diffs/{item}.a1.patch"
        assert (folder.root / checks.diff).read_text() == ""
        # grading never rewrites a result: the result document has no grade in it
        assert "checks" not in orjson.loads(folder.result_path(item).read_bytes())
    # the seed file really was in every checkout the sessions ran in
    for env_root in (tmp_path / "envs").iterdir():
        assert (
            env_root / "work" / "src" / "billing.py"
        ).read_text() == "def total(a, b):\n    return a + b\n"


def test_merge_carries_checks_diffs_and_verdicts_under_the_merged_attempt_numbers(tmp_path: Path) -> None:
    from ablate.folder.layout import RunFolder
    from ablate.grade.evaluate import ChecksGrade
    from ablate.grade.record import JudgeVerdict, carry_grades, diff_rel, record_checks, record_verdict

    src, dest = RunFolder(tmp_path / "a"), RunFolder(tmp_path / "b")
    item = "t__C0__r00"
    (src.root / diff_rel(item, 1)).parent.mkdir(parents=True)
    (src.root / diff_rel(item, 1)).write_text("diff of attempt 1\n")
    grade = ChecksGrade(
        attempt=1, source="checkout", passed=True, n_passed=1, n_checks=1, diff=diff_rel(item, 1)
    )
    record_checks(src, item, grade)
    record_verdict(src, item, JudgeVerdict(judge_model="claude-haiku-4-5", attempt=1, verdict="pass"))
    record_verdict(src, item, JudgeVerdict(judge_model="claude-haiku-4-5", attempt=3, verdict="fail"))
    carry_grades(src, dest, item, {1: 2})
    merged = read_grade(dest, item)
    assert merged is not None
    checks = merged.checks_for(2)
    assert checks is not None and checks.attempt == 2 and checks.diff == diff_rel(item, 2)
    assert (dest.root / diff_rel(item, 2)).read_text() == "diff of attempt 1\n"
    assert merged.checks_for(1) is None
    # a verdict on an attempt the merge did not carry is not carried either
    assert [(v.attempt, v.verdict) for v in merged.judges] == [(2, "pass")]

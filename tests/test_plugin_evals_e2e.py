"""End to end: `ablate ab --tasks PLUGIN` runs a plugin's eval case with the real CLI against ablate.sim (one
short session per cell, two in all): the case is a task named after its folder, the run folder keeps the TOML
ablate converted it to, and each grader is a check reported under its name, read from what the session did
(its tool calls in the transcript, its final answer, the paths it changed), with the weighted grader score the
report's primary metric. The case's append_system_prompt reaches the system prompt of every request (the
sim's log), and its EVAL_* variable the session's Bash tool (a grader reads back the file it wrote)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.result import iter_results
from ablate.grade.record import read_grade
from ablate.report.sections import build_report
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import ABLATE

pytestmark = pytest.mark.e2e

EDIT = {"old_string": 'return "Hello, " + name', "new_string": 'return "Hello, " + name + "!"'}
SCRIPT: dict[str, Any] = {
    "default": {"text": "OK"},
    "rules": [
        {
            "name": "read",
            "where": "prompt",
            "contains": ["EXCLAIM"],
            "turn": 0,
            "tool_use": [
                {"name": "Read", "input": {"file_path": "${cwd}/app.py"}},
                # the case's EVAL_* variable, as the session's tools see it, into a file a grader reads
                {"name": "Bash", "input": {"command": 'printf %s "$EVAL_GREETING" > eval.txt'}},
            ],
        },
        {
            "name": "edit",
            "where": "prompt",
            "contains": ["EXCLAIM"],
            "turn": 1,
            "tool_use": [{"name": "Edit", "input": {"file_path": "${cwd}/app.py", **EDIT}}],
        },
        {
            "name": "done",
            "where": "prompt",
            "contains": ["EXCLAIM"],
            "turn": {"min": 2},
            "text": "Done: greet ends with !",
        },
    ],
}
GRADERS = {
    "reads-first.md": "---\ntype: tool_order\nbefore: Read\nafter: {tool: Edit, input_match: 'app\\.py'}\n---\n",
    "edits-once.md": "---\ntype: tool_used\ntool: Edit\nmin: 1\nmax: 1\n---\n",
    "says-done.md": "---\ntype: regex\nflags: i\nweight: 2\n---\n^done\n",
    "bash-once.md": "---\ntype: tool_used\ntool: Bash\nmax: 1\n---\n",
    "saw-env.md": "---\ntype: regex\ntarget: {source: file, path: eval.txt}\nmatch: count:1\n---\n^hello-42$\n",
    "wrote-app.md": '---\ntype: file_exists\npath: "*.py"\n---\n',
    "wrote-notes.md": "---\ntype: file_exists\npath: NOTES.md\nweight: 3\n---\n",
}


def test_a_plugin_eval_case_runs_as_a_task_and_its_graders_are_named_checks(
    claude: Path, tmp_path: Path
) -> None:
    ex = materialise_example(tmp_path / "ex")
    plugin = tmp_path / "greeter"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "greeter"}')
    case = plugin / "evals" / "exclaim"
    (case / "graders").mkdir(parents=True)
    (case / "prompt.md").write_text(
        "---\nmax_turns: 5\nallowed_tools: [Read, Edit]\nappend_system_prompt: APPENDED-RULE-7\n"
        "env: {EVAL_GREETING: hello-42}\nruns: 1\n---\nEXCLAIM: make greet() end with '!'.\n"
    )
    for name, text in GRADERS.items():
        (case / "graders" / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env.update({"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "IS_SANDBOX": "1"})
    argv = [ABLATE, "ab", "--tasks", str(plugin), "--out", str(tmp_path / "runs"), "--report", "none"]
    argv += ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--claude-bin", str(claude)]
    with SimServer(script_from_data(SCRIPT)) as sim:
        env["ANTHROPIC_BASE_URL"] = sim.base_url
        argv += ["--work-dir", str(tmp_path / "envs")]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        asked = [r for r in sim.messages_requests() if "EXCLAIM" in r.text]
    assert proc.returncode == 0, proc.stderr
    # the case's append_system_prompt reached the system prompt of every request of both cells' sessions
    assert {r.session_id for r in asked} and len({r.session_id for r in asked}) == 2
    assert all("APPENDED-RULE-7" in json.dumps(r.body.get("system")) for r in asked)
    assert "allowed_tools not applied" in proc.stderr
    assert "repeats: 1, the largest runs the tasks ask for (task exclaim)" in proc.stderr  # said at the start
    (run_dir,) = (tmp_path / "runs").iterdir()
    folder = RunFolder(run_dir)
    assert [t.id for t in read_manifest(folder).tasks] == ["exclaim"]
    assert "Converted by ablate from" in (run_dir / "tasks" / "exclaim.toml").read_text()
    results = iter_results(folder)
    assert len(results) == 2
    for r in results:
        grade = read_grade(folder, r.item)
        assert grade is not None
        checks = grade.checks_for(r.attempt)
        assert checks is not None
        verdicts = {c.name: c.passed for c in checks.results}
        assert verdicts == {
            "edits-once": True,
            "bash-once": True,
            "reads-first": True,
            "saw-env": True,  # the case's EVAL_GREETING reached the session's Bash tool
            "says-done": True,
            "wrote-app": True,
            "wrote-notes": False,
        }, [c.detail for c in checks.results]
        assert checks.changed == ["app.py", "eval.txt"]
        assert checks.score == pytest.approx(7 / 10)  # all but wrote-notes (weight 3) of 10
    report = build_report(run_dir)
    assert report.primary_metric == "checks_score"
    # each grader under its name in the report: passed / evaluated per cell
    rates = {(g.grader, g.cell): (g.passed, g.n) for g in report.graders}
    assert rates[("wrote-notes", "C0")] == (0, 1) and rates[("reads-first", "C11")] == (1, 1)
    assert len(rates) == 14
    from ablate.report import graders
    from ablate.report.blocks import Document
    from ablate.report.context import Page
    from ablate.report.markdown import render_markdown

    md = render_markdown(Document(title="t", blocks=graders.render(report, Page())))
    assert "| exclaim | says-done | regex | 2 | 1/1 | 1/1 |" in md

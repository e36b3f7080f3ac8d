"""The real pinned ``claude`` CLI completes sessions against the simulated endpoint (three runs, ~1.5 s each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.core.resources import data_dir
from ablate.sim import SimServer, load_script, script_from_data
from tests.helpers_cli import (
    make_repo,
    read_jsonl,
    run_claude,
    tool_results,
    tool_uses,
    write_agent,
    write_skill,
)

pytestmark = pytest.mark.e2e


def test_capture_mode_plain_session(claude: Path, tmp_path: Path, isolated_home: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    cfg = tmp_path / "cfg"
    with SimServer(log_path=tmp_path / "requests.jsonl") as sim:
        run = run_claude(
            claude,
            "SIM-PLAIN what is 2+2?",
            cwd=repo,
            home=isolated_home,
            config_dir=cfg,
            base_url=sim.base_url,
        )
        requests = sim.requests()
        assert sim.errors == []
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.output is not None and run.output["result"] == "OK." and run.output["is_error"] is False
    assert run.transcript() is not None
    (call,) = [r for r in requests if r.is_messages]
    assert call.session_id == run.session_id and call.stream and call.turn == 0 and call.rule == "default"
    assert call.auth == "x-api-key"
    assert "SIM-PLAIN what is 2+2?" in call.text
    assert f"Primary working directory: {repo.resolve()}" in call.text
    assert call.headers["user-agent"].startswith("claude-cli/")
    # The CLI's connectivity check is answered, not logged as an error.
    assert all(r.status == 200 for r in requests)


def test_scripted_session_reads_runs_bash_invokes_a_skill_and_a_subagent(
    claude: Path, tmp_path: Path, isolated_home: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "# Demo app\n\nSIM-README-CANARY\n"})
    cfg = tmp_path / "cfg"
    write_skill(
        cfg, "sim-notes", "Write short notes about the repository.", "SIM-SKILL-BODY: one line per file."
    )
    write_agent(
        cfg, "sim-helper", "Summarizes files for the SIM demo.", "SIM-HELPER-AGENT: summarize in one line."
    )
    demo = load_script(data_dir("shadow") / "sim" / "default.toml")
    # One transient 429 at the Skill turn, recovered by the CLI's single retry.
    flaky = script_from_data({"rules": [{"name": "flaky", "turn": 2, "times": 1, "error": {"status": 429}}]})
    script = demo.model_copy(update={"rules": [*flaky.rules, *demo.rules]})
    with SimServer(script, log_path=tmp_path / "requests.jsonl") as sim:
        run = run_claude(
            claude,
            "SIM-DEMO summarize this repository",
            cwd=repo,
            home=isolated_home,
            config_dir=cfg,
            base_url=sim.base_url,
            max_retries=1,
        )
        rules = [r.rule for r in sim.requests() if r.is_messages]
    assert run.returncode == 0, run.stdout + run.stderr
    assert rules == [
        "demo-read", "demo-bash", "flaky", "demo-skill", "demo-agent", "helper-read", "helper-done", "demo-done",
    ]  # fmt: skip
    assert run.output is not None and run.output["result"].startswith("SIM-DEMO done")
    # The script's usages are the ground truth: main 4 x 1200/80 + 2400/30; the sub-agent 900/40 + 950/25.
    assert run.output["usage"]["input_tokens"] == 7200 and run.output["usage"]["output_tokens"] == 350
    assert run.output["total_cost_usd"] == pytest.approx((7200 + 1850) * 3e-6 + (350 + 65) * 15e-6)
    records = run.records()
    assert [t["name"] for t in tool_uses(records)] == ["Read", "Bash", "Skill", "Agent"]
    results = tool_results(records)
    assert "SIM-README-CANARY" in str(results[0]["content"])
    assert "Launching skill: sim-notes" in str(results[2]["content"])
    assert any(r.get("isMeta") and "SIM-SKILL-BODY" in str(r["message"]["content"]) for r in records)
    retries = [r for r in records if r.get("type") == "system" and r.get("subtype") == "api_error"]
    assert len(retries) == 1 and retries[0]["error"]["status"] == 429
    (sub,) = run.subagent_files()
    assert sub.with_suffix(".meta.json").exists()
    assert [t["name"] for t in tool_uses(read_jsonl(sub))] == ["Read"]


def test_rate_limit_rule_fails_the_run_with_429(claude: Path, tmp_path: Path, isolated_home: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    script = script_from_data({"rules": [{"name": "limited", "error": {"status": 429}}]})
    with SimServer(script, log_path=tmp_path / "requests.jsonl") as sim:
        run = run_claude(
            claude,
            "SIM-LIMIT hello",
            cwd=repo,
            home=isolated_home,
            config_dir=tmp_path / "cfg",
            base_url=sim.base_url,
            max_retries=1,
        )
        attempts = [r for r in sim.requests() if r.is_messages]
    assert run.returncode == 1
    assert run.output is not None
    assert run.output["is_error"] is True and run.output["api_error_status"] == 429
    assert len(attempts) == 2 and {r.status for r in attempts} == {429}

"""`ablate mine` and `ablate recover` through the CLI (the `mine` group's own typer app)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from tests.helpers_cli import invoke
from tests.mining_support import NAMES, lay_out

README = Path(__file__).resolve().parent.parent / "docs" / "GUIDE.md"


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    root = tmp_path / "projects"
    for i, name in enumerate(NAMES):
        lay_out(root / f"-p{i % 3}", name)
    return root


def test_mine_json_lines(projects: Path) -> None:
    res = invoke(["mine", str(projects), "--json"])
    assert res.exit_code == 0, res.output
    docs = [orjson.loads(line) for line in res.stdout.splitlines()]
    assert len(docs) == len(NAMES)
    by_status = sorted(d["status"] for d in docs)
    assert by_status.count("completed") == 6 and by_status.count("rate_limited") == 2
    agent = next(d for d in docs if d["transcript"].endswith("/agent.jsonl"))
    assert (agent["main"]["api_calls"], agent["subagents"]["api_calls"], agent["total"]["input_tokens"]) == (
        2,
        2,
        4250,
    )


def test_mine_table_and_by(projects: Path) -> None:
    res = invoke(["mine", str(projects)])
    assert res.exit_code == 0 and "rate_limited 429" in res.stdout and "release-notes" in res.stdout
    res = invoke(["mine", str(projects), "--by", "tool", "--json"])
    rows = {e["tool"]: e for e in map(orjson.loads, res.stdout.splitlines())}
    assert rows["Read"] == {"tool": "Read", "calls": 7, "sessions": 6}
    res = invoke(["mine", str(projects), "--by", "skill"])
    assert re.search(r"release-notes\s+1\s+1\s+1", res.stdout)
    res = invoke(["mine", str(projects), "--by", "file", "--json"])
    assert orjson.loads(res.stdout.splitlines()[0]) == {"file": "app.py", "calls": 4, "sessions": 4}


def test_mine_pitfalls(projects: Path) -> None:
    res = invoke(["mine", str(projects / "-p1"), "--json", "--pitfall", "greet=friendlier"])
    assert res.exit_code == 0
    hits = {Path(d["transcript"]).stem: d["pitfall_hits"] for d in map(orjson.loads, res.stdout.splitlines())}
    assert hits["multi_tool"] == {"greet": 1}
    assert invoke(["mine", str(projects), "--pitfall", "nope"]).exit_code == 2
    assert invoke(["mine", str(projects), "--pitfall", "x=("]).exit_code == 2


def test_mine_bad_input(tmp_path: Path) -> None:
    res = invoke(["mine", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "no such file" in res.stderr
    (tmp_path / "empty").mkdir()
    assert invoke(["mine", str(tmp_path / "empty")]).exit_code == 2


def test_mine_reports_damage_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        b'{"type":"user","sessionId":"s","message":{"role":"user","content":"hi"}}\nnot json\n{"type":"zz"}\n'
    )
    res = invoke(["mine", str(path), "--json"])
    assert res.exit_code == 0
    doc = orjson.loads(res.stdout)
    assert (doc["malformed_lines"], doc["unknown_record_types"], doc["status"]) == (1, {"zz": 1}, "killed")
    assert "1 malformed" in res.stderr


def test_recover_cli(tmp_path: Path) -> None:
    from tests.test_recover import build_run_dir  # the same run folder as the library tests

    root = build_run_dir(tmp_path)
    res = invoke(["recover", str(root), "--dry-run"])
    assert res.exit_code == 3, res.output  # the rate-limited and transcript-less items need a re-run
    assert "needs_rerun" in res.stdout and not (root / "results").exists()
    res = invoke(["recover", str(root), "--json"])
    actions = {d["item"]: d["action"] for d in map(orjson.loads, res.stdout.splitlines())}
    assert actions["killed"] == "recovered" and (root / "results" / "killed.json").exists()
    assert invoke(["recover", str(tmp_path / "none")]).exit_code == 2
    assert invoke(["recover", str(tmp_path)]).exit_code == 2  # a folder that is no run folder: bad input


def test_help_documents_exit_codes() -> None:
    for cmd in ("mine", "recover"):
        res = invoke([cmd, "--help"])
        assert res.exit_code == 0 and "Exit codes" in res.stdout


def test_readme_documents_every_json_field(projects: Path) -> None:
    text = README.read_text()
    assert "## Mining transcripts" in text
    section = text[text.index("## Mining transcripts") :]
    doc = orjson.loads(invoke(["mine", str(projects / "-p0" / "agent.jsonl"), "--json"]).stdout)
    for key in [*doc, *doc["main"]]:
        assert f"`{key}`" in section, key


def test_worker_processes_give_the_same_answers_in_the_same_order(projects: Path) -> None:
    one = invoke(["mine", str(projects), "--json", "--jobs", "1"])
    two = invoke(["mine", str(projects), "--json", "--jobs", "2"])
    assert one.exit_code == two.exit_code == 0
    assert one.stdout == two.stdout
    assert len(one.stdout.splitlines()) == len(NAMES)

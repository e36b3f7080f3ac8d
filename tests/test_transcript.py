"""The miner against the real Claude Code 2.1.332 fixtures and the hand-written older-format transcript."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ablate.core.workers import CHUNK
from ablate.mine.derive import mine_session
from ablate.mine.discover import iter_sessions, mine_each
from ablate.mine.model import SessionResult
from ablate.setup.tasks import PitfallPattern
from tests.mining_support import EXPECTED, NAMES, OLD_SESSION, lay_out, relative, stdout_of


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("projects") / "-srv-fx-demo-app"
    return {name: lay_out(root, name) for name in NAMES}


def _status_expected(exp: dict[str, object]) -> str:
    if exp["terminal_reason"] is None:
        return "killed"
    if exp["terminal_reason"] == "api_error":
        return "rate_limited"  # both api_error fixtures are 429s
    return str(exp["terminal_reason"])


@pytest.mark.parametrize("with_stdout", [True, False], ids=["stdout", "transcript-only"])
@pytest.mark.parametrize("name", NAMES)
def test_fixture_metrics_reproduced(laid_out: dict[str, Path], name: str, with_stdout: bool) -> None:
    exp = EXPECTED[name]
    r = mine_session(laid_out[name], stdout=stdout_of(name) if with_stdout else None)
    assert r.session_id == orjson.loads(laid_out[name].read_bytes().splitlines()[0])["sessionId"]
    assert r.status == _status_expected(exp)
    assert r.main.api_calls == exp["api_calls"]
    assert r.main.tool_calls == exp["tool_calls"]
    assert r.main.tool_histogram == exp["tool_histogram"]
    assert [s.skill for s in r.main.skills_invoked] == exp["skills_invoked"]
    assert all(s.outcome == "ok" for s in r.main.skills_invoked)
    assert r.main.files_read == relative(exp["files_read"], name)
    assert r.subagents.api_calls == exp["sub_api_calls"]
    assert r.subagents.tool_histogram == exp["sub_tool_histogram"]
    assert r.subagents.files_read == relative(exp["sub_files_read"], name)
    assert (r.main.input_tokens, r.main.output_tokens) == (exp["input_tokens"], exp["output_tokens"])
    assert (r.total.input_tokens, r.total.output_tokens) == (
        exp["input_tokens_incl_sub"],
        exp["output_tokens_incl_sub"],
    )
    assert r.total.cache_creation_tokens == r.total.cache_read_tokens == 0
    assert r.cost_usd == pytest.approx(exp["cost_usd"], rel=1e-12)
    assert r.cost_source == "cost-state" and not r.cost_estimated
    assert r.total.retry_records == exp["api_error_retry_records"]
    # The calibrated rule reproduces the CLI's own num_turns (last prompt) for every fixture.
    if exp["num_turns"] is not None:
        assert r.turns_last_prompt == exp["num_turns"]
    if with_stdout:
        assert r.num_turns_cli == exp["num_turns"]
        assert r.reconciliation.get("cost_usd", {}).get("difference", 0.0) == 0.0
    assert r.malformed_lines == r.truncated_lines == 0
    assert r.unknown_record_types == {}


def test_usage_is_counted_once_per_message_id(laid_out: dict[str, Path]) -> None:
    naive_in = 0
    for line in laid_out["multi_tool"].read_bytes().splitlines():
        rec = orjson.loads(line)
        if rec["type"] == "assistant":
            naive_in += rec["message"]["usage"]["input_tokens"]
    assert naive_in == 10800  # the trap: 8 records for 5 message ids
    r = mine_session(laid_out["multi_tool"])
    assert (r.main.api_calls, r.main.input_tokens) == (5, 7200)
    assert r.cost_usd == pytest.approx(r.reconciliation["cost_estimate"]["estimate"])


def test_background_agent_cli_output_covers_only_last_prompt(laid_out: dict[str, Path]) -> None:
    r = mine_session(laid_out["agent_background"], stdout=stdout_of("agent_background"))
    assert r.num_turns_cli == 1 and r.turns_last_prompt == 1
    assert r.prompts == 2  # the task-notification starts a second prompt
    assert (r.turns, r.turns_source) == (3, "rule")  # 1 + Agent result, then 1: the whole session
    cli_usage = orjson.loads(stdout_of("agent_background").read_bytes())["usage"]
    assert cli_usage["input_tokens"] == 1300  # the CLI's usage is the last call only...
    assert r.main.input_tokens == 3700 and r.total.input_tokens == 5160  # ...the transcript has all
    assert r.agents == [
        {
            "agent_id": "adaf7efa6510607fb",
            "type": "general-purpose",
            "request_shape": "background",
            "finished": True,
        }
    ]


def test_subagent_tokens_and_files_are_their_own_block(laid_out: dict[str, Path]) -> None:
    r = mine_session(laid_out["agent"])
    assert (r.subagents.input_tokens, r.subagents.output_tokens) == (1850, 65)
    assert r.subagents.files_read == ["README.md"] and r.main.files_read == []
    assert r.total.tool_histogram == {"Agent": 1, "Read": 1}
    assert r.agents[0]["type"] == "doc-summarizer"


def test_recovered_429s_are_not_failures(laid_out: dict[str, Path]) -> None:
    r = mine_session(laid_out["rate_limit_recovered"], stdout=stdout_of("rate_limit_recovered"))
    assert r.status == "completed"
    assert r.main.retry_records == 2 and r.main.retry_statuses == {"429": 2}
    assert r.main.failed_calls == 0
    assert r.main.http_attempts == 3


def test_rate_limited_run_is_flagged_for_the_runner(laid_out: dict[str, Path]) -> None:
    for stdout in (stdout_of("rate_limited"), None):
        r = mine_session(laid_out["rate_limited"], stdout=stdout)
        assert (r.status, r.api_error_status) == ("rate_limited", 429)
        assert r.main.failed_calls == 1 and r.main.http_attempts == 5
        assert r.rate_limit_reset is None  # an API 429, not a subscription limit with a reset time


def test_max_turns_without_result_key(laid_out: dict[str, Path]) -> None:
    doc = orjson.loads(stdout_of("max_turns").read_bytes())
    assert "result" not in doc
    r = mine_session(laid_out["max_turns"], stdout=stdout_of("max_turns"))
    assert (r.status, r.turns, r.turns_source) == ("max_turns", 4, "cli")


def test_killed_run_with_empty_stdout(laid_out: dict[str, Path]) -> None:
    r = mine_session(laid_out["killed_by_timeout"], stdout=stdout_of("killed_by_timeout"))
    assert r.stdout_kind == "empty"
    assert r.status == "killed"
    assert r.num_turns_cli is None and (r.turns, r.turns_source) == (2, "rule")
    assert r.cost_usd == pytest.approx(0.0048) and r.cost_source == "cost-state"
    assert r.main.retry_statuses == {"429": 5} and r.main.failed_calls == 0
    assert r.estimated_fields == ["turns"]


def test_instruction_files_skills_listed_and_skill_outcome(laid_out: dict[str, Path]) -> None:
    r = mine_session(laid_out["skill"])
    assert r.instruction_files == [
        {"path": "/srv/fx/skill/claude-config/CLAUDE.md", "type": "User"},
        {"path": "/srv/fx/skill/claude-config/axioms.md", "type": "User"},
        {"path": "/srv/fx/skill/demo-app/CLAUDE.md", "type": "Project"},
    ]
    assert len(r.skills_listed) == 14 and r.skills_listed[0] == "release-notes"
    assert [s.to_json() for s in r.total.skills_invoked] == [{"skill": "release-notes", "outcome": "ok"}]
    assert r.hooks_fired == {}


def test_pitfalls_match_assistant_text_never_the_prompt(laid_out: dict[str, Path]) -> None:
    pitfalls = [
        PitfallPattern("prompt-word", r"FX-MULTI"),  # only in the prompt (and its echoes in snapshots)
        PitfallPattern("greeting", r"friendlier"),  # in the prompt and in the model's text
        PitfallPattern("edit-input", r"Hello, \{name\}", scope="text+tools"),  # only in the Edit input
        PitfallPattern("edit-text-only", r"Hello, \{name\}"),
    ]
    r = mine_session(laid_out["multi_tool"], pitfalls=pitfalls)
    assert r.pitfall_hits == {"prompt-word": 0, "greeting": 1, "edit-input": 1, "edit-text-only": 0}


def test_cwd_override_and_paths_outside_cwd(laid_out: dict[str, Path]) -> None:
    r = mine_session(laid_out["multi_tool"], cwd=Path("/srv/fx/multi_tool"))
    assert r.main.files_read == ["demo-app/app.py", "demo-app/README.md"]
    r = mine_session(laid_out["multi_tool"], cwd=Path("/elsewhere"))
    assert r.main.files_read == [
        "/srv/fx/multi_tool/demo-app/app.py",
        "/srv/fx/multi_tool/demo-app/README.md",
    ]


def test_missing_transcript_is_no_transcript(tmp_path: Path) -> None:
    r = mine_session(tmp_path / "nope.jsonl", stdout=stdout_of("plain"))
    assert r.status == "no_transcript"
    assert r.session_id == "78d7c0ae-cf96-40cc-ac7b-f7aeec85285a"  # from the stdout document
    assert r.total.api_calls == 0


def test_json_contract(laid_out: dict[str, Path]) -> None:
    j = mine_session(laid_out["agent"], stdout=stdout_of("agent")).to_json()
    for key in ("session_id", "status", "turns", "cost_usd", "cost_estimated", "main", "subagents", "total"):
        assert key in j
    for block in ("main", "subagents", "total"):
        for key in (
            "api_calls",
            "input_tokens",
            "output_tokens",
            "cache_creation_tokens",
            "cache_read_tokens",
            "tool_calls",
            "tool_histogram",
            "files_read",
            "skills_invoked",
        ):
            assert key in j[block], (block, key)
    assert orjson.loads(orjson.dumps(j)) == j


# -- older transcripts and damaged files ---------------------------------------------------------------


def test_old_format_transcript() -> None:
    exp = orjson.loads((OLD_SESSION.parent / "expected.json").read_bytes())
    r = mine_session(OLD_SESSION, pitfalls=[PitfallPattern("eval", "eval")])
    j = r.to_json()
    for key in ("session_id", "status", "turns", "turns_source", "cost_estimated", "malformed_lines"):
        assert j[key] == exp[key], key
    assert j["truncated_lines"] == exp["truncated_lines"]
    assert j["unknown_record_types"] == exp["unknown_record_types"]
    assert j["cost_usd"] == pytest.approx(exp["cost_usd"])
    assert j["duration_s"] == exp["duration_s"] and j["duration_source"] == "timestamps"
    for block in ("main", "subagents", "total"):
        for key, value in exp[block].items():
            assert j[block][key] == value, (block, key)
    assert r.pitfall_hits == exp["pitfall_hits_text"]
    r2 = mine_session(OLD_SESSION, pitfalls=[PitfallPattern("eval", "eval", scope="text+tools")])
    assert r2.pitfall_hits == exp["pitfall_hits_text_tools"]
    assert set(r.estimated_fields) == {"cost_usd", "turns", "duration_s"}


def test_unknown_model_cost_is_none_and_flagged(tmp_path: Path) -> None:
    text = OLD_SESSION.read_text().replace("claude-3-7-sonnet-20250219", "claude-nova-9")
    path = tmp_path / "s.jsonl"
    path.write_text(text)
    r = mine_session(path)
    assert r.cost_usd is None and r.cost_estimated and r.unknown_models == ["claude-nova-9"]


def test_file_being_appended_while_read(tmp_path: Path, laid_out: dict[str, Path]) -> None:
    lines = laid_out["multi_tool"].read_bytes().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if orjson.loads(ln)["type"] == "assistant")
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"".join(lines[: cut + 1]) + lines[cut + 1][:50])  # a torn record at the end
    early = mine_session(path)
    assert early.truncated_lines == 1 and early.malformed_lines == 0
    assert early.status == "killed" and early.main.api_calls == 1
    with path.open("ab") as fh:
        fh.write(lines[cut + 1][50:] + b"".join(lines[cut + 2 :]))
    late = mine_session(path)
    assert late.truncated_lines == 0 and late.status == "completed" and late.main.api_calls == 5


def test_last_line_without_newline_but_complete_is_counted(tmp_path: Path, laid_out: dict[str, Path]) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(laid_out["plain"].read_bytes().rstrip(b"\n"))
    r = mine_session(path)
    assert r.truncated_lines == 0 and r.cost_source == "cost-state"


def _reordered(src: Path, dest: Path) -> None:
    """Rewrite every record with sorted keys: ``type`` is no longer first, ``attachment`` no longer early."""
    out = [
        orjson.dumps(orjson.loads(ln), option=orjson.OPT_SORT_KEYS) for ln in src.read_bytes().splitlines()
    ]
    dest.write_bytes(b"\n".join(out) + b"\n")


@pytest.mark.parametrize("name", NAMES)
def test_fast_path_does_not_depend_on_key_order(tmp_path: Path, laid_out: dict[str, Path], name: str) -> None:
    reordered = lay_out(tmp_path, name)
    _reordered(laid_out[name], reordered)
    for sub in (laid_out[name].parent / name / "subagents").glob("agent-*.jsonl"):
        _reordered(sub, reordered.parent / name / "subagents" / sub.name)
    a, b = mine_session(laid_out[name]).to_json(), mine_session(reordered).to_json()
    a.pop("transcript"), b.pop("transcript")
    for block in ("main", "subagents", "total"):
        assert a[block].pop("records") == b[block].pop("records")
    assert a == b


def test_iter_sessions_finds_sessions_not_subagents(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    lay_out(projects / "-a", "agent")
    lay_out(projects / "-b", "plain")
    (projects / "-b" / "notes.jsonl").write_text('{"seq": 1, "session_id": "x"}\n')
    (projects / "-b" / ".jsonl").write_text('{"sessionId": "x"}\n')  # no suffix, as pathlib sees it
    found = [p.relative_to(projects).as_posix() for p in iter_sessions([projects])]
    assert found == ["-a/agent.jsonl", "-b/plain.jsonl"]
    assert list(iter_sessions([projects / "-a" / "agent" / "subagents"])) == []  # folded into their session
    assert list(iter_sessions([projects / "-a" / "agent.jsonl", tmp_path / "missing"])) == [
        projects / "-a" / "agent.jsonl"
    ]


def test_iter_sessions_yields_in_sorted_path_order_as_it_walks(tmp_path: Path) -> None:
    """Part by part, as ``sorted(Path)``: a folder's files fall where its name does among its siblings'
    (``a/…``, then ``a-b/…``, then ``a.jsonl``), and a link to a folder is never entered."""
    sid = "0b7c8a3e-1f2d-4c5b-9a8e-7d6c5b4a3f21"
    session = '{"sessionId": "s"}\n'
    for rel in (
        "a/x.jsonl",
        "a.jsonl",
        "a-b/y.jsonl",
        f"a/{sid}.jsonl",
        "a/subagents/z.jsonl",
        "b/c/d.jsonl",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(session)
    (tmp_path / "a" / "notes.jsonl").write_text('{"seq": 1}\n')  # not a transcript
    (tmp_path / "link").symlink_to(tmp_path / "b", target_is_directory=True)
    found = list(iter_sessions([tmp_path]))
    assert found == sorted(found)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        f"a/{sid}.jsonl",
        "a/x.jsonl",
        "a-b/y.jsonl",
        "a.jsonl",
        "b/c/d.jsonl",
    ]


def _transcript_of(r: SessionResult) -> Path:
    return r.transcript


def test_each_transcript_is_paired_with_its_own_result_in_order(tmp_path: Path) -> None:
    """More sessions than the pool reads before it starts (the rest stream in as the walk finds them), mined
    by two workers: each comes back beside its own result, in the walk's order."""
    n = CHUNK * 2 * 8 + 30
    for i in range(n):
        folder = tmp_path / f"-p{i // 100}"
        folder.mkdir(exist_ok=True)
        (folder / f"s{i:04d}.jsonl").write_text(f'{{"type": "user", "sessionId": "s{i}"}}\n')
    found = list(iter_sessions([tmp_path]))
    pairs = list(mine_each(iter_sessions([tmp_path]), _transcript_of, jobs=2))
    assert len(found) == n and [t for t, _ in pairs] == found
    assert all(t == r for t, r in pairs)


def test_result_is_a_session_result(laid_out: dict[str, Path]) -> None:
    assert isinstance(mine_session(laid_out["plain"]), SessionResult)

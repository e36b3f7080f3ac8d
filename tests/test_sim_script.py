"""Sim scripts: validation with located errors, and how rules match requests (no server involved)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ablate.core.errors import SpecError, UsageError
from ablate.core.resources import data_dir
from ablate.sim import (
    RequestView,
    Responder,
    Script,
    draw,
    load_script,
    prompt_text,
    request_text,
    script_from_data,
)

REMINDER = "<system-reminder>\nContents of /cfg/CLAUDE.md: CANARY_USER\n</system-reminder>"


def body(prompt: str = "do it", *, turns: int = 0, system: str = "You are Claude Code.") -> dict[str, Any]:
    """A Claude Code-shaped request: reminders then the prompt in msg0, then `turns` assistant/user pairs."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": REMINDER}, {"type": "text", "text": prompt}]}
    ]
    for i in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {}}],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}]}
        )
    return {
        "model": "claude-sonnet-4-6",
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc"},
            {"type": "text", "text": system},
        ],
        "messages": messages,
        "tools": [{"name": "Read", "description": "Reads a file", "input_schema": {"type": "object"}}],
    }


def decide(script: Script, req: dict[str, Any], *, seed: int = 0, session: str | None = None) -> str:
    return Responder(script, seed).decide(RequestView(req, session)).rule


def test_bundled_scripts_are_valid() -> None:
    scripts = sorted((data_dir("shadow") / "sim").glob("*.toml"))
    assert scripts, "shadow/sim/ ships example scripts"
    for path in scripts:
        load_script(path)


def test_malformed_script_is_a_located_spec_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        """
[[rules]]
name = "a"
turn = { min = 3, max = 1 }
text = "x"

[[rules]]
name = "b"
regex = "("
text = "y"
colour = "red"

[[rules]]
name = "c"
error = { status = 418 }
"""
    )
    with pytest.raises(SpecError) as info:
        load_script(path)
    lines = str(info.value).splitlines()
    assert any(
        line.startswith(f"{path}: rules.0.turn: ") and "min (3) is greater than max (1)" in line
        for line in lines
    )
    assert any(line.startswith(f"{path}: rules.1.regex: ") and "invalid regex" in line for line in lines)
    assert any(line.startswith(f"{path}: rules.1.colour: unknown field") for line in lines)
    assert any(line.startswith(f"{path}: rules.2.error.status: ") for line in lines)
    assert isinstance(info.value, UsageError) and info.value.exit_code == 2


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"rules": [{"name": "a", "text": "x"}, {"name": "a", "text": "y"}]}, "rules", "used twice"),
        ({"rules": [{"name": "a"}]}, "rules.0", "needs `text`, `tool_use` or `error`"),
        ({"rules": [{"name": "a", "text": "x", "error": {"status": 429}}]}, "rules.0", "cannot also have"),
        ({"rules": [{"name": "a", "text": "${nope}"}]}, "rules.0", "unknown placeholder ${nope}"),
        ({"rules": [{"name": "a", "text": "x", "probability": 0}]}, "rules.0.probability", "greater than 0"),
        ({"rules": [{"name": "a", "text": "x", "turn": "first"}]}, "rules.0.turn", "expected a turn count"),
        ({"rules": [{"name": "bad name", "text": "x"}]}, "rules.0.name", "pattern"),
        ({"schema_version": 2}, "schema_version", "1"),
    ],
)
def test_validation_messages(data: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        script_from_data(data, "s.toml")
    assert any(p.field == field and message in p.message for p in info.value.problems), info.value.problems


def test_json_scripts_load_too(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"rules": [{"name": "hi", "contains": "hello", "text": "Hi!"}]}')
    script = load_script(path)
    assert script.rules[0].contains == ["hello"]


def test_text_anywhere_finds_reminders_tools_and_tool_results() -> None:
    req = body("fix the bug", turns=1)
    text = request_text(req)
    for needle in ("CANARY_USER", "fix the bug", "You are Claude Code.", "Reads a file", "Bash", "ok"):
        assert needle in text
    assert prompt_text(req) == "fix the bug"


def test_first_matching_rule_wins_and_default_otherwise() -> None:
    script = script_from_data(
        {
            "rules": [
                {"name": "canary", "contains": ["CANARY_USER", "bug"], "text": "a"},
                {"name": "bug", "contains": "bug", "text": "b"},
                {"name": "no-canary", "not_contains": ["CANARY_USER"], "text": "c"},
            ]
        }
    )
    assert decide(script, body("fix the bug")) == "canary"
    assert decide(script, body("write docs")) == "default"


def test_where_restricts_the_searched_text() -> None:
    script = script_from_data(
        {
            "rules": [
                {"name": "sub-agent", "where": "system", "contains": "HELPER-AGENT", "text": "a"},
                {"name": "prompt-only", "where": "prompt", "contains": "CANARY_USER", "text": "b"},
                {"name": "regex", "where": "last_user", "regex": r"^ok$", "text": "c"},
            ]
        }
    )
    assert decide(script, body(system="HELPER-AGENT: summarize")) == "sub-agent"
    # The canary is in a system-reminder, not in the prompt the user typed.
    assert decide(script, body("go")) == "default"
    assert decide(script, body("go", turns=1)) == "regex"


def test_turn_exact_and_range() -> None:
    script = script_from_data(
        {
            "rules": [
                {"name": "first", "turn": 0, "text": "a"},
                {"name": "middle", "turn": {"min": 1, "max": 2}, "text": "b"},
                {"name": "late", "turn": {"min": 3}, "text": "c"},
            ]
        }
    )
    assert [decide(script, body(turns=n)) for n in range(5)] == ["first", "middle", "middle", "late", "late"]


def test_model_condition() -> None:
    script = script_from_data({"rules": [{"name": "haiku", "model": "haiku", "text": "a"}]})
    assert decide(script, body() | {"model": "claude-haiku-4-5"}) == "haiku"
    assert decide(script, body()) == "default"


def test_times_limits_a_rule_per_session_then_falls_through() -> None:
    script = script_from_data(
        {"rules": [{"name": "flaky", "times": 2, "error": {"status": 429}}, {"name": "ok", "text": "fine"}]}
    )
    responder = Responder(script, 0)
    seen = [responder.decide(RequestView(body(), "s1")).rule for _ in range(3)]
    assert seen == ["flaky", "flaky", "ok"]
    assert responder.decide(RequestView(body(), "s2")).rule == "flaky"  # a new session starts afresh


def test_times_per_server_counts_across_sessions() -> None:
    script = script_from_data({"rules": [{"name": "once", "times": 1, "times_per": "server", "text": "x"}]})
    responder = Responder(script, 0)
    assert responder.decide(RequestView(body(), "s1")).rule == "once"
    assert responder.decide(RequestView(body(), "s2")).rule == "default"


def test_draw_is_deterministic_and_uniform_enough() -> None:
    assert draw(0, "r", "text") == draw(0, "r", "text")
    assert draw(0, "r", "text") != draw(1, "r", "text")
    values = [draw(7, "r", f"prompt {i}") for i in range(2000)]
    assert all(0 <= v < 1 for v in values)
    assert 0.45 < sum(v < 0.5 for v in values) / len(values) < 0.55


def test_probability_seeded_by_prompt_is_stable_within_a_session() -> None:
    script = script_from_data({"rules": [{"name": "coin", "probability": 0.5, "text": "heads"}]})
    fired = {decide(script, body(f"task {i}", turns=t)) for i in range(3) for t in range(3)}
    assert fired <= {"coin", "default"}
    for i in range(20):
        assert len({decide(script, body(f"task {i}", turns=t)) for t in range(4)}) == 1


def test_seed_from_prompt_ignores_reminders_and_session_varies_per_session() -> None:
    by_prompt = script_from_data(
        {"seed_from": "prompt", "rules": [{"name": "c", "probability": 0.5, "text": "x"}]}
    )
    other_reminder = body("task")
    other_reminder["messages"][0]["content"][0]["text"] = "<system-reminder>other path</system-reminder>"
    for seed in range(10):
        assert decide(by_prompt, body("task"), seed=seed) == decide(by_prompt, other_reminder, seed=seed)
    by_session = script_from_data(
        {"seed_from": "session", "rules": [{"name": "c", "probability": 0.5, "text": "x"}]}
    )
    outcomes = {decide(by_session, body("task"), session=f"s{i}") for i in range(30)}
    assert outcomes == {"c", "default"}


def test_message_fills_placeholders_and_has_deterministic_ids() -> None:
    script = script_from_data(
        {
            "rules": [
                {
                    "name": "read",
                    "text": "turn ${turn} by ${rule}",
                    "tool_use": [{"name": "Read", "input": {"file_path": "${cwd}/README.md", "n": 3}}],
                    "usage": {"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 5},
                }
            ]
        }
    )
    req = body("go")
    req["messages"][0]["content"][0]["text"] = (
        "<system-reminder>\n - Primary working directory: /w/repo\n</system-reminder>"
    )
    responder = Responder(script, 0)
    view = RequestView(req, "sid")
    msg = responder.message(view, responder.decide(view))
    assert msg["content"][0] == {"type": "text", "text": "turn 0 by read"}
    assert msg["content"][1]["input"] == {"file_path": "/w/repo/README.md", "n": 3}
    assert msg["content"][1]["id"].startswith("toolu_")
    assert msg["stop_reason"] == "tool_use"
    assert msg["usage"]["input_tokens"] == 1200 and msg["usage"]["cache_read_input_tokens"] == 5
    again = responder.message(view, responder.decide(view))
    assert again["id"] == msg["id"] and again["content"][1]["id"] == msg["content"][1]["id"]
    later = RequestView(body("go", turns=1), "sid")
    assert responder.message(later, responder.decide(later))["id"] != msg["id"]


def test_auto_usage_grows_with_the_request() -> None:
    responder = Responder(Script(), 0)
    small = responder.message(RequestView(body("a"), None), responder.decide(RequestView(body("a"), None)))
    big_req = body("a" * 4000)
    big = responder.message(RequestView(big_req, None), responder.decide(RequestView(big_req, None)))
    assert big["usage"]["input_tokens"] >= small["usage"]["input_tokens"] + 1000
    assert small["content"] == [{"type": "text", "text": "OK."}]


def test_variance_script_has_the_ground_truth_it_documents() -> None:
    script = load_script(data_dir("shadow") / "sim" / "variance.toml")
    responder = Responder(script, seed=11)
    with_skill, without = body("write notes"), body("write notes")
    with_skill["messages"][0]["content"][0]["text"] = (
        "<system-reminder>\n- release-notes: Draft notes\n</system-reminder>"
    )
    n = 600
    direct_with = sum(
        responder.decide(RequestView(with_skill, f"a{i}")).rule == "with-skill-direct" for i in range(n)
    )
    direct_without = sum(
        responder.decide(RequestView(without, f"b{i}")).rule == "without-skill-direct" for i in range(n)
    )
    assert abs(direct_with / n - 0.8) < 0.06
    assert abs(direct_without / n - 0.3) < 0.06
    assert responder.decide(RequestView(body("x", turns=1), "c")).rule == "detour"
    assert responder.decide(RequestView(body("x", turns=2), "c")).rule == "detour-done"

"""Robustness of the miner (property tests), the stdout classifier, rate-limit messages and pricing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ablate.core.pricing import estimate_cost, normalize_model, price_for
from ablate.mine.cli_output import is_rate_limit_message, parse_cli_output, parse_reset_time
from ablate.mine.derive import mine_session
from ablate.setup.tasks import PitfallPattern
from tests.mining_support import FIXTURES, lay_out, stdout_of

_json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
_json = st.recursive(
    _json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)
_keys = st.sampled_from(
    [
        "type",
        "message",
        "content",
        "usage",
        "id",
        "model",
        "attachment",
        "isSidechain",
        "isMeta",
        "sourceToolUseID",
        "error",
        "subtype",
        "totalCostUSD",
        "input",
    ]
)
_types = st.sampled_from(["user", "assistant", "attachment", "system", "cost-state", "api-request", "weird"])
# Records that look like transcript records, with fields of any shape.
_records = st.builds(
    lambda t, extra, msg: {"type": t, **extra, "message": msg},
    _types,
    st.dictionaries(_keys, _json, max_size=5),
    _json | st.fixed_dictionaries({"id": _json, "content": _json, "usage": _json, "model": _json}),
)
_lines = st.lists(
    st.binary(max_size=80)
    | _records.map(lambda r: json.dumps(r).encode())  # stdlib: big ints, NaN (invalid JSON) too
    | st.sampled_from([b'{"type":"api-request-blob",', b'{"type":"assistant"', b"[]", b"null", b"\xff\xfe"]),
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=_lines, trailing_newline=st.booleans())
def test_mining_never_raises_on_garbage(tmp_path: Path, lines: list[bytes], trailing_newline: bool) -> None:
    path = tmp_path / "garbage.jsonl"
    data = b"\n".join(lines) + (b"\n" if trailing_newline else b"")
    path.write_bytes(data)
    r = mine_session(path, pitfalls=[PitfallPattern("x", "a", "text+tools")])
    j = r.to_json()
    orjson.dumps(j)
    statuses = {"completed", "api_error", "max_turns", "prompt_too_long", "killed", "rate_limited"}
    assert j["status"] in (statuses if data else {"no_transcript"})  # an empty file is no session
    assert r.malformed_lines + r.truncated_lines <= data.count(b"\n") + 1


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.lists(st.binary(max_size=200), min_size=1, max_size=5), at=st.integers(min_value=0))
def test_garbage_inside_a_real_transcript_keeps_its_metrics(
    tmp_path: Path, garbage: list[bytes], at: int
) -> None:
    lines = (FIXTURES / "multi_tool.jsonl").read_bytes().splitlines()
    i = at % len(lines)
    bad = [g.replace(b"\n", b" ") for g in garbage]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join([*lines[:i], *bad, *lines[i:]]) + b"\n")
    r = mine_session(path)
    assert (r.main.api_calls, r.main.input_tokens, r.main.tool_histogram) == (
        5,
        7200,
        {"Read": 2, "Bash": 2, "Edit": 1},
    )
    assert r.status == "completed"


def test_unreadable_subagent_folder_and_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    r = mine_session(path)
    assert (r.status, r.total.api_calls, r.malformed_lines) == ("no_transcript", 0, 0)


def test_huge_line_across_read_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ablate.mine.parse as t

    monkeypatch.setattr(t, "_CHUNK", 1000)  # every fixture line now spans several blocks
    src = lay_out(tmp_path / "p", "agent")
    r = mine_session(src)
    assert (r.main.api_calls, r.subagents.api_calls, r.total.input_tokens) == (2, 2, 4250)
    assert r.malformed_lines == r.truncated_lines == 0


# -- stdout classification -------------------------------------------------------------------------------


def test_stdout_missing_empty_valid(tmp_path: Path) -> None:
    assert parse_cli_output(tmp_path / "none.json").kind == "missing"
    assert parse_cli_output(stdout_of("killed_by_timeout")).kind == "empty"
    out = parse_cli_output(stdout_of("plain"))
    assert out.kind == "valid" and out.data is not None and out.data["num_turns"] == 1


def test_stdout_two_writers_overwriting(tmp_path: Path) -> None:
    long_doc, short_doc = stdout_of("agent_background").read_bytes(), stdout_of("plain").read_bytes()
    assert len(long_doc) > len(short_doc)
    mixed = short_doc + long_doc[len(short_doc) :]  # the shorter run wrote last, from offset 0
    path = tmp_path / "same.json"
    path.write_bytes(mixed)
    out = parse_cli_output(path)
    assert out.kind == "corrupt" and "after document" in (out.error or "")
    assert [d["session_id"] for d in out.documents] == ["78d7c0ae-cf96-40cc-ac7b-f7aeec85285a"]
    assert out.for_session("78d7c0ae-cf96-40cc-ac7b-f7aeec85285a") is not None
    assert out.for_session("7eafad0d-33d6-494c-be70-752f47a06356") is None  # torn: never trusted


def test_stdout_two_writers_appending(tmp_path: Path) -> None:
    path = tmp_path / "app.json"
    path.write_bytes(stdout_of("plain").read_bytes() + stdout_of("skill").read_bytes())
    out = parse_cli_output(path)
    assert out.kind == "corrupt" and len(out.documents) == 2
    assert out.for_session("5ed0bdf0-0264-4c7f-81be-30e22df59697") == orjson.loads(
        stdout_of("skill").read_bytes()
    )


def test_stdout_rate_limit_stubs(tmp_path: Path) -> None:
    text = tmp_path / "text.json"
    text.write_text("Claude AI usage limit reached|1796004000\n")
    out = parse_cli_output(text)
    assert out.kind == "rate_limit_stub" and out.rate_limit_reset == datetime.fromtimestamp(
        1796004000, tz=UTC
    )
    doc = orjson.loads(stdout_of("plain").read_bytes())
    doc.update(is_error=True, result="You've hit your limit · resets 5pm (Europe/Paris)")
    js = tmp_path / "stub.json"
    js.write_bytes(orjson.dumps(doc))
    out = parse_cli_output(js)
    assert out.kind == "rate_limit_stub" and out.rate_limit_reset is not None
    assert out.rate_limit_reset.hour == 17 and str(out.rate_limit_reset.tzinfo) == "Europe/Paris"


def test_rate_limit_stub_makes_the_session_rate_limited(tmp_path: Path) -> None:
    src = lay_out(tmp_path / "p", "killed_by_timeout")
    stub = tmp_path / "stub.json"
    stub.write_text("You've hit your limit · resets 3:30am\n")
    r = mine_session(src, stdout=stub)
    assert r.status == "rate_limited" and r.rate_limit_reset is not None
    assert (r.rate_limit_reset.hour, r.rate_limit_reset.minute) == (3, 30)


def test_synthetic_limit_record_in_transcript(tmp_path: Path) -> None:
    src = lay_out(tmp_path / "p", "rate_limited")
    text = src.read_text().replace(
        "API Error: Request rejected (429) \\u00b7 This request would exceed your organization's rate limit (mock).",
        "You've hit your limit \\u00b7 resets 5pm (UTC)",
    )
    text = text.replace(
        "API Error: Request rejected (429) · This request would exceed your organization's rate limit (mock).",
        "You've hit your limit · resets 5pm (UTC)",
    )
    src.write_text(text)
    r = mine_session(src)
    assert r.status == "rate_limited" and r.rate_limit_message == "You've hit your limit · resets 5pm (UTC)"
    # Relative to the synthetic record's own timestamp (01:35:42 UTC): 17:00 the same day.
    assert r.rate_limit_reset == datetime(2026, 11, 30, 17, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("You've hit your limit · resets 5pm (UTC)", datetime(2026, 11, 30, 17, 0, tzinfo=UTC)),
        ("You've hit your limit · resets 9am (UTC)", datetime(2026, 12, 1, 9, 0, tzinfo=UTC)),
        ("5-hour limit reached ∙ resets 10:15pm", datetime(2026, 11, 30, 22, 15, tzinfo=UTC)),
        ("You've hit your weekly limit · resets Dec 3, 8am (UTC)", datetime(2026, 12, 3, 8, 0, tzinfo=UTC)),
        ("You've hit your limit", None),
    ],
)
def test_parse_reset_time(text: str, expected: datetime | None) -> None:
    assert is_rate_limit_message(text)
    assert parse_reset_time(text, now=datetime(2026, 11, 30, 12, 0, tzinfo=UTC)) == expected


def test_ordinary_text_is_not_a_limit_message() -> None:
    assert not is_rate_limit_message("API Error: 500 Internal server error")


# -- pricing ----------------------------------------------------------------------------------------------


def test_pricing_table() -> None:
    assert estimate_cost("claude-sonnet-4-6", input_tokens=1500, output_tokens=12) == pytest.approx(0.00468)
    assert normalize_model("us.anthropic.claude-sonnet-4-5-20250929-v1:0") == "claude-sonnet-4-5"
    assert normalize_model("claude-opus-4-1-20250805[1m]") == "claude-opus-4-1"
    assert price_for("claude-opus-4-5-20251101") is not None and price_for("claude-opus-4-5").input == 5.0  # type: ignore[union-attr]
    assert price_for("claude-opus-4-20250514").output == 75.0  # type: ignore[union-attr]
    assert estimate_cost("claude-unknown-9", input_tokens=1, output_tokens=1) is None
    cached = estimate_cost(
        "claude-sonnet-4-6",
        input_tokens=0,
        output_tokens=0,
        cache_write_5m_tokens=1_000_000,
        cache_write_1h_tokens=1_000_000,
        cache_read_tokens=1_000_000,
    )
    assert cached == pytest.approx(3.75 + 6.0 + 0.30)


def test_fixture_copy_is_complete() -> None:
    shared = Path("/work/shared/claude-code/fixtures")
    if not shared.is_dir():
        pytest.skip("the shared fixture folder exists only on the build machine")
    for f in shared.iterdir():
        if f.is_file():
            assert (FIXTURES / f.name).read_bytes() == f.read_bytes(), f.name


def test_hooks_reported_in_system_records_count_as_fired(tmp_path: Path) -> None:
    """A silent Stop hook has no attachment; the CLI's stop_hook_summary still names it (probe and miner
    read these records through one module, ablate.mine.attachments)."""
    base = {"sessionId": "s", "timestamp": "2026-11-30T10:00:00Z", "cwd": "/w"}
    recs = [
        {**base, "type": "user", "message": {"role": "user", "content": "hi"}},
        {
            **base,
            "type": "attachment",
            "attachment": {"type": "hook_success", "hookName": "SessionStart", "command": "a.py"},
        },
        {
            **base,
            "type": "system",
            "subtype": "stop_hook_summary",
            "hookInfos": [{"command": "stop1.py"}, {"command": "stop2.py"}],
        },
    ]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    assert mine_session(path).hooks_fired == {"SessionStart": 1, "Stop": 2}

"""The simulated endpoint, driven by the official ``anthropic`` SDK as a client."""

from __future__ import annotations

import importlib.util
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from ablate.core.errors import UsageError
from ablate.sim import PortInUse, SimServer, iter_requests, script_from_data

if TYPE_CHECKING:
    import anthropic
else:  # loaded when first used: `import anthropic` (~1,500 pydantic models) took 2.2-2.6 CPU-s
    # here, paid by every pytest worker that collected this module
    _spec = importlib.util.find_spec("anthropic")
    _spec.loader = importlib.util.LazyLoader(_spec.loader)
    anthropic = sys.modules.setdefault("anthropic", importlib.util.module_from_spec(_spec))
    if anthropic.__spec__ is _spec:
        _spec.loader.exec_module(anthropic)

MODEL = "claude-sonnet-4-6"

SCRIPT = script_from_data(
    {
        "usage": {"input_tokens": 1200, "output_tokens": 80},
        "rules": [
            {
                "name": "read",
                "contains": "please read",
                "text": "Reading it.",
                "tool_use": [
                    {"name": "Read", "input": {"file_path": "/repo/app.py", "limit": 20}},
                    {
                        "name": "Bash",
                        "input": {"command": "echo 'hi there'", "nested": {"a": [1, 2, {"b": None}]}},
                    },
                ],
            },
            {"name": "limited", "contains": "rate me", "error": {"status": 429, "retry_after": 7}},
            {"name": "broken", "contains": "break", "error": {"status": 500}},
            {"name": "busy", "contains": "busy", "error": {"status": 529}},
            {"name": "too-long", "contains": "huge", "error": {"status": 400}},
            {"name": "flaky", "contains": "flaky", "times": 2, "error": {"status": 429}},
            {"name": "slow", "contains": "slowly", "text": "finally", "delay_s": 0.3, "chunk_delay_s": 0.02},
            {"name": "cached", "contains": "cache", "text": "c", "usage": {"cache_read_input_tokens": 900}},
        ],
    }
)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimServer]:
    with SimServer(SCRIPT, log_path=tmp_path / "requests.jsonl") as server:
        yield server


def client(sim: SimServer, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.base_url, api_key="sk-test", max_retries=0, **kw)


def ask(c: anthropic.Anthropic, text: str, *, stream: bool = False) -> anthropic.types.Message:
    """One user turn, answered as a whole message or accumulated from the event stream."""
    messages: list[anthropic.types.MessageParam] = [{"role": "user", "content": text}]
    if stream:
        with c.messages.stream(model=MODEL, max_tokens=100, messages=messages) as s:
            return s.get_final_message()
    return c.messages.create(model=MODEL, max_tokens=100, messages=messages)


def test_capture_mode_answers_with_short_text_and_logs_the_request(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with SimServer(log_path=log) as sim:
        msg = client(sim).messages.create(
            model=MODEL,
            max_tokens=100,
            system="SYSTEM-CANARY",
            messages=[{"role": "user", "content": "PROMPT-CANARY"}],
            tools=[{"name": "Read", "description": "TOOL-CANARY", "input_schema": {"type": "object"}}],
            extra_headers={"x-claude-code-session-id": "sess-1"},
        )
        assert msg.content[0].type == "text" and msg.content[0].text == "OK."
        assert msg.stop_reason == "end_turn" and msg.model == MODEL
        (req,) = sim.requests()
    assert [r.seq for r in iter_requests(log)] == [1]
    assert req.path == "/v1/messages" and req.is_messages and req.rule == "default" and req.status == 200
    assert req.session_id == "sess-1" and req.headers["x-claude-code-session-id"] == "sess-1"
    assert (
        req.turn == 0 and req.stream is False and req.auth == "bearer"
    )  # this SDK version sends the key as a bearer token
    assert "anthropic-version" in req.headers
    assert "sk-test" not in log.read_text()  # credentials are never logged
    for canary in ("SYSTEM-CANARY", "PROMPT-CANARY", "TOOL-CANARY"):
        assert canary in req.text


def test_streaming_events_and_tool_use_round_trip(sim: SimServer) -> None:
    c = client(sim)
    with c.messages.stream(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "please read"}]
    ) as s:
        events = [e.type for e in s]
        final = s.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [b.type for b in final.content] == ["text", "tool_use", "tool_use"]
    text, read, bash = final.content
    assert text.type == "text" and text.text == "Reading it."
    assert (
        read.type == "tool_use"
        and read.name == "Read"
        and read.input == {"file_path": "/repo/app.py", "limit": 20}
    )
    assert bash.type == "tool_use" and bash.input == {
        "command": "echo 'hi there'",
        "nested": {"a": [1, 2, {"b": None}]},
    }
    assert read.id != bash.id
    assert final.usage.input_tokens == 1200 and final.usage.output_tokens == 80
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "input_json" in events and "content_block_stop" in events and "message_delta" in events


def test_raw_sse_stream_is_shaped_like_the_real_api(sim: SimServer) -> None:
    payload = {
        "model": MODEL,
        "max_tokens": 10,
        "stream": True,
        "messages": [{"role": "user", "content": "please read"}],
    }
    req = urllib.request.Request(
        sim.base_url + "/v1/messages?beta=true",
        data=orjson.dumps(payload),
        headers={"content-type": "application/json", "anthropic-version": "2023-06-01"},
    )
    with urllib.request.urlopen(req) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.headers["request-id"].startswith("req_")
        raw = resp.read().decode()
    frames = [f for f in raw.split("\n\n") if f.strip()]
    names = [f.splitlines()[0].removeprefix("event: ") for f in frames]
    datas = [orjson.loads(f.splitlines()[1].removeprefix("data: ")) for f in frames]
    assert all(d["type"] == n for n, d in zip(names, datas, strict=True))
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    json_deltas = [
        d["delta"]["partial_json"] for d in datas if d.get("delta", {}).get("type") == "input_json_delta"
    ]
    assert len(json_deltas) >= 6  # two tool_use blocks, each split into several chunks
    assert datas[-2]["delta"]["stop_reason"] == "tool_use"


def test_count_tokens(sim: SimServer) -> None:
    small = client(sim).messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    big = client(sim).messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "word " * 2000}]
    )
    assert 1 <= small.input_tokens < big.input_tokens
    assert [r.rule for r in sim.requests()] == ["count_tokens", "count_tokens"]


def test_429_is_a_rate_limit_error_with_the_real_body_and_headers(sim: SimServer) -> None:
    with pytest.raises(anthropic.RateLimitError) as info:
        ask(client(sim), "rate me")
    exc = info.value
    assert exc.status_code == 429
    assert exc.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": exc.body["error"]["message"]},  # type: ignore[index]
    }
    assert exc.response.headers["retry-after"] == "7"
    assert exc.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert exc.response.headers["request-id"].startswith("req_")
    assert sim.requests()[-1].status == 429 and sim.requests()[-1].rule == "limited"


@pytest.mark.parametrize(
    ("prompt", "exc_type", "status", "error_type"),
    [
        ("break", "InternalServerError", 500, "api_error"),
        ("busy", "InternalServerError", 529, "overloaded_error"),
        ("huge", "BadRequestError", 400, "invalid_request_error"),
    ],
)
def test_error_rules(sim: SimServer, prompt: str, exc_type: str, status: int, error_type: str) -> None:
    with pytest.raises(getattr(anthropic, exc_type)) as info:
        ask(client(sim), prompt, stream=True)
    assert isinstance(info.value, anthropic.APIStatusError)
    assert info.value.status_code == status
    assert info.value.body["error"]["type"] == error_type  # type: ignore[index]
    if status == 400:
        assert "prompt is too long" in info.value.body["error"]["message"]  # type: ignore[index]


def test_times_fails_first_n_then_passes_and_sdk_retries_recover(sim: SimServer) -> None:
    c = client(sim)
    for _ in range(2):
        with pytest.raises(anthropic.RateLimitError):
            ask(c, "flaky")
    assert ask(c, "flaky").content[0].type == "text"
    # With retries (and retry-after: 0), the SDK recovers by itself; a new session gets the failures again.
    retrying = client(sim).with_options(max_retries=2)
    msg = retrying.messages.create(
        model=MODEL,
        max_tokens=10,
        messages=[{"role": "user", "content": "flaky"}],
        extra_headers={"x-claude-code-session-id": "fresh"},
    )
    assert msg.content[0].type == "text"
    assert [r.status for r in sim.requests() if r.session_id == "fresh"] == [429, 429, 200]


def test_probability_is_deterministic_per_seed_and_differs_across_seeds(tmp_path: Path) -> None:
    script = script_from_data({"rules": [{"name": "coin", "probability": 0.5, "text": "heads"}]})
    prompts = [f"task number {i}" for i in range(40)]

    def outcomes(seed: int) -> list[str]:
        with SimServer(script, seed=seed) as sim:
            c = client(sim)
            return [ask(c, p).content[0].text for p in prompts]  # type: ignore[union-attr]

    first, again, other = outcomes(0), outcomes(0), outcomes(1)
    assert first == again
    assert first != other
    assert 8 <= first.count("heads") <= 32


def test_slow_answers_are_slow(sim: SimServer) -> None:
    start = time.monotonic()
    with client(sim).messages.stream(
        model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "slowly"}]
    ) as s:
        assert s.get_final_message().content[0].text == "finally"  # type: ignore[union-attr]
    assert time.monotonic() - start >= 0.3 + 5 * 0.02


def test_usage_with_cache_tokens(sim: SimServer) -> None:
    msg = ask(client(sim), "cache me")
    assert msg.usage.cache_read_input_tokens == 900 and msg.usage.input_tokens == 1200


def test_other_paths_get_a_404_json_error_and_hello_is_ok(sim: SimServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(sim.base_url + "/v1/models")
    assert info.value.code == 404
    body = orjson.loads(info.value.read())
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    head = urllib.request.Request(sim.base_url + "/api/hello", method="HEAD")
    with urllib.request.urlopen(head) as resp:
        assert resp.status == 200
    assert [(r.method, r.path, r.rule) for r in sim.requests()] == [
        ("GET", "/v1/models", "not_found"),
        ("HEAD", "/api/hello", "hello"),
    ]


def test_invalid_json_body_is_a_400(sim: SimServer) -> None:
    req = urllib.request.Request(sim.base_url + "/v1/messages", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req)
    assert info.value.code == 400
    assert orjson.loads(info.value.read())["error"]["type"] == "invalid_request_error"


def test_concurrent_requests_each_get_one_log_line(sim: SimServer) -> None:
    c = client(sim)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            ask(c, f"parallel {i}", stream=i % 2 == 0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(r.seq for r in sim.requests()) == list(range(1, 17))
    assert sim.errors == []
    assert sorted(r.body["messages"][0]["content"] for r in sim.requests()) == sorted(
        f"parallel {i}" for i in range(16)
    )


def test_port_zero_picks_a_free_port_and_a_busy_port_is_a_usage_error() -> None:
    with SimServer() as first:
        assert first.port > 0 and first.base_url == f"http://127.0.0.1:{first.port}"
        with pytest.raises(PortInUse) as info:
            SimServer(port=first.port).start()
        assert isinstance(info.value, UsageError)
        assert str(first.port) in str(info.value)


def _non_loopback_address() -> str | None:
    """This host's address on its default route (a UDP connect sends nothing), or None."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))
        addr = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


def test_binds_loopback_only() -> None:
    with SimServer() as sim:
        assert sim.base_url.startswith("http://127.0.0.1:")
        other = _non_loopback_address()
        if other is None:
            pytest.skip("no non-loopback address to check")
        with pytest.raises(OSError):
            socket.create_connection((other, sim.port), timeout=1).close()


def test_log_appends_across_servers_with_increasing_seq(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    for _ in range(2):
        with SimServer(log_path=log) as sim:
            ask(client(sim), "hi")
    assert [r.seq for r in iter_requests(log)] == [1, 2]


def test_script_path_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[rules]]\nname = "hi"\ncontains = ["hello"]\ntext = "Hi ${model}!"\n')
    with SimServer(path) as sim:
        assert ask(client(sim), "hello").content[0].text == f"Hi {MODEL}!"  # type: ignore[union-attr]

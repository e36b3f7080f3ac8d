"""The cost estimate rests on what was measured, and says which basis it has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.folder.result import ItemResult
from ablate.run.estimate import CHARS_PER_TOKEN, estimate_run, probe_capture

HEAD = "0123456789abcdef0123456789abcdef01234567"
MODEL = "claude-sonnet-4-6"


def _result(i: int, cost: float, calls: int) -> ItemResult:
    return ItemResult.model_validate(
        {
            "item": f"t__C0__r{i:02d}",
            "task": "t",
            "cell": "C0",
            "repeat": i,
            "order": i,
            "attempt": 1,
            "session_id": f"s{i}",
            "status": "completed",
            "complete": True,
            "cost_usd": cost,
            "session": {
                "transcript": f"transcripts/s{i}.jsonl",
                "status": "completed",
                "total": {"api_calls": calls},
            },
        }
    )


def _capture(path: Path, bodies: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        for seq, body in enumerate(bodies):
            rec = {"seq": seq, "method": "POST", "path": "/v1/messages", "body": body}
            fh.write(orjson.dumps(rec) + b"\n")


def _body(text: str) -> dict[str, Any]:
    return {"system": [{"type": "text", "text": text}], "messages": [{"role": "user", "content": "hi"}]}


def test_nothing_measured_is_said_to_be_assumed() -> None:
    est = estimate_run(10, model=MODEL, max_turns=30)
    assert est.basis == "assumed" and "assumed" in est.detail and est.calls == 60
    assert est.usd is not None and est.usd > 0
    assert estimate_run(1, model="mystery", max_turns=5).usd is None


def test_finished_sessions_give_the_figure_and_the_calls() -> None:
    done = [_result(0, 0.10, 4), _result(1, 0.30, 8)]
    est = estimate_run(10, model=MODEL, max_turns=30, done=done)
    assert est.basis == "sessions"
    assert est.usd == pytest.approx(2.0) and est.calls == 60
    assert "2 sessions already run" in est.detail and "6.0 API calls" in est.detail


def test_a_probe_of_the_same_setup_measures_the_request_size(tmp_path: Path) -> None:
    prompt = "x" * 84_000 + f" Recent commits:\n{HEAD[:7]} work"
    _capture(tmp_path / "work" / "requests.jsonl", [_body(prompt), _body("baseline, another repo")])
    seen = probe_capture([None, tmp_path / "run", tmp_path / "work"], HEAD)
    assert seen is not None and len(seen[1]) == 1
    est = estimate_run(10, model=MODEL, max_turns=30, probe=seen)
    assert est.basis == "probe" and "probe" in est.detail
    tokens = round(seen[1][0] / CHARS_PER_TOKEN)
    assert f"~{tokens:,} input tokens" in est.detail
    # cached calls cost less than the no-cache upper end made of the same number of calls
    assert est.usd is not None and est.usd < (estimate_run(10, model=MODEL, max_turns=30).usd or 0)
    # a capture of another setup (another commit) is not a measurement of this one
    assert probe_capture([tmp_path / "work"], "f" * 40) is None
    # finished sessions outrank the probe
    done = [_result(0, 0.2, 5)]
    assert estimate_run(3, model=MODEL, max_turns=30, done=done, probe=seen).basis == "sessions"

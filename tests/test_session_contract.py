"""The miner's light types (mine/model.py, plain dataclasses: ``ablate mine`` loads no pydantic) against the run
folder's contract (folder/session.py): field for field, so neither can gain a field the other lacks."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

from ablate.folder.session import SessionMetrics, ThreadSummary
from ablate.mine.model import SessionResult, SkillCall, ThreadMetrics, Usage


def _filled(seed: int) -> ThreadMetrics:
    """A thread group with every field set (distinct per seed)."""
    t = ThreadMetrics()
    for i, f in enumerate(fields(ThreadMetrics)):
        value = getattr(t, f.name)
        if isinstance(value, int):
            setattr(t, f.name, seed * 100 + i)
        elif f.name == "model_usage":
            t.model_usage = {"m": Usage(seed, 2 * seed, 0, 1, 0)}
        elif isinstance(value, dict):
            setattr(t, f.name, {f"k{seed}": i, "shared": 1})
        elif isinstance(value, list):
            t.skills_invoked = [SkillCall(f"s{seed}", "ok")]
        else:
            t.duration_s = float(seed)
    return t


def test_a_thread_summary_has_exactly_the_contracts_fields_in_order() -> None:
    assert list(_filled(1)._fields()) == list(ThreadSummary.model_fields)
    summary = _filled(1).summary()
    assert summary.model_dump(mode="json") == _filled(1)._fields()


def test_merging_thread_groups_covers_every_field() -> None:
    a, b = _filled(1), _filled(2)
    m = a.merged(b)
    for f in fields(ThreadMetrics):
        x, y, got = getattr(a, f.name), getattr(b, f.name), getattr(m, f.name)
        if f.name == "duration_s":
            assert got == 2.0
        elif f.name == "model_usage":
            assert got == {"m": Usage(3, 6, 0, 2, 0)}
        elif isinstance(x, int):
            assert got == x + y, f.name
        elif isinstance(x, dict):
            assert got == {"k1": x["k1"], "shared": 2, "k2": y["k2"]}, f.name
        else:
            assert got == [*x, *y], f.name
    assert (
        a.merged(ThreadMetrics()).duration_s == 1.0
        and ThreadMetrics().merged(ThreadMetrics()).duration_s is None
    )


def test_the_mined_session_has_exactly_the_contracts_fields_in_order_and_round_trips() -> None:
    r = SessionResult(
        transcript=Path("/t/s.jsonl"),
        session_id="s",
        status="rate_limited",
        main=_filled(1),
        subagents=_filled(2),
        total=_filled(1).merged(_filled(2)),
        api_error_status=429,
        rate_limit_reset=datetime(2026, 1, 1, tzinfo=UTC),
        turns=3,
        turns_source="rule",
        cost_source="estimated",
        cost_usd=0.5,
        instruction_files=[{"path": "/h/CLAUDE.md", "type": "User"}],
        agents=[{"agentType": "x"}],
        reconciliation={"turns": {"cli": 2, "transcript": 3}},
    )
    out = r.to_json()
    assert list(out) == list(SessionMetrics.model_fields)
    assert r.to_metrics().model_dump(mode="json") == out
    assert out["estimated_fields"] == ["cost_usd", "turns"] and out["retries"] == r.total.retry_records

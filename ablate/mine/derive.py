"""Mining a session (docs/ARCHITECTURE.md#mining): the main thread ``<session_id>.jsonl`` plus its sub-agents'
``<session_id>/subagents/agent-*.jsonl`` into a :class:`SessionResult` (:func:`mine_session`). Reading is
:mod:`ablate.mine.parse`'s job; this module derives the status, turns, cost and duration and reconciles them
with the CLI's stdout."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ablate.core.pricing import estimate_cost
from ablate.mine.cli_output import CliOutput, is_rate_limit_message, parse_cli_output, parse_reset_time
from ablate.mine.model import SessionResult, ThreadMetrics
from ablate.mine.parse import _Session, _stream, _Thread

if TYPE_CHECKING:  # the task model pulls in pydantic: the miner never needs it at run time
    from ablate.setup.tasks import PitfallPattern


def subagent_files(transcript: Path) -> list[Path]:
    """The sub-agent transcripts of a session: ``<stem>/subagents/agent-*.jsonl`` next to it, sorted."""
    folder = os.path.splitext(transcript)[0] + "/subagents"  # not Path.with_suffix: this runs per session
    try:
        with os.scandir(folder) as entries:
            return sorted(
                Path(e.path)
                for e in entries
                if e.name.startswith("agent-") and e.name.endswith(".jsonl") and e.is_file()
            )
    except OSError:  # no sub-agents (the usual case), or an unreadable folder
        return []


def _agent_meta(sub: Path) -> dict[str, Any]:
    meta: dict[str, Any] = {"agent_id": sub.stem.removeprefix("agent-")}
    try:
        raw = orjson.loads(sub.with_suffix(".meta.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return meta
    if isinstance(raw, dict):
        keys = (("agentType", "type"), ("requestShape", "request_shape"), ("finished", "finished"))
        meta |= {dst: raw[src] for src, dst in keys if src in raw}
    return meta


def mine_session(
    transcript: Path,
    *,
    stdout: Path | None = None,
    pitfalls: Sequence[PitfallPattern] = (),
    cwd: Path | None = None,
) -> SessionResult:
    """Mine one session: ``transcript`` plus its ``<stem>/subagents/agent-*.jsonl``, and ``stdout`` if given.
    ``cwd`` overrides the session's own for making read paths relative; a missing or empty transcript gives
    ``no_transcript``. An unreadable file raises ``OSError``, an invalid pitfall regex ``re.error``."""
    compiled = [(p, re.compile(p.pattern, re.IGNORECASE)) for p in pitfalls]
    base = str(cwd) if cwd is not None else None
    main, side, sess = _Thread(compiled, base), _Thread(compiled, base), _Session()
    cli = parse_cli_output(stdout) if stdout is not None else None
    agents: list[dict[str, Any]] = []
    # an empty file is no evidence of a session (it was created, then nothing was written): no transcript
    try:
        st = os.stat(transcript)
        exists = stat.S_ISREG(st.st_mode) and st.st_size > 0
    except OSError:
        exists = False
    if exists:
        _stream(transcript, main, side, sess, is_main_file=True)
        for sub in subagent_files(transcript):
            _stream(sub, main, side, sess, is_main_file=False)
            agents.append(_agent_meta(sub))
    m_main, m_side = main.finish(), side.finish()
    # Pitfall hits of the sub-agent thread need the same ids in total.
    res = SessionResult(
        transcript=transcript,
        session_id=sess.session_id or (transcript.stem if exists else None),
        status="no_transcript",
        main=m_main,
        subagents=m_side,
        total=m_main.merged(m_side),
        cwd=sess.cwd,
        claude_version=sess.version,
        instruction_files=[{"path": p, "type": t} for p, t in sess.instruction_files.items()],
        skills_listed=list(sess.skills_listed),
        hooks_fired=dict(sess.hooks_fired),
        agents=agents,
        malformed_lines=sess.malformed,
        truncated_lines=sess.truncated,
        unknown_record_types=dict(sess.unknown_types),
        prompts=sess.prompts,
        stdout_kind=cli.kind if cli is not None else None,
    )
    res.models = sorted(m for m in res.total.model_usage if m != "unknown")
    res.pitfall_hits = {p.id: res.total.pitfall_hits.get(p.id, 0) for p in pitfalls}
    if cli is not None and res.session_id is None:
        doc = cli.for_session(None)
        res.session_id = doc.get("session_id") if doc else None
    doc = cli.for_session(res.session_id) if cli is not None else None
    if exists:
        # Without a transcript the run is not evidence, whatever the CLI printed (docs/CLAUDE-CODE.md#invalid-config-dir: an invalid
        # config dir exits 0 with a normal result and writes no transcript).
        _status_from_transcript(res, sess)
        _apply_cli(res, cli, doc)
    _turns(res, sess, doc)
    _cost(res, sess, doc)
    _duration(res, sess, doc)
    return res


def _status_from_transcript(res: SessionResult, sess: _Session) -> None:
    ev = sess.last_event
    if ev == "final":
        res.status = "completed"
    elif ev == "max_turns":
        res.status = "max_turns"
    elif ev == "error" and sess.last_error is not None:
        err = sess.last_error
        status = err.get("status")
        res.api_error_status = status if isinstance(status, int) and not isinstance(status, bool) else None
        text = err.get("text") or ""
        if is_rate_limit_message(text) or err.get("error") == "rate_limit" or res.api_error_status == 429:
            res.status = "rate_limited"
            _set_limit(res, text, err.get("timestamp"))
        elif "prompt is too long" in text.lower():
            res.status = "prompt_too_long"
        else:
            res.status = "api_error"
    else:
        # Ends mid-turn (a pending tool call, retries in progress) or has no answer at all.
        res.status = "killed"


def _set_limit(res: SessionResult, text: str, when: Any) -> None:
    if not is_rate_limit_message(text):
        return
    res.rate_limit_message = text
    now = None
    if isinstance(when, str):
        try:
            now = datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            now = None
    res.rate_limit_reset = parse_reset_time(text, now=now)


def _apply_cli(res: SessionResult, cli: CliOutput | None, doc: dict[str, Any] | None) -> None:
    if cli is not None and cli.kind == "rate_limit_stub":
        res.status = "rate_limited"
        res.rate_limit_message = cli.rate_limit_message
        res.rate_limit_reset = cli.rate_limit_reset
        return
    if doc is None or cli is None or cli.kind != "valid":
        return
    reason = doc.get("terminal_reason")
    status = doc.get("api_error_status")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    text = doc.get("result") if isinstance(doc.get("result"), str) else ""
    assert isinstance(text, str)
    if reason == "max_turns" or doc.get("subtype") == "error_max_turns":
        res.status = "max_turns"
    elif reason == "prompt_too_long":
        res.status, res.api_error_status = "prompt_too_long", status
    elif reason == "api_error" or (doc.get("is_error") is True and status is not None):
        res.api_error_status = status
        if status == 429 or is_rate_limit_message(text):
            res.status = "rate_limited"
            _set_limit(res, text, None)
        else:
            res.status = "api_error"
    elif reason == "completed" and doc.get("is_error") is not True:
        res.status = "completed"
    elif doc.get("is_error") is True and is_rate_limit_message(text):
        res.status = "rate_limited"
        _set_limit(res, text, None)


def _num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


def _turns(res: SessionResult, sess: _Session, doc: dict[str, Any] | None) -> None:
    if sess.turns_by_prompt:
        res.turns_last_prompt = sess.turns_by_prompt[-1]
    rule_total = sum(sess.turns_by_prompt) if sess.turns_by_prompt else None
    cli_turns = doc.get("num_turns") if doc else None
    if isinstance(cli_turns, int) and not isinstance(cli_turns, bool):
        res.num_turns_cli = cli_turns
    # The CLI's figure covers only the last prompt of the session (a background agent's task-notification
    # starts a second result, docs/CLAUDE-CODE.md#subagents): use it only when the session had a single prompt.
    result_index = doc.get("result_index") if doc else None
    covers_all = sess.prompts <= 1 and not (isinstance(result_index, int) and result_index > 0)
    if res.num_turns_cli is not None and covers_all:
        res.turns, res.turns_source = res.num_turns_cli, "cli"
    elif rule_total is not None:
        res.turns, res.turns_source = rule_total, "rule"
    if res.num_turns_cli is not None and res.turns_last_prompt is not None:
        res.reconciliation["turns"] = {
            "transcript": res.turns_last_prompt,
            "cli": res.num_turns_cli,
            "difference": res.turns_last_prompt - res.num_turns_cli,
            "note": "calibrated rule over the last prompt vs the CLI's num_turns",
        }


def _estimate(total: ThreadMetrics) -> tuple[float | None, list[str]]:
    cost, unknown = 0.0, []
    for model, u in total.model_usage.items():
        if not (u.input_tokens or u.output_tokens or u.cache_creation_tokens or u.cache_read_tokens):
            continue
        c = estimate_cost(
            model,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_write_5m_tokens=u.cache_creation_tokens - u.cache_write_1h_tokens,
            cache_write_1h_tokens=u.cache_write_1h_tokens,
            cache_read_tokens=u.cache_read_tokens,
        )
        if c is None:
            unknown.append(model)
        else:
            cost += c
    return (None if unknown else cost), sorted(unknown)


def _cost(res: SessionResult, sess: _Session, doc: dict[str, Any] | None) -> None:
    estimate, unknown = _estimate(res.total)
    state_cost = _num(sess.cost_state.get("totalCostUSD")) if sess.cost_state else None
    cli_cost = _num(doc.get("total_cost_usd")) if doc else None
    if state_cost is not None:
        res.cost_usd, res.cost_source = state_cost, "cost-state"
    elif cli_cost is not None:
        res.cost_usd, res.cost_source = cli_cost, "cli"
    elif res.total.api_calls or estimate:
        res.cost_usd, res.cost_source, res.unknown_models = estimate, "estimated", unknown
    if state_cost is not None and cli_cost is not None:
        res.reconciliation["cost_usd"] = {
            "transcript": state_cost,
            "cli": cli_cost,
            "difference": round(state_cost - cli_cost, 9) + 0.0,
        }
    if estimate is not None and res.cost_source in ("cost-state", "cli") and res.cost_usd is not None:
        res.reconciliation["cost_estimate"] = {
            "estimate": round(estimate, 9),
            res.cost_source: res.cost_usd,
            "difference": round(estimate - res.cost_usd, 9) + 0.0,
        }


def _duration(res: SessionResult, sess: _Session, doc: dict[str, Any] | None) -> None:
    cli_ms = _num(doc.get("duration_ms")) if doc else None
    state_ms = _num(sess.cost_state.get("totalDuration")) if sess.cost_state else None
    if cli_ms is not None and (res.prompts <= 1):
        res.duration_s, res.duration_source = cli_ms / 1000, "cli"
    elif state_ms is not None:
        res.duration_s, res.duration_source = state_ms / 1000, "cost-state"
    elif res.total.duration_s is not None:
        res.duration_s, res.duration_source = res.total.duration_s, "timestamps"

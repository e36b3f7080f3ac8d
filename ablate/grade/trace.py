"""What a session did, as the session-reading checks see it: its final answer (the CLI's ``result``) and its
main thread's tool calls, in order (a call recorded twice, by its ``tool_use`` id, counts once)."""

from __future__ import annotations

import json
from pathlib import Path

from ablate.checks.base import SessionTrace, ToolCall
from ablate.mine.cli_output import parse_cli_output
from ablate.mine.parse import main_thread_records


def read_transcript(path: Path) -> SessionTrace:
    """Tool calls and last assistant text of the main thread of a transcript."""
    trace = SessionTrace()
    seen: set[str] = set()
    try:
        for rec in main_thread_records(path):
            if rec.get("type") != "assistant":
                continue
            content = (rec.get("message") or {}).get("content")
            texts = []
            for b in content if isinstance(content, list) else []:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "text" and b.get("text"):
                    texts.append(str(b["text"]))
                elif b.get("type") == "tool_use" and isinstance(b.get("name"), str):
                    tid = str(b.get("id", ""))
                    if tid and tid in seen:
                        continue
                    seen.add(tid)
                    text = json.dumps(b.get("input"), ensure_ascii=False, separators=(",", ":"))
                    trace.tool_calls.append(ToolCall(b["name"], text))
            if texts:
                trace.last_message = "\n".join(texts)
    except OSError:
        return SessionTrace()
    trace.transcript_read = True
    return trace


def read_trace(stdout: Path | None, transcript: Path | None, session_id: str | None = None) -> SessionTrace:
    """Tool calls from the transcript; the final answer from the CLI's ``result``, else the transcript."""
    trace = read_transcript(transcript) if transcript is not None else SessionTrace()
    if stdout is not None and stdout.is_file():
        doc = parse_cli_output(stdout).for_session(session_id)
        if doc is not None and isinstance(doc.get("result"), str) and doc["result"].strip():
            trace.last_message = doc["result"]
    return trace

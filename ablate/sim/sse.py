"""Encoding a message as the Messages API's server-sent event stream, event by event as the real API does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

#: How many ``input_json_delta`` chunks a tool input is split into (the real API sends a few small ones).
JSON_CHUNKS = 3
#: Text longer than this is sent in several ``text_delta`` events.
TEXT_CHUNK = 24


def event(name: str, **data: Any) -> bytes:
    """One SSE event: an ``event:`` line, a ``data:`` line with compact JSON (``type`` first), a blank line."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **data}) + b"\n\n"


def _split(text: str, parts: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def message_events(message: dict[str, Any]) -> Iterator[bytes]:
    """The full event stream of ``message``: message_start, one start/delta…/stop per block, delta, stop."""
    usage = message["usage"]
    counts = {k: usage[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")}
    start = dict(message, content=[], stop_reason=None, stop_sequence=None)
    start["usage"] = {**counts, "output_tokens": 1, "service_tier": usage.get("service_tier", "standard")}
    yield event("message_start", message=start)
    yield event("ping")
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": piece}
                for piece in _split(block["text"], max(1, -(-len(block["text"]) // TEXT_CHUNK)))
            ]
        elif block["type"] == "tool_use":
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in ["", *_split(orjson.dumps(block["input"]).decode(), JSON_CHUNKS)]
            ]
        else:  # pragma: no cover - the engine only builds text and tool_use blocks
            raise ValueError(f"cannot stream a {block['type']!r} block")
        yield event("content_block_start", index=index, content_block=opened)
        for delta in deltas:
            yield event("content_block_delta", index=index, delta=delta)
        yield event("content_block_stop", index=index)
    yield event(
        "message_delta",
        delta={"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
        usage={**counts, "output_tokens": usage["output_tokens"]},
    )
    yield event("message_stop")

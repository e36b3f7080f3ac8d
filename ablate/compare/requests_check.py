"""The api/sim executors' check of their own requests: within each (task, repeat) block the recorded bodies of
all arms are byte-identical except the ``system`` value, and each ``system`` is exactly its arm's file."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any


def _split_system(body: str) -> tuple[str, Any, str] | None:
    """``(before, system value, after)`` of a JSON body; None unless it has exactly one top-level ``"system"``."""
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or "system" not in doc:
        return None
    hits = [m.end() for m in re.finditer(r'"system"\s*:\s*', body)]
    if len(hits) != 1:
        return None
    value, end = json.JSONDecoder().raw_decode(body, hits[0])
    if value != doc["system"]:
        return None
    return body[: hits[0]], value, body[end:]


def check_requests(records: Sequence[dict[str, Any]], arm_text: dict[str, str]) -> dict[str, Any]:
    """The module's check over the recorded request bodies, as compare.json's ``request_check``."""
    blocks: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in records:
        blocks.setdefault((r["task"], r["repeat"]), []).append(r)
    mismatched: list[str] = []
    wrong_system: list[str] = []
    unparsed: list[str] = []
    for recs in blocks.values():
        rest: set[tuple[str, str]] = set()
        for r in recs:
            parts = _split_system(r["body"])
            if parts is None:
                unparsed.append(r["item"])
                continue
            before, system, after = parts
            if system != arm_text.get(r["arm"]):
                wrong_system.append(r["item"])
            rest.add((before, after))
        if len(rest) > 1:
            mismatched.extend(r["item"] for r in recs)
    verified = bool(records) and not (mismatched or wrong_system or unparsed)
    return {
        "verified": verified,
        "method": "recorded request bodies; per (task, repeat) block the bytes before and after the "
        "top-level system value are compared across arms",
        "blocks": len(blocks),
        "requests": len(records),
        "differ_beyond_system": sorted(mismatched),
        "system_not_the_arm": sorted(wrong_system),
        "unparsed": sorted(unparsed),
    }

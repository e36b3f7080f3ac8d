"""From usage to a run: the facts worth saying, the cells worth running, and real prompts as task candidates."""

from __future__ import annotations

from typing import Any

from ablate.mine.usage import UsageResult


def _top_use(row: dict[str, Any]) -> str:
    if not row["uses"]:
        return ""
    u = row["uses"][0]
    return f"{u['what']} ({u['kind']} x{u['count']})"


def key_facts(doc: dict[str, Any], limit: int = 3) -> list[str]:
    """The most useful things the history says, at most ``limit``: the best of each kind first (a loaded
    layer nothing uses, a skill rarely invoked where it was offered, the most used layer, a no-op layer),
    then the next best of any kind."""
    n = doc["sessions"]["count"]
    if not n:
        return []
    kinds: dict[str, list[tuple[float, str]]] = {"unused": [], "skill": [], "used": [], "no_op": []}
    for nu in doc["never_used"]:
        loaded = nu["loaded_sessions"]
        if nu["no_op"]:
            kinds["no_op"].append(
                (0.0, f"{nu['id']}: on disk, never loaded in {n} sessions — its cell would be a no-op")
            )
        elif loaded:
            msg = (
                f"{nu['id']}: loaded in {loaded} of {n} sessions, never the subject of a read or a reference"
            )
            kinds["unused"].append((loaded / n, msg))
        else:
            kinds["unused"].append((0.0, f"{nu['id']}: on disk, never read in {n} sessions"))
    for s in doc["skills"]:
        listed = s["listed_sessions"]
        if listed and s["invoked_sessions"] < listed:
            msg = f"skill {s['name']}: invoked in {s['invoked_sessions']} of the {listed} sessions it was listed in"
            kinds["skill"].append((1 - s["invoked_sessions"] / listed, msg))
    for r in doc["layers"]:
        if r["used_sessions"]:
            msg = f"{r['id']}: used in {r['used_sessions']} of {n} sessions, most often {_top_use(r)}"
            kinds["used"].append((r["used_sessions"] / n, msg))
    ranked = {k: [m for _s, m in sorted(v, key=lambda x: -x[0])] for k, v in kinds.items()}
    out = [v[0] for v in ranked.values() if v][:limit]
    rest = [m for v in ranked.values() for m in v[1:]]
    return out + rest[: limit - len(out)]


def suggest(result: UsageResult, *, per_layer: int = 5, top_layers: int = 3) -> dict[str, Any]:
    """The cell set worth running (layers loaded and used first; never-loaded layers left out as no-ops)
    and, for the most used layers, the sessions whose first prompts are task candidates."""
    doc = result.doc
    present = [r for r in doc["layers"] if r["on_disk"]]
    worth = sorted(
        (r for r in present if r["used_sessions"] or r["loaded_sessions"]),
        key=lambda r: (-r["used_sessions"], -(r["loaded_sessions"] or 0), r["id"]),
    )
    cells = [
        {"strip": r["id"], "used_sessions": r["used_sessions"], "loaded_sessions": r["loaded_sessions"],
         "why": "used" if r["used_sessions"] else "loaded, never used: does it earn its tokens?", "loads": r["loads"]}
        for r in worth
    ]  # fmt: skip
    left_out = [
        {"layer": r["id"], "why": "on disk, never loaded nor used in the window: a no-op cell"}
        for r in present
        if r not in worth
    ]
    tasks: list[dict[str, Any]] = []
    for r in [r for r in worth if r["used_sessions"]][:top_layers]:
        picked = [s for s in result.sessions if r["id"] in s["layers_used"] and s["first_prompt"]]
        tasks += [
            {"layer": r["id"], "session_id": s["session_id"], "date": (s["started"] or "")[:10] or None,
             "first_prompt": s["first_prompt"]}
            for s in sorted(picked, key=lambda s: s["started"] or "", reverse=True)[:per_layer]
        ]  # fmt: skip
    return {"cells": cells, "left_out": left_out, "tasks": tasks}

"""Helpers shared by the mining tests: the real fixtures laid out as Claude Code writes them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson

FIXTURES = Path(__file__).resolve().parent / "data" / "fixtures"
OLD_FORMAT = FIXTURES / "old_format"
OLD_SESSION = OLD_FORMAT / "11111111-2222-3333-4444-555555555555.jsonl"
EXPECTED: dict[str, dict[str, Any]] = {
    k: v for k, v in orjson.loads((FIXTURES / "expected_metrics.json").read_bytes()).items() if k != "_doc"
}
NAMES = sorted(EXPECTED)


def lay_out(dest: Path, name: str) -> Path:
    """Copy fixture ``name`` to ``dest/<name>.jsonl`` with its sub-agents in ``dest/<name>/subagents/``
    (the real ``projects/<slug>/`` layout; the fixture folder flattens it) and return the transcript path."""
    dest.mkdir(parents=True, exist_ok=True)
    transcript = dest / f"{name}.jsonl"
    shutil.copyfile(FIXTURES / f"{name}.jsonl", transcript)
    for sub in FIXTURES.glob(f"{name}.subagents_agent-*"):
        target = dest / name / "subagents" / sub.name.removeprefix(f"{name}.subagents_")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sub, target)
    return transcript


def stdout_of(name: str) -> Path:
    return FIXTURES / f"{name}.output.json"


def relative(paths: list[str], name: str) -> list[str]:
    """The expected file paths, relative to the fixture's cwd as the miner reports them."""
    base = f"/srv/fx/{name}/demo-app/"
    return [p.removeprefix(base) for p in paths]

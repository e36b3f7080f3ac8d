"""core.jsonl: the one JSON Lines reader (compare's ledger, the sim's request log)."""

from __future__ import annotations

from pathlib import Path

from ablate.core.jsonl import json_lines


def test_values_in_order_blank_lines_passed_over_bad_lines_as_none(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n\n  \n[2]\nnot json\n"s"\n{"torn": ')
    assert list(json_lines(path)) == [{"a": 1}, [2], None, "s", None]

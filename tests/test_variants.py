"""Variant content: blocks chosen by heading or marker, moved or duplicated at the end, fingerprinted."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.core.errors import SpecError, UsageError
from ablate.core.fsutil import sha256_bytes
from ablate.setup.variants import Selector, Variant, find_block, transform

DOC = """# Guide

Intro line.

## Tools

- RULE-UV: use uv, never pip.

### Detail

Sub-section of Tools.

## Style

Short sentences.
"""


def test_heading_block_runs_to_the_next_heading_of_same_or_higher_level() -> None:
    lines = DOC.splitlines(keepends=True)
    start, end = find_block(DOC, Selector.parse("## Tools"))
    assert lines[start] == "## Tools\n"
    assert lines[end] == "## Style\n"
    assert "Sub-section of Tools.\n" in lines[start:end]


def test_move_puts_the_block_at_the_end_and_keeps_everything_else() -> None:
    moved = transform(DOC, "move", Selector.parse("Tools"))
    assert moved == (
        "# Guide\n\nIntro line.\n\n## Style\n\nShort sentences.\n\n"
        "## Tools\n\n- RULE-UV: use uv, never pip.\n\n### Detail\n\nSub-section of Tools.\n"
    )
    assert moved.count("RULE-UV") == 1


def test_duplicate_appends_a_copy_and_leaves_the_original_in_place() -> None:
    dup = transform(DOC, "duplicate", Selector.parse("Tools"))
    assert dup.startswith(DOC.rstrip("\n"))
    assert dup.count("RULE-UV") == 2
    assert dup.rstrip("\n").endswith("Sub-section of Tools.")


def test_marker_span_includes_both_marker_lines() -> None:
    text = "a\n<!-- rule -->\nRULE-X\n<!-- /rule -->\nb\n"
    assert transform(text, "move", Selector.parse("marker:rule")) == (
        "a\nb\n\n<!-- rule -->\nRULE-X\n<!-- /rule -->\n"
    )


def test_headings_inside_fenced_code_are_not_blocks() -> None:
    text = "# Top\n\n```md\n## Tools\n```\n\n## Tools\nreal\n"
    start, _ = find_block(text, Selector.parse("Tools"))
    assert text.splitlines()[start] == "## Tools"
    assert start == 6


def test_missing_and_ambiguous_blocks_are_located_errors() -> None:
    with pytest.raises(SpecError) as missing:
        find_block(DOC, Selector.parse("Nope"), source="v.md")
    assert "v.md: block Nope: no heading 'Nope'" in str(missing.value)
    assert "'Tools'" in str(missing.value)
    twice = "## A\nx\n## A\ny\n"
    with pytest.raises(SpecError, match="occurs 2 times"):
        find_block(twice, Selector.parse("A"))
    with pytest.raises(SpecError, match="no <!-- /r --> line"):
        find_block("<!-- r -->\nx\n", Selector.parse("marker:r"))
    with pytest.raises(UsageError):
        Selector.parse("marker:bad name")


def test_render_fingerprints_the_bytes_the_cell_will_hold(tmp_path: Path) -> None:
    src = tmp_path / "CLAUDE.md"
    src.write_text(DOC)
    orig = Variant(src).render()
    moved = Variant(src, "move", Selector.parse("Tools")).render()
    assert orig.data == DOC.encode()
    assert orig.fingerprint == sha256_bytes(DOC.encode())
    assert moved.fingerprint == sha256_bytes(moved.data) != orig.fingerprint
    assert moved.source_sha256 == orig.fingerprint
    assert not moved.source_changed()
    src.write_text(DOC + "edited\n")
    assert moved.source_changed()

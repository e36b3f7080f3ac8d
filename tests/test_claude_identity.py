"""The CLI's identity (version, sha256) is remembered by the binary's stat, in this process and in ablate's
cache folder: a command no longer hashes the 400 MB binary each time, and any change to it is hashed anew."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

import ablate.core.claude as claude_mod
from ablate.core.claude import find_claude
from ablate.core.fsutil import sha256_file


@pytest.fixture
def fake(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for the binary that counts how often ``--version`` ran."""
    counter = tmp_path / "runs"
    exe = tmp_path / "bin" / "claude"
    exe.parent.mkdir()
    exe.write_text(f'#!/bin/sh\necho x >> "{counter}"\necho "2.1.332 (Claude Code)"\n')
    exe.chmod(0o755)
    return exe, counter


def _runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_the_identity_is_hashed_once_then_remembered(fake: tuple[Path, Path]) -> None:
    exe, counter = fake
    first = find_claude(exe)
    assert (first.version, first.sha256) == ("2.1.332", sha256_file(exe))
    assert find_claude(exe) == first and _runs(counter) == 1  # this process remembers it
    claude_mod._SEEN.clear()  # the next command: read from the cache folder
    assert find_claude(exe) == first and _runs(counter) == 1
    folder = Path(os.environ["ABLATE_CACHE_DIR"])
    assert folder.stat().st_mode & 0o777 == 0o700
    stored = orjson.loads((folder / "claude-identity.json").read_bytes())[str(exe)]
    assert stored["sha256"] == first.sha256


def test_a_changed_binary_is_hashed_again(fake: tuple[Path, Path]) -> None:
    exe, counter = fake
    first = find_claude(exe)
    with exe.open("a") as fh:
        fh.write("# patched\n")
    again = find_claude(exe)
    assert again.sha256 == sha256_file(exe) != first.sha256 and _runs(counter) == 2
    replaced = exe.with_name("claude.new")  # a new file renamed into place: another inode
    replaced.write_bytes(exe.read_bytes())
    replaced.chmod(0o755)
    replaced.rename(exe)
    claude_mod._SEEN.clear()
    assert find_claude(exe).sha256 == again.sha256 and _runs(counter) == 3


def test_a_cache_others_can_write_or_a_corrupt_one_is_not_trusted(fake: tuple[Path, Path]) -> None:
    exe, counter = fake
    first = find_claude(exe)
    folder = Path(os.environ["ABLATE_CACHE_DIR"])
    table = folder / "claude-identity.json"
    planted = orjson.loads(table.read_bytes())
    planted[str(exe)]["sha256"] = "0" * 64
    table.write_bytes(orjson.dumps(planted))
    folder.chmod(0o777)
    claude_mod._SEEN.clear()
    assert find_claude(exe).sha256 == first.sha256 and _runs(counter) == 2  # hashed, not read
    folder.chmod(0o700)
    table.write_text("{not json")
    claude_mod._SEEN.clear()
    assert find_claude(exe).sha256 == first.sha256 and _runs(counter) == 3
    assert orjson.loads(table.read_bytes())[str(exe)]["sha256"] == first.sha256  # rewritten whole

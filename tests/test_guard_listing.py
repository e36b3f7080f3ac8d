"""The before/after listing sees everything it guards: every file of the config dir (what Claude Code
writes itself included) and every home entry whatever its size, or it says what it could not list."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ablate.isolate import guard


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    home = tmp_path / "home"
    config, repo = home / ".claude", home / "repo"
    config.mkdir(parents=True)
    (config / "settings.json").write_text("{}")
    (config / "history.jsonl").write_text('{"display": "hi"}\n')
    (config / "projects" / "p").mkdir(parents=True)
    (home / ".claude.json").write_text("{}")
    (home / ".bashrc").write_text("# mine\n")
    big = home / "big.bin"
    with big.open("wb") as fh:  # larger than the digest limit: listed by its metadata
        fh.truncate(100 * 1024 * 1024)
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return home, config, repo


def test_every_home_entry_is_listed_whatever_its_size(tree: tuple[Path, Path, Path]) -> None:
    home, config, repo = tree
    before = guard.take(config, repo, home)
    assert "big.bin" in before.listings[str(home)]
    assert guard.changes_and_notes(before) == ([], [])
    with (home / "big.bin").open("r+b") as fh:  # same size, one byte changed in the middle
        fh.seek(50 * 1024 * 1024)
        fh.write(b"x")
    assert guard.changes(before) == [f"{home / 'big.bin'} (changed)"]


def test_what_claude_code_writes_is_listed_and_said_as_a_note(tree: tuple[Path, Path, Path]) -> None:
    home, config, repo = tree
    before = guard.take(config, repo, home)
    with (config / "history.jsonl").open("a") as fh:
        fh.write('{"display": "from a host service"}\n')
    (config / ".claude.json").write_text("{}")
    (config / "projects" / "p" / "s.jsonl").write_text("{}\n")
    (home / ".claude.json").write_text('{"changed": true}')
    (config / "settings.json").write_text('{"hooks": {}}')
    changed, notes = guard.changes_and_notes(before)
    assert changed == [f"{config / 'settings.json'} (changed)"]
    (note,) = notes
    assert note.startswith("4 file(s) Claude Code writes itself changed during the run")
    for rel in (
        ".claude/history.jsonl",
        ".claude/.claude.json",
        ".claude/projects/p/s.jsonl",
        ".claude.json",
    ):
        assert str(home / rel) in note, rel


def test_what_cannot_be_listed_is_said(
    tree: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, config, repo = tree
    real = guard._describe

    def describe(full: str, st: os.stat_result) -> str:
        if full.endswith(".bashrc"):
            raise PermissionError(13, "Permission denied", full)
        return real(full, st)

    monkeypatch.setattr(guard, "_describe", describe)
    before = guard.take(config, repo, home)
    _, notes = guard.changes_and_notes(before)
    assert notes == [
        f"could not list 1 path(s), changes there go unseen: {home / '.bashrc'}: Permission denied"
    ]


@pytest.mark.parametrize("xdg", [False, True])
def test_ablates_own_cache_dir_in_the_home_is_not_the_users_change(
    tree: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch, xdg: bool
) -> None:
    from ablate.core.cache import cache_dir, ensure_cache_dir

    home, config, repo = tree
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ABLATE_CACHE_DIR", raising=False)
    if xdg:
        monkeypatch.setenv("XDG_CACHE_HOME", str(home / "xdg"))
    else:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    ours = cache_dir()
    assert ours == (home / "xdg" / "ablate" if xdg else home / ".cache" / "ablate")
    assert ensure_cache_dir() == ours  # a run's preflight makes it before the first listing
    before = guard.take(config, repo, home)
    (ours / "pristine" / "k").mkdir(parents=True)  # a command caches a checkout: not the user's change
    (ours / "pristine" / "k" / "repo.txt").write_text("cached\n")
    (ours.parent / "other-tool").mkdir()  # beside it, another program's cache is the user's
    assert guard.changes(before) == [f"{ours.parent / 'other-tool'} (added)"]

"""Which layer a path named in a transcript belongs to: the catalog's globs, tool inputs, Bash words."""

from __future__ import annotations

import pytest

from ablate.mine.attribution import LayerMatcher, glob_regex, paths_in_tool_input
from ablate.setup.layers import load_catalog

CFG, REPO = "/home/u/.claude", "/srv/app"


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("docs/runbooks/", "docs/runbooks/deploy.md", True),
        ("docs/runbooks/", "docs/runbooks", True),
        ("docs/runbooks/", "docs/runbooks-old/x.md", False),
        ("MEMORY.md", "MEMORY.md", True),
        ("MEMORY.md", "sub/MEMORY.md", False),
        ("docs/status/*handoff*", "docs/status/2026-handoff.md", True),
        ("docs/status/*handoff*", "docs/status/a/handoff.md", False),
        ("*/**/CLAUDE.md", "pkg/CLAUDE.md", True),
        ("*/**/CLAUDE.md", "a/b/c/CLAUDE.md", True),
        ("*/**/CLAUDE.md", "CLAUDE.md", False),
        ("projects/<memory-slug>/memory/", "projects/-srv-app/memory/MEMORY.md", True),
    ],
)
def test_glob_regex(pattern: str, path: str, hit: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is hit


def test_layer_of_sides_and_catalog_order() -> None:
    m = LayerMatcher.from_catalog(load_catalog())
    assert m.layer_of(f"{REPO}/CLAUDE.md", config_dir=CFG, cwd=REPO) == ("repo-claude-md", "CLAUDE.md")
    assert m.layer_of(f"{REPO}/.claude/CLAUDE.md", config_dir=CFG, cwd=REPO) == (
        "repo-claude-md",
        ".claude/CLAUDE.md",
    )
    assert m.layer_of(f"{REPO}/pkg/CLAUDE.md", config_dir=CFG, cwd=REPO) == (
        "nested-claude-md",
        "pkg/CLAUDE.md",
    )
    assert m.layer_of("docs/adr/0002.md", config_dir=CFG, cwd=REPO) == ("decisions", "docs/adr/0002.md")
    assert m.layer_of(f"{CFG}/lessons.md", config_dir=CFG, cwd=REPO) == ("lessons", "lessons.md")
    assert m.layer_of(f"{CFG}/projects/-srv-app/memory/MEMORY.md", config_dir=CFG, cwd=REPO) == (
        "auto-memory",
        "projects/-srv-app/memory/MEMORY.md",
    )
    assert m.layer_of(f"{REPO}/src/main.py", config_dir=CFG, cwd=REPO) is None
    assert m.layer_of("docs/runbooks/x.md", config_dir=CFG, cwd=None) is None  # relative with no cwd
    assert m.layer_of("~/.claude/lessons.md", config_dir=CFG, cwd=REPO) is None  # HOME is not recorded
    assert m.layer_of(f"{REPO}/../app/docs/runbooks/x.md", config_dir=CFG, cwd=REPO) == (
        "runbooks",
        "docs/runbooks/x.md",
    )


def test_paths_in_tool_inputs() -> None:
    assert list(paths_in_tool_input("Read", {"file_path": "/a/b.md"})) == ["/a/b.md"]
    assert list(paths_in_tool_input("Grep", {"pattern": "TODO", "path": "docs/decisions"})) == [
        "docs/decisions"
    ]
    assert list(paths_in_tool_input("Glob", {"pattern": "docs/runbooks/**/*.md"})) == ["docs/runbooks"]
    assert list(paths_in_tool_input("Glob", {"pattern": "*.md", "path": "/srv/app/docs"})) == [
        "/srv/app/docs"
    ]
    words = list(
        paths_in_tool_input("Bash", {"command": "cat docs/runbooks/deploy.md | grep -n x README.md"})
    )
    assert words == ["docs/runbooks/deploy.md", "README.md"]
    assert list(paths_in_tool_input("Bash", {"command": "ls docs/adr/*.md && echo 'it''s'"})) == ["docs/adr"]
    assert list(paths_in_tool_input("Bash", {"command": "echo 'unbalanced docs/plans/x.md"})) == [
        "docs/plans/x.md"
    ]
    assert list(paths_in_tool_input("Bash", {"command": "tool --file=docs/findings/f.md"})) == [
        "docs/findings/f.md"
    ]
    assert list(paths_in_tool_input("Edit", {"file_path": "/a/b.md"})) == []

"""Pieces (issue 32): enumeration, ids, cutting, piece cells, `ablate pieces`, and every bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import orjson
import pytest

from ablate.core.errors import UsageError
from ablate.core.fsutil import tree_hash
from ablate.isolate.environment import build_environment
from ablate.isolate.piece_ops import cut_side
from ablate.setup.examples import ExampleSetup, git, materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import Setup, load_setup
from ablate.setup.piece_cells import one_out_rows, piece_cells
from ablate.setup.piece_cut import drop_hooks, select_pieces
from ablate.setup.pieces import sections, setup_pieces
from tests.helpers_cli import invoke

RICH_CLAUDE_MD = """Always answer in English.

# Money
Quote prices in EUR. (fp: money-1)

## Details
```
# not a heading inside a fence
```

# Style
Short sentences. (fp: style)

# Money
Round to cents. (fp: money-2)
"""

RICH_SETTINGS = {
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {"type": "command", "command": "python3 $HOME/.claude/hooks/guard.py"},
                    {"type": "command", "command": "python3 $HOME/.claude/hooks/audit.py"},
                ],
            }
        ],
        "SessionStart": [{"hooks": [{"type": "command", "command": "echo hello"}]}],
    },
}


RICH_REPO_MCP = {"search": {"command": "search-server"}, "lint": {"command": "lint", "args": ["--stdio"]}}


@pytest.fixture
def example(tmp_path: Path) -> ExampleSetup:
    return materialise_example(tmp_path / "ex")


def _setup(ex: ExampleSetup) -> Setup:
    return load_setup(ex.config_dir, ex.repo, home=ex.home)


@pytest.fixture
def rich(tmp_path: Path) -> ExampleSetup:
    """The example, plus a CLAUDE.md with a preamble, nested and repeated headings and a fenced heading,
    two hook entries in one group, two MCP servers, a repo skill, repo settings hooks and a repo .mcp.json."""
    ex = materialise_example(tmp_path / "rich")
    (ex.config_dir / "CLAUDE.md").write_text(RICH_CLAUDE_MD)
    (ex.config_dir / "settings.json").write_text(json.dumps(RICH_SETTINGS, indent=4))
    account = ex.home / ".claude.json"
    state = json.loads(account.read_text())
    state["mcpServers"] = {"docs": {"command": "docs-server"}, "tickets": {"command": "tickets"}}
    account.write_text(json.dumps(state))
    skill = ex.repo / ".claude" / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship it safely\n---\nSteps.\n")
    (ex.repo / ".claude" / "settings.json").write_text(json.dumps(RICH_SETTINGS))
    (ex.repo / ".mcp.json").write_text(json.dumps({"mcpServers": RICH_REPO_MCP}))
    git(ex.repo, "add", "-A")
    git(ex.repo, "commit", "-q", "-m", "repo skill and hooks")
    return ex


def test_sections_partition_the_file_and_skip_fenced_headings() -> None:
    data = RICH_CLAUDE_MD.encode()
    secs = sections(data)
    assert [s.heading for s in secs] == ["preamble", "Money", "Details", "Style", "Money"]
    assert b"".join(data[s.start : s.end] for s in secs) == data  # a flat partition: every byte once
    assert sections(b"\n\n# Only\ntext\n")[0].heading == "Only"  # a blank preamble is no piece


def test_example_setup_pieces(example: ExampleSetup) -> None:
    ids = [p.id for p in setup_pieces(_setup(example), load_catalog())]
    assert ids == [
        "user-claude-md#global-rules",
        "axioms#axioms",
        "lessons#lessons",
        "skills#bug-triage",
        "skills#release-notes",
        "auto-memory#memory",
        "hooks#sessionstart-session-start",
        "hooks#posttooluse-post-tool",
        "commands#standup",
        "agents#doc-summarizer",
        "rules#python",
        "repo-memory#memory",
        "runbooks#deploy",
        "runbooks#rollback",
        "decisions#0001-plain-python",
        "findings#greeting-latency",
        "handoffs-plans#2026-11-20",
        "handoffs-plans#friendlier-greeting",
        "repo-claude-md#greeter",
    ]


def test_rich_setup_ids_unique_stable_and_kinds(rich: ExampleSetup) -> None:
    setup = _setup(rich)
    pieces = setup_pieces(setup, load_catalog())
    by_id = {p.id: p for p in pieces}
    assert len(by_id) == len(pieces)
    for pid in (
        "user-claude-md#preamble",
        "user-claude-md#money",
        "user-claude-md#details",
        "user-claude-md#money-2",
        "hooks#pretooluse-bash-guard",
        "hooks#pretooluse-bash-audit",
        "hooks#sessionstart-hello",
        "mcp#docs",
        "mcp#tickets",
        "repo-dot-claude#deploy",
        "repo-dot-claude#pretooluse-bash-guard",
        "repo-mcp#search",
        "repo-mcp#lint",
    ):
        assert pid in by_id, pid
    assert "fp: money-2" in by_id["user-claude-md#money-2"].text
    assert by_id["user-claude-md#money-2"].line == 14
    assert by_id["repo-dot-claude#deploy"].kind == "skill"
    assert by_id["repo-dot-claude#deploy"].shown_text == "deploy: Ship it safely"
    assert [p.id for p in setup_pieces(setup, load_catalog())] == list(by_id)  # stable across reads


def _copy_config(setup: Setup, dest: Path) -> Path:
    subprocess.run(["cp", "-a", str(setup.config_dir), str(dest)], check=True)
    return dest


def test_cutting_a_section_leaves_the_rest_byte_identical(rich: ExampleSetup, tmp_path: Path) -> None:
    setup = _setup(rich)
    pieces = setup_pieces(setup, load_catalog())
    cell = _copy_config(setup, tmp_path / "cell")
    chosen = select_pieces(pieces, ["user-claude-md#money-2", "user-claude-md#preamble"])
    cut_side(cell, chosen)
    before = RICH_CLAUDE_MD.encode()
    after = (cell / "CLAUDE.md").read_bytes()
    expect = before.replace(b"Always answer in English.\n\n", b"", 1)
    expect = expect[: expect.rindex(b"# Money")]
    assert after == expect
    assert (setup.config_dir / "CLAUDE.md").read_bytes() == before  # the user's file untouched


def test_dropping_one_hook_entry_keeps_the_json_otherwise_identical(
    rich: ExampleSetup, tmp_path: Path
) -> None:
    setup = _setup(rich)
    pieces = setup_pieces(setup, load_catalog())
    cell = _copy_config(setup, tmp_path / "cell")
    cut_side(cell, select_pieces(pieces, ["hooks#pretooluse-bash-guard", "hooks#sessionstart-hello"]))
    got = json.loads((cell / "settings.json").read_text())
    want = json.loads(json.dumps(RICH_SETTINGS))
    del want["hooks"]["PreToolUse"][0]["hooks"][0]
    del want["hooks"]["SessionStart"]  # its only entry gone: the event goes too
    assert got == want


def test_drop_hooks_refuses_an_entry_that_is_not_there() -> None:
    with pytest.raises(UsageError, match=r"no hook entry PreToolUse\[0\]"):
        drop_hooks(RICH_SETTINGS, [["PreToolUse", 0, 5]], where="settings.json")


def test_a_changed_file_is_refused_not_cut_elsewhere(rich: ExampleSetup, tmp_path: Path) -> None:
    setup = _setup(rich)
    pieces = setup_pieces(setup, load_catalog())
    cell = _copy_config(setup, tmp_path / "cell")
    (cell / "CLAUDE.md").write_text("# Money\nsomething else entirely, longer than before\n" * 3)
    with pytest.raises(UsageError, match="not the section that was read"):
        cut_side(cell, select_pieces(pieces, ["user-claude-md#style"]))


def test_piece_cell_built_by_the_links_builder(rich: ExampleSetup, tmp_path: Path) -> None:
    setup = _setup(rich)
    catalog = load_catalog()
    pieces = setup_pieces(setup, catalog)
    row = [
        "user-claude-md#style",
        "skills#bug-triage",
        "mcp#docs",
        "repo-dot-claude#deploy",
        "repo-claude-md#greeter",
        "repo-mcp#search",
    ]
    cells = piece_cells(pieces, [row])
    assert cells.control == "C0" and cells.cells[1].pieces == tuple(row[:3] + row[4:5] + row[3:4] + row[5:])
    before = tree_hash(rich.home), tree_hash(rich.repo)
    env = build_environment(setup, catalog, cells.cells[1], tmp_path / "out")
    assert "(fp: style)" not in (env.config_dir / "CLAUDE.md").read_text()
    assert "(fp: money-2)" in (env.config_dir / "CLAUDE.md").read_text()
    assert sorted(p.name for p in (env.config_dir / "skills").iterdir()) == ["release-notes"]
    for account in (env.config_dir / ".claude.json", env.home / ".claude.json"):
        assert set(json.loads(account.read_text())["mcpServers"]) == {"tickets"}
    assert not (env.cwd / ".claude" / "skills" / "deploy").exists()
    assert (env.cwd / "CLAUDE.md").read_text() == ""
    assert json.loads((env.cwd / ".mcp.json").read_text()) == {"mcpServers": {"lint": RICH_REPO_MCP["lint"]}}
    assert json.loads((rich.repo / ".mcp.json").read_text())["mcpServers"] == RICH_REPO_MCP  # the user's file
    assert env.mismatches == {}
    status = subprocess.run(["git", "status", "--short"], cwd=env.cwd, capture_output=True, text=True).stdout
    assert "CLAUDE.md" not in status and "deploy" not in status  # cuts are not named by git status
    assert (tree_hash(rich.home), tree_hash(rich.repo)) == before
    control = build_environment(setup, catalog, cells.cells[0], tmp_path / "out")
    assert (control.config_dir / "CLAUDE.md").read_text() == RICH_CLAUDE_MD


def test_piece_cells_bad_input(example: ExampleSetup) -> None:
    pieces = setup_pieces(_setup(example), load_catalog())
    with pytest.raises(UsageError, match=r"row 2: unknown piece id 'skills#nope' \(did you mean 'skills#"):
        piece_cells(pieces, [["rules#python"], ["skills#nope"]])
    with pytest.raises(UsageError, match="needs at least 2"):
        piece_cells(pieces[:1], [["user-claude-md#global-rules"]])
    with pytest.raises(UsageError, match="at most 999"):
        piece_cells(pieces, [[pieces[0].id]] * 1000)
    assert len(piece_cells(pieces, one_out_rows(pieces)).cells) == len(pieces) + 1


def test_cli_pieces_json_and_notes(rich: ExampleSetup) -> None:
    before = tree_hash(rich.home), tree_hash(rich.repo)
    where = ("--config-dir", str(rich.config_dir), "--repo", str(rich.repo))
    code, out, _ = invoke(["pieces", *where, "--json"])
    assert code == 0
    data = orjson.loads(out)
    rows = {r["id"]: r for r in data["pieces"]}
    money = rows["user-claude-md#money"]
    assert money["kind"] == "section" and money["tokens_source"] == "estimate"
    assert money["tokens"] == -(-money["bytes"] // 4)  # ASCII text: the sim's 4 characters a token
    assert any("'Money' appears 2 times (lines 3, 14)" in n for n in data["notes"])
    code, out, _ = invoke(["pieces", *where])
    assert code == 0 and "user-claude-md#money-2" in out and "note:" in out
    assert (tree_hash(rich.home), tree_hash(rich.repo)) == before


def test_cli_pieces_bad_input(example: ExampleSetup, tmp_path: Path) -> None:
    where = ("--config-dir", str(example.config_dir), "--repo", str(example.repo))
    code, _, err = invoke(["pieces", *where, "--pieces", "rules#python,hooks#nope"])
    assert code == 2 and "unknown piece id 'hooks#nope'" in err
    code, _, err = invoke(["pieces", *where, "--pieces", "rules#python"])
    assert code == 2 and "1 piece(s) (rules#python); a piece design needs at least 2" in err


def test_probe_and_measure_refuse_bad_pieces_before_running(example: ExampleSetup, tmp_path: Path) -> None:
    where = ("--config-dir", str(example.config_dir), "--repo", str(example.repo))
    missing = str(tmp_path / "no-claude")  # nothing may start: a CLI that does not exist is never reached
    code, _, err = invoke(["probe", *where, "--claude-bin", missing, "--pieces", "skills#nope,rules#python"])
    assert code == 2 and "unknown piece id 'skills#nope'" in err
    code, _, err = invoke(["probe", *where, "--claude-bin", missing, "--pieces", "rules#python"])
    assert code == 2 and "needs at least 2" in err
    code, _, err = invoke(
        ["pieces", *where, "--measure", "--claude-bin", missing, "--pieces", "x#y,rules#python"]
    )
    assert code == 2 and "unknown piece id 'x#y'" in err


def test_a_cell_file_may_cut_pieces(example: ExampleSetup, tmp_path: Path) -> None:
    from ablate.setup.cells import load_cell_set

    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "mine"\n[[cell]]\nid = "C0"\n[[cell]]\nid = "P1"\n'
        'strip_pieces = ["rules#python", "skills#bug-triage", "rules#python"]\n'
    )
    cells = load_cell_set(path, load_catalog())
    p1 = cells.get("P1")
    assert p1.pieces == ("rules#python", "skills#bug-triage") and not p1.is_control
    assert p1.label == "no rules#python, skills#bug-triage" and p1.cut_layers == {"rules", "skills"}
    path.write_text(path.read_text().replace("rules#python", "rules#nope"))
    bad = load_cell_set(path, load_catalog()).get("P1")
    with pytest.raises(UsageError, match="cell P1: strip_pieces: unknown piece id 'rules#nope'"):
        build_environment(_setup(example), load_catalog(), bad, tmp_path / "out")
    assert not (tmp_path / "out" / bad.dirname).exists()  # refused before anything was left behind

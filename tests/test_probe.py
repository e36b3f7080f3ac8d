"""`ablate probe`: unit tests of fingerprints and judging, and end-to-end runs with the real CLI.

The probe exists to catch a broken environment builder, so most end-to-end tests hand it a deliberately
broken one and check the verdict: a probe that cannot fail is a defect.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.claude import find_claude
from ablate.core.fsutil import tree_hash
from ablate.isolate.environment import CellEnvironment, build_environment
from ablate.probe.fingerprints import (
    distinctive_lines,
    drop_generic,
    frontmatter,
    layer_prints,
    normalise_request,
)
from ablate.probe.probe import ProbeResult, neutralise, probe
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import ExampleSetup, materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup, resolve_layers
from tests.helpers_cli import invoke


@pytest.fixture
def example(tmp_path: Path) -> ExampleSetup:
    return materialise_example(tmp_path / "ex")


# ---------------------------------------------------------------------------------------------------------
# unit


def test_distinctive_lines_skip_imports_frontmatter_and_short_lines() -> None:
    text = "---\nname: x\ndescription: a long description line here\n---\n# Hi\n@axioms.md\n- Read a file before editing it.\n"
    assert distinctive_lines(text) == ["- Read a file before editing it."]
    assert frontmatter(text) == {"name": "x", "description": "a long description line here"}


def test_layer_prints_by_kind(example: ExampleSetup) -> None:
    setup = load_setup(example.config_dir, example.repo, home=example.home)
    cat = load_catalog()
    prints = layer_prints(cat, resolve_layers(setup, cat))
    assert prints["skills"].kind == "names" and set(prints["skills"].needles) == {
        "bug-triage",
        "release-notes",
    }
    assert prints["commands"].needles == ["standup"]
    assert prints["agents"].needles == ["doc-summarizer"]
    assert prints["hooks"].kind == "hooks"
    # every configured command is a needle (a leak where stripped); only those that can leave a record in a
    # one-prompt session must show where kept
    assert prints["hooks"].needles == [
        "python3 $HOME/.claude/hooks/session_start.py",
        f"python3 {example.config_dir}/hooks/post_tool.py",
    ]
    assert prints["hooks"].expected() == ["python3 $HOME/.claude/hooks/session_start.py"]
    assert prints["runbooks"].kind == "files"
    assert prints["mcp"].kind == "absent"
    assert any("41c7" in n for n in prints["user-claude-md"].needles)
    assert not any(n.startswith("@") for n in prints["user-claude-md"].needles)
    # a needle that shows without any setup is generic and dropped; a layer left with none says so
    drop_generic(prints, "- bug-triage: builtin\n- release-notes: builtin\n")
    after = prints["skills"]
    assert after.kind == "unobservable" and "too generic" in after.reason


def test_only_post_tool_hooks_are_unobservable(example: ExampleSetup) -> None:
    settings = example.config_dir / "settings.json"
    data = json.loads(settings.read_text())
    del data["hooks"]["SessionStart"]
    settings.write_text(json.dumps(data))
    setup = load_setup(example.config_dir, example.repo, home=example.home)
    cat = load_catalog()
    p = layer_prints(cat, resolve_layers(setup, cat))["hooks"]
    assert p.kind == "hooks" and p.expected() == [] and "PostToolUse hooks cannot show" in p.reason


def test_mcp_unprobed_unless_asked(tmp_path: Path, example: ExampleSetup) -> None:
    account = example.home / ".claude.json"
    data = json.loads(account.read_text())
    data["mcpServers"] = {"tracker": {"command": "npx", "args": ["tracker-mcp"]}}
    account.write_text(json.dumps(data))
    setup = load_setup(example.config_dir, example.repo, home=example.home)
    cat = load_catalog()
    assert layer_prints(cat, resolve_layers(setup, cat))["mcp"].kind == "unprobed"
    assert layer_prints(cat, resolve_layers(setup, cat), with_mcp=True)["mcp"].needles == ["mcp__tracker"]


def test_neutralise_keeps_traffic_on_loopback(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text(
        json.dumps(
            {
                "apiKeyHelper": "get-key",
                "env": {"ANTHROPIC_BASE_URL": "https://corp", "FOO": "1"},
                "mcpServers": {"a": {}},
            }
        )
    )
    (cfg / ".claude.json").write_text(json.dumps({"mcpServers": {"b": {}}, "userID": "u"}))
    (tmp_path / "creds").write_text("{}")
    (cfg / ".credentials.json").symlink_to(tmp_path / "creds")
    notes = neutralise(cfg, with_mcp=False)
    settings = json.loads((cfg / "settings.json").read_text())
    assert settings == {"env": {"FOO": "1"}}
    assert json.loads((cfg / ".claude.json").read_text()) == {"userID": "u"}
    assert not (cfg / ".credentials.json").exists() and (tmp_path / "creds").exists()
    assert any("apiKeyHelper" in n for n in notes) and any("ANTHROPIC_BASE_URL" in n for n in notes)


def test_normalise_request_ignores_paths_billing_and_branch() -> None:
    def body(cfg: str, branch: str, billing: str) -> dict[str, Any]:
        return {
            "system": [
                {"text": f"x-anthropic-billing-header: cc_version=2.1.332.{billing}; cc_entrypoint=sdk-cli;"}
            ],
            "messages": [
                {"role": "user", "content": f"memory at {cfg}/projects/x\nCurrent branch: {branch}\n"}
            ],
            "tools": [],
        }

    a = normalise_request(body("/r/c00/home/.claude", "HEAD", "abc"), {"/r/c00/home/.claude": "<CONFIG>"})
    b = normalise_request(body("/u/home/.claude", "main", "f00"), {"/u/home/.claude": "<CONFIG>"})
    assert a == b
    c = normalise_request(body("/u/home/.claude", "main", "f00") | {"tools": [{"name": "Extra"}]}, {})
    assert c != b
    # what follows the billing header and the branch line is compared: the tool list, the system prompt,
    # the rest of the message (the line patterns once ran to the end of the JSON text)
    same = {"/u/home/.claude": "<CONFIG>"}
    tool = body("/u/home/.claude", "main", "f00") | {"tools": [{"name": "Extra"}]}
    assert normalise_request(tool, same) != b
    prompt = body("/u/home/.claude", "main", "f00")
    prompt["system"].append({"text": "Output style: terse"})
    assert normalise_request(prompt, same) != b
    after = body("/u/home/.claude", "main", "f00")
    after["messages"][0]["content"] += "Status:\n M README.md\n"
    assert normalise_request(after, same) != b


# ---------------------------------------------------------------------------------------------------------
# end to end, with the real CLI


def _probe(example: ExampleSetup, claude: Path, **kw: Any) -> ProbeResult:
    setup = load_setup(example.config_dir, example.repo, home=example.home)
    cat = load_catalog()
    return probe(setup, cat, load_cell_set("layered", cat), find_claude(claude), jobs=2, **kw)


@pytest.mark.e2e
def test_probe_example_all_twelve_faithful(example: ExampleSetup, claude: Path) -> None:
    before = tree_hash(example.home), tree_hash(example.repo)
    res = invoke(
        [
            "probe",
            "--config-dir",
            str(example.config_dir),
            "--repo",
            str(example.repo),
            "--claude-bin",
            str(claude),
            "--json",
        ],
        env={"HOME": str(example.home)},
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    data = orjson.loads(res.stdout)
    verdicts = {c["id"]: c["verdict"] for c in data["cells"]}
    assert verdicts == {f"C{i}": "faithful" for i in range(12)}
    cells = {c["id"]: c for c in data["cells"]}
    # the matrix says what was expected and what was seen, layer by layer
    axioms = cells["C0"]["layers"]["axioms"]
    assert (axioms["expected"], axioms["observed"], axioms["status"]) == ("present", "present", "ok")
    # the evidence names where the layer's own content was seen, not a canary
    assert isinstance(axioms["evidence"], str) and axioms["evidence"].strip(), axioms
    assert cells["C1"]["layers"]["axioms"]["expected"] == "absent"  # imported by the stubbed CLAUDE.md
    assert cells["C1"]["layers"]["axioms"]["observed"] == "absent"
    assert cells["C4"]["layers"]["skills"]["observed"] == "absent"
    assert cells["C4"]["layers"]["commands"]["observed"] == "present"
    assert cells["C7"]["layers"]["runbooks"]["status"] == "ok"
    assert cells["C11"]["layers"]["hooks"]["observed"] == "absent"
    assert cells["C0"]["layers"]["hooks"]["observed"] == "present"
    assert data["fidelity"]["checked"] and data["fidelity"]["equal"], data["fidelity"]
    assert data["real_setup_unchanged"] is True
    assert (tree_hash(example.home), tree_hash(example.repo)) == before


def _broken(sabotage: Any) -> Any:
    def builder(*args: Any, **kwargs: Any) -> CellEnvironment:
        cenv = build_environment(*args, **kwargs)
        sabotage(cenv, args[0])
        return cenv

    return builder


@pytest.mark.e2e
def test_symlinked_claude_md_leaks_its_import(example: ExampleSetup, claude: Path) -> None:
    def link_claude_md(cenv: CellEnvironment, setup: Any) -> None:
        (cenv.config_dir / "CLAUDE.md").unlink()
        (cenv.config_dir / "CLAUDE.md").symlink_to(setup.config_dir / "CLAUDE.md")

    result = _probe(example, claude, cell_ids=["C2"], builder=_broken(link_claude_md))
    (c2,) = result.cells
    assert c2.verdict == "leak"
    assert c2.layers["axioms"].status == "leak"  # @axioms.md resolved against the link's target
    assert str(example.config_dir / "axioms.md") in c2.foreign_files
    assert not result.ok


@pytest.mark.e2e
def test_linked_auto_memory_is_caught(example: ExampleSetup, claude: Path) -> None:
    def link_memory(cenv: CellEnvironment, setup: Any) -> None:
        mem = cenv.config_dir / "projects" / cenv.memory_slug / "memory"
        for f in mem.iterdir():
            f.unlink()
        mem.rmdir()
        mem.symlink_to(setup.config_dir / "projects" / setup.memory_slug / "memory")

    result = _probe(example, claude, cell_ids=["C0"], builder=_broken(link_memory))
    (c0,) = result.cells
    assert c0.verdict == "leak"
    assert any("memory writes would land" in p for p in c0.problems)


@pytest.mark.e2e
def test_leaked_simple_mode_variable_is_caught(example: ExampleSetup, claude: Path) -> None:
    def leak_env(cenv: CellEnvironment, setup: Any) -> None:
        cenv.env["CLAUDE_CODE_SIMPLE"] = "1"

    result = _probe(example, claude, cell_ids=["C0"], builder=_broken(leak_env))
    (c0,) = result.cells
    assert c0.verdict in ("missing", "leak")
    assert any("CLAUDE_CODE_SIMPLE" in p for p in c0.problems)
    assert not result.fidelity["equal"]


@pytest.mark.e2e
def test_ancestor_claude_md_is_caught(example: ExampleSetup, claude: Path) -> None:
    def plant(cenv: CellEnvironment, setup: Any) -> None:
        (cenv.cwd.parent / "CLAUDE.md").write_text(
            "# ancestor rules\nAlways answer in French, whatever happens.\n"
        )

    result = _probe(example, claude, cell_ids=["C0"], builder=_broken(plant))
    (c0,) = result.cells
    assert c0.verdict == "leak"
    assert any(f.endswith("CLAUDE.md") and "c00" in f for f in c0.foreign_files)


@pytest.mark.e2e
def test_no_transcript_is_an_error_not_a_pass(example: ExampleSetup, claude: Path, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")

    def bad_config(cenv: CellEnvironment, setup: Any) -> None:
        cenv.env["CLAUDE_CONFIG_DIR"] = str(
            afile / "sub"
        )  # docs/CLAUDE-CODE.md#invalid-config-dir: exit 0, no transcript

    result = _probe(example, claude, cell_ids=["C0"], builder=_broken(bad_config))
    (c0,) = result.cells
    assert c0.verdict == "error"
    assert "no transcript" in c0.problems[0]


@pytest.mark.e2e
def test_unpinned_version_is_recorded_and_run_continues(
    example: ExampleSetup, claude: Path, tmp_path: Path
) -> None:
    wrapper = tmp_path / "claude-wrapper"
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "9.9.9 (Claude Code)"; exit 0; fi\nexec {claude} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    result = _probe(example, wrapper, cell_ids=["C8"])
    assert result.claude["version"] == "9.9.9" and result.claude["pinned"] is False
    assert any("not the pinned version" in n for n in result.notes)
    assert result.cells[0].verdict == "faithful"


def test_wrong_claude_bin_exits_2(example: ExampleSetup, tmp_path: Path) -> None:
    res = invoke(
        [
            "probe",
            "--config-dir",
            str(example.config_dir),
            "--repo",
            str(example.repo),
            "--claude-bin",
            str(tmp_path / "nope"),
        ],
    )
    assert res.exit_code == 2
    assert "no such file" in res.stderr and "--claude-bin" in res.stderr
    not_claude = tmp_path / "fake"
    not_claude.write_text("#!/bin/sh\necho hello\n")
    os.chmod(not_claude, 0o755)
    res = invoke(
        [
            "probe",
            "--config-dir",
            str(example.config_dir),
            "--repo",
            str(example.repo),
            "--claude-bin",
            str(not_claude),
        ],
    )
    assert res.exit_code == 2 and "did not print a Claude Code version" in res.stderr

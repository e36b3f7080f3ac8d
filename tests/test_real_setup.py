"""The probe passes on realistic setups that are isolated, and `layers` reports what the CLI loads.

One combined realistic setup (tests/data/real_setup) is probed once with the real CLI; the unit tests below
check each piece (hook records, imports, on disk vs loaded, the allow-list, the endpoint rule) on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.claude import find_claude
from ablate.core.errors import UsageError
from ablate.core.fsutil import tree_hash
from ablate.core.gitutil import git_env
from ablate.isolate.environment import CellEnvironment, build_environment
from ablate.isolate.procenv import (
    PROBE_KEY,
    force_capture,
    one_endpoint,
    process_env,
    redacted_env,
)
from ablate.mine.attachments import hook_commands_in
from ablate.probe.fingerprints import normalise_request
from ablate.probe.probe import probe
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import git
from ablate.setup.layers import load_catalog
from ablate.setup.load import follow_imports, load_setup
from tests.helpers_cli import invoke
from tests.real_setup import RealSetup, build_real_setup


@pytest.fixture
def real(tmp_path: Path) -> RealSetup:
    return build_real_setup(tmp_path / "rs")


# ---------------------------------------------------------------------------------------------------------
# hook records (collected from real 2.1.332 sessions against ablate.sim; see ablate/probe/probe.py)


def test_every_hook_record_type_names_its_command() -> None:
    records: list[dict[str, Any]] = [
        {"type": "attachment", "attachment": {"type": "hook_success", "command": "a", "hookEvent": "Stop"}},
        {
            "type": "attachment",
            "attachment": {"type": "hook_non_blocking_error", "command": "/nope/b.py", "exitCode": 127},
        },
        {"type": "attachment", "attachment": {"type": "hook_additional_context", "content": ["x"]}},
        {
            "type": "system",
            "subtype": "stop_hook_summary",
            "hookCount": 2,
            "hookInfos": [{"command": "silent", "durationMs": 3}, {"command": "c", "durationMs": 1}],
        },
        {
            "type": "system",
            "subtype": "informational",
            "content": "UserPromptSubmit operation blocked by hook:\n[echo no; exit 2]: no\n\n\nOriginal prompt: x",
        },
        {"type": "attachment", "attachment": {"type": "skill_listing", "command": "not a hook"}},
    ]
    seen = [c for r in records for c in hook_commands_in(r)]
    assert seen == ["a", "/nope/b.py", "silent", "c", "echo no; exit 2"]


# ---------------------------------------------------------------------------------------------------------
# layers: imports, on disk vs loaded, catalog, unclassified


def test_imports_followed_recursively_with_missing_and_cycles(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "CLAUDE.md").write_text("@d/a.md\n@gone.md\n")
    (tmp_path / "d" / "a.md").write_text("@b.md\n")
    (tmp_path / "d" / "b.md").write_text("@a.md\n@~/home-note.md\n")
    (tmp_path / "home-note.md").write_text("hi\n")
    rep = follow_imports(tmp_path / "CLAUDE.md", tmp_path)
    assert rep.files == [str(tmp_path / "d/a.md"), str(tmp_path / "d/b.md"), str(tmp_path / "home-note.md")]
    assert rep.missing == [f"{tmp_path / 'CLAUDE.md'} -> @gone.md"]
    assert rep.cycles == [f"{tmp_path / 'd/a.md'} -> {tmp_path / 'd/b.md'} -> {tmp_path / 'd/a.md'}"]


def test_layers_json_reports_on_disk_vs_loaded_and_unclassified(real: RealSetup) -> None:
    res = invoke(
        ["layers", "--config-dir", str(real.config_dir), "--repo", str(real.repo), "--json"],
        env={"HOME": str(real.home)},
    )
    assert res.exit_code == 0, res.stderr
    data = orjson.loads(res.stdout)
    rows = {r["id"]: r for r in data["layers"]}
    skills = rows["skills"]
    assert skills["on_disk"]["files"] == 2
    assert skills["loaded"]["files"] == 1
    assert skills["loaded"]["not_loaded"] == ["skills/_internal/shared-helper/SKILL.md"]
    assert rows["lessons"]["present"] and rows["lessons"]["loaded"]["files"] == 0  # imported by nothing
    assert rows["repo-dot-claude"]["loaded"]["files"] == 0  # a flat .claude/skills/*.md is no skill
    assert rows["output-styles"]["loaded"]["files"] == 1  # selected by its front-matter name
    assert rows["runbooks"]["loaded"] is None  # repo docs: read on demand
    c1 = rows["user-claude-md"]
    assert [Path(f).name for f in c1["import_files"]] == ["core.md", "deep.md", "axioms.md"]
    assert c1["import_bytes"] == sum(
        (real.config_dir / "docs" / n).stat().st_size for n in ("core.md", "deep.md")
    )
    assert c1["est_tokens_with_imports"] > c1["est_tokens"]
    assert rows["decisions"]["paths"] == ["docs/adr"]
    assert rows["handoffs-plans"]["paths"] == ["docs/status/2026-11-handoff.md"]
    assert rows["nested-claude-md"]["paths"] == ["services/api/CLAUDE.md"]
    assert data["unclassified"]["files"] == ["docs/guides/style.md"]
    assert 'paths = ["docs/guides/"]' in data["unclassified"]["hints"][0]


def test_cells_say_a_never_loaded_layer_is_a_noop(real: RealSetup) -> None:
    res = invoke(
        ["cells", "--config-dir", str(real.config_dir), "--repo", str(real.repo), "--json"],
        env={"HOME": str(real.home)},
    )
    rows = {r["id"]: r for r in orjson.loads(res.stdout)["cells"]}
    assert rows["C3"]["noop"] and rows["C3"]["unloaded"] == ["lessons"]
    assert "on disk but never loaded" in rows["C3"]["note"]
    assert not rows["C4"]["noop"]  # one skill is listed


# ---------------------------------------------------------------------------------------------------------
# the process environment


def test_force_capture_removes_every_way_off_loopback() -> None:
    base = {
        "PATH": "/bin",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "CLAUDE_CODE_USE_VERTEX": "1",
        "ANTHROPIC_BEDROCK_BASE_URL": "http://127.0.0.1:9",
        "ANTHROPIC_API_KEY": "sk-ant-real",
        "ANTHROPIC_AUTH_TOKEN": "tok",
        "ANTHROPIC_CUSTOM_HEADERS": "x-key: 1",
        "CLAUDE_CODE_OAUTH_TOKEN": "oauth",
        "AWS_SECRET_ACCESS_KEY": "s",
        "GOOGLE_APPLICATION_CREDENTIALS": "/creds.json",
        "HTTPS_PROXY": "http://u:p@proxy:8080",
        "CLAUDE_CODE_SIMPLE": "1",  # kept: the probe judges it (a stray variable)
    }
    env = force_capture(base, "http://127.0.0.1:5555")
    assert env == {
        "PATH": "/bin",
        "CLAUDE_CODE_SIMPLE": "1",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:5555",
        "ANTHROPIC_API_KEY": PROBE_KEY,
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def test_builder_and_probe_share_one_allow_list() -> None:
    base = {
        "ANTHROPIC_CUSTOM_HEADERS": "x-gw: 1",
        "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1",
        "CLAUDE_CODE_SIMPLE": "1",
        "GIT_DIR": "/elsewhere/.git",
    }
    env = process_env(base, home=Path("/h"), config_dir=Path("/h/.claude"), tmpdir="/tmp")
    assert env["ANTHROPIC_CUSTOM_HEADERS"] == "x-gw: 1" and env["CLAUDE_CODE_SKIP_BEDROCK_AUTH"] == "1"
    assert "CLAUDE_CODE_SIMPLE" not in env and "GIT_DIR" not in env


def test_redaction_covers_credentials_inside_urls() -> None:
    red = redacted_env(
        {
            "ANTHROPIC_BASE_URL": "https://user:pw@gateway.corp/v1",
            "HTTPS_PROXY": "http://u:p@proxy:8080",
            "ANTHROPIC_API_KEY": "sk-ant-real",
            "LANG": "C",
        }
    )
    assert red == {
        "ANTHROPIC_BASE_URL": "https://***@gateway.corp/v1",
        "HTTPS_PROXY": "http://***@proxy:8080",
        "ANTHROPIC_API_KEY": "***",
        "LANG": "C",
    }


def test_one_endpoint_refuses_settings_routing_and_accepts_it_when_alike(real: RealSetup) -> None:
    with pytest.raises(UsageError) as exc:
        one_endpoint(real.config_dir, real.repo, {})
    text = str(exc.value)
    assert "env.ANTHROPIC_BASE_URL" in text and "apiKeyHelper" in text and "export ANTHROPIC_BASE_URL" in text
    settings = real.config_dir / "settings.json"
    data = json.loads(settings.read_text())
    del data["apiKeyHelper"]
    settings.write_text(json.dumps(data))
    check = one_endpoint(
        real.config_dir, real.repo, {"ANTHROPIC_BASE_URL": real.unused_url, "ANTHROPIC_API_KEY": "sk-x"}
    )
    assert check.applied == {"ANTHROPIC_BASE_URL": real.unused_url, "ANTHROPIC_API_KEY": "***"}


def test_run_refuses_before_writing_anything(real: RealSetup, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    res = invoke(
        ["run", "--config-dir", str(real.config_dir), "--repo", str(real.repo), "--out", str(out)],
        env={"HOME": str(real.home), "ABLATE_CLAUDE_BIN": str(tmp_path / "no-claude-needed")},
    )
    assert res.exit_code == 2, res.stdout + res.stderr
    assert "env.ANTHROPIC_BASE_URL" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists() or not any(out.iterdir())


def test_git_vars_never_reach_ablate_git(
    real: RealSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    git(other, "commit", "-q", "--allow-empty", "-m", "other")
    before = git(other, "rev-parse", "HEAD")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert "GIT_DIR" not in git_env() and "GIT_WORK_TREE" not in git_env()
    setup = load_setup(real.config_dir, real.repo, home=real.home)
    assert setup.repo == real.repo.resolve()
    assert setup.head != before.strip()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    git(fresh, "commit", "-q", "--allow-empty", "-m", "baseline")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    assert (
        subprocess.run(
            ["git", "-C", str(other), "rev-parse", "HEAD"], env=env, capture_output=True, text=True
        ).stdout
        == before
    )


# ---------------------------------------------------------------------------------------------------------
# end to end: the realistic setup probed once, with the provider variables set


@pytest.mark.e2e
def test_probe_passes_on_a_realistic_setup(
    real: RealSetup, claude: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every way off loopback is set in the caller's environment: a leak shows as an error, never as traffic
    for var in ("ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL"):
        monkeypatch.setenv(var, real.unused_url)
    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "1")
    monkeypatch.setenv("CLAUDE_CODE_USE_VERTEX", "1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-the-probe")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFIXTURE")
    monkeypatch.setenv("HTTPS_PROXY", real.unused_url)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere" / ".git"))
    before = tree_hash(real.home), tree_hash(real.repo)
    work = tmp_path / "work"
    res = invoke(
        [
            "probe",
            "--config-dir",
            str(real.config_dir),
            "--repo",
            str(real.repo),
            "--claude-bin",
            str(claude),
            "--work",
            str(work),
            "--json",
        ],
        env={"HOME": str(real.home)},
    )
    assert res.exit_code == 0, res.stdout[-4000:] + res.stderr
    data = orjson.loads(res.stdout)
    verdicts = {c["id"]: c["verdict"] for c in data["cells"]}
    assert verdicts == {
        **{f"C{i}": "faithful" for i in range(12)},
        "C3": "no-op",  # lessons.md on disk, imported by nothing
        "C6": "no-op",
        "C9": "no-op",
    }
    cells = {c["id"]: c for c in data["cells"]}
    c0 = cells["C0"]["layers"]
    # the failing Stop hook and the prompt hook (absolute config path, rewritten in the cell) count as kept;
    # the async, silent and PostToolUse hooks cannot show
    assert c0["hooks"]["status"] == "ok" and c0["hooks"]["evidence"] == "2/5 fingerprints seen"
    assert cells["C11"]["layers"]["hooks"]["observed"] == "absent"
    assert c0["output-styles"]["status"] == "ok" and c0["output-styles"]["observed"] == "present"
    assert c0["lessons"]["status"] == "unobservable"
    assert c0["skills"]["observed"] == "present" and cells["C4"]["layers"]["skills"]["observed"] == "absent"
    assert cells["C5"]["layers"]["auto-memory"]["observed"] == "absent"
    assert c0["auto-memory"]["observed"] == "present"
    assert data["fidelity"]["equal"], data["fidelity"]
    assert data["real_setup_unchanged"] is True
    assert (tree_hash(real.home), tree_hash(real.repo)) == before
    assert any("not in the CLI's skill listing" in n for n in data["notes"])
    # --work keeps cells and transcripts; no cell holds the history hiding behind the projects link, and C5
    # holds no copy of the memory at all
    if data["isolation"]["backend"] == "namespace":
        # cells are config copies and repo layers; sessions wrote into their views' upper folders
        cells_dir, transcripts = work / "ns" / "ns-shared" / "cells", "ns/s*/up/config/projects/*/*.jsonl"
        assert data["fidelity"]["exact"]
    else:
        cells_dir, transcripts = work / "cells", "cells/*/home/.claude/projects/*/*.jsonl"
    # (beside the namespace backend's cells: cowlayer.json, the one spec their repo layers were built from)
    assert sorted(p.name for p in cells_dir.iterdir() if p.is_dir()) == [f"c{i:02d}" for i in range(12)]
    assert len(list(work.glob(transcripts))) == 12
    assert not list(work.glob("**/0000-old-session.jsonl"))
    assert not [p for p in (cells_dir / "c05").rglob("MEMORY.md")]
    # every session (12 cells, baseline, untouched) talked to the capture endpoint, with an API key only
    reqs = [orjson.loads(line) for line in (work / "requests.jsonl").read_bytes().splitlines()]
    messages = [r for r in reqs if r["path"] == "/v1/messages"]
    assert len({r["session_id"] for r in messages}) == 14
    assert {r["auth"] for r in messages} == {"x-api-key"}


def test_fidelity_ignores_the_completion_order_of_parallel_hooks() -> None:
    def body(order: list[int]) -> dict[str, Any]:
        hooks = [
            {
                "type": "text",
                "text": f"<system-reminder>\nSessionStart:startup hook success: hook {i} ok\n</system-reminder>",
            }
            for i in order
        ]
        other = {"type": "text", "text": "<system-reminder>\nskills\n</system-reminder>"}
        return {
            "messages": [{"role": "user", "content": [*hooks, other, {"type": "text", "text": "prompt"}]}]
        }

    assert normalise_request(body([4, 0, 8]), {}) == normalise_request(body([0, 8, 4]), {})
    assert normalise_request(body([4, 0]), {}) != normalise_request(body([0, 8]), {})


def test_c5_strips_every_copy_of_memory_behind_a_projects_link(real: RealSetup, tmp_path: Path) -> None:
    setup = load_setup(real.config_dir, real.repo, home=real.home)
    cat = load_catalog()
    cells = load_cell_set("layered", cat)
    c0 = build_environment(setup, cat, cells.get("C0"), tmp_path / "cells")
    c5 = build_environment(setup, cat, cells.get("C5"), tmp_path / "cells")
    # the hook state is copied, but never the history hiding behind the link (nor a second memory copy)
    assert (c0.config_dir / "data").is_dir() and not (c0.config_dir / "data" / "projects").exists()
    assert not list((tmp_path / "cells").rglob("0000-old-session.jsonl"))
    assert [p.relative_to(c0.config_dir) for p in c0.config_dir.rglob("MEMORY.md")] == [
        Path("projects") / c0.memory_slug / "memory" / "MEMORY.md"
    ]
    assert not list(c5.config_dir.rglob("MEMORY.md"))
    assert any("left out" in n and "data/projects" in n for n in c0.notes)


@pytest.mark.e2e
def test_a_hook_left_in_a_stripped_cell_is_a_leak(real: RealSetup, claude: Path) -> None:
    def keep_hooks(cenv: CellEnvironment, setup: Any) -> None:
        data = json.loads((setup.config_dir / "settings.json").read_text())
        (cenv.config_dir / "settings.json").write_text(json.dumps({"hooks": data["hooks"]}))

    def builder(*args: Any, **kwargs: Any) -> CellEnvironment:
        cenv = build_environment(*args, **kwargs)
        keep_hooks(cenv, args[0])
        return cenv

    setup = load_setup(real.config_dir, real.repo, home=real.home)
    cat = load_catalog()
    result = probe(
        setup, cat, load_cell_set("layered", cat), find_claude(claude), cell_ids=["C11"], builder=builder
    )
    (c11,) = result.cells
    assert c11.verdict == "leak"
    assert c11.layers["hooks"].status == "leak" and c11.layers["hooks"].expected == "absent"

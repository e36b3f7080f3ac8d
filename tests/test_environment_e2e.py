"""End to end: the real pinned ``claude`` CLI in every classic cell of the example setup, against ablate's
simulated endpoint. What reached the model (logged requests, transcript attachments) must match the cell,
hooks must fire only where kept, and the user's setup must be byte-identical afterwards."""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.fsutil import tree_hash, tree_listing
from ablate.core.proc import ExecResult, run_process
from ablate.core.slug import slug_for
from ablate.isolate.environment import (
    CellEnvironment,
    build_environment,
    reset_environment,
    teardown_environment,
)
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import git, materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import layer_imports, load_setup, resolve_layers
from ablate.sim import SimServer
from tests.run_folder import why

MODEL = "claude-sonnet-4-6"
#: Config-side layers of the example whose canary reaches the request when present (plus the repo CLAUDE.md).
LOADED = (
    "user-claude-md",
    "axioms",
    "lessons",
    "rules",
    "skills",
    "commands",
    "agents",
    "auto-memory",
    "hooks",
)
REPO_DOCS = ("repo-memory", "runbooks", "decisions", "findings", "handoffs-plans")
#: Layers that show up in the transcript's instructions / skill_listing attachments.
INSTRUCTIONS = ("user-claude-md", "axioms", "lessons", "rules", "auto-memory", "repo-claude-md")
LISTED = ("skills", "commands")


def canary(layer_id: str) -> str:
    return f"ablate-example {layer_id} "


def run_cell(claude: Path, env: CellEnvironment, session_id: str) -> ExecResult:
    argv = [
        str(claude),
        "-p",
        "--output-format",
        "json",
        "--model",
        MODEL,
        "--permission-mode",
        "bypassPermissions",
        "--max-turns",
        "2",
        "--session-id",
        session_id,
        "Say hi.",
    ]
    return run_process(argv, cwd=env.cwd, env=env.env, timeout=180)


def attachments(transcript: Path) -> dict[str, str]:
    """Text of the ``instructions`` and ``skill_listing`` attachment records."""
    out = {"instructions": "", "skill_listing": ""}
    with transcript.open("rb") as fh:
        for line in fh:
            rec: dict[str, Any] = orjson.loads(line)
            att = rec.get("attachment") if rec.get("type") == "attachment" else None
            if not isinstance(att, dict):
                continue
            if att.get("type") == "instructions":
                out["instructions"] += "\n".join(str(f.get("content", "")) for f in att.get("files", []))
            elif att.get("type") == "skill_listing":
                out["skill_listing"] += str(att.get("content", ""))
    return out


def docs_text(root: Path) -> str:
    parts: list[str] = []
    for dirpath, _dirs, files in os.walk(root):
        if ".git" in Path(dirpath).relative_to(root).parts:
            continue
        parts.extend((Path(dirpath) / f).read_text(errors="replace") for f in files if f != ".git")
    return "\n".join(parts)


@pytest.mark.e2e
def test_every_layered_cell_with_the_real_cli(claude: Path, tmp_path: Path) -> None:
    example = materialise_example(tmp_path / "ex")
    (example.home / ".bashrc").write_text("# shadow homes link this\n")
    setup = load_setup(example.config_dir, example.repo, home=example.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog).cells
    imports = layer_imports(setup, resolve_layers(setup, catalog))
    before = tree_hash(example.home), tree_hash(example.repo)
    sessions_log = (example.config_dir / "data" / "sessions.log").read_text()

    with SimServer(log_path=tmp_path / "sim.jsonl") as sim:
        base = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "ANTHROPIC_API_KEY": "sk-test",
            "ANTHROPIC_BASE_URL": sim.base_url,
            "CLAUDE_CODE_SIMPLE": "1",  # must be dropped, or the cells would not be faithful
        }
        t0 = time.monotonic()
        envs = [build_environment(setup, catalog, cell, tmp_path / "out", base_env=base) for cell in cells]
        build_s = time.monotonic() - t0
        fresh = {e.cell.id: (tree_listing(e.home), tree_listing(e.cwd, exclude=(".git",))) for e in envs}
        sids = {e.cell.id: str(uuid.uuid4()) for e in envs}
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = dict(
                zip(sids, pool.map(lambda e: run_cell(claude, e, sids[e.cell.id]), envs), strict=True)
            )
        run_s = time.monotonic() - t0
        requests = sim.messages_requests()

    failures: list[str] = []
    for env in envs:
        cid, sid = env.cell.id, sids[env.cell.id]
        res = results[cid]
        assert res.returncode == 0, why(cid, res.stderr_tail, res.stdout[:500])
        out = orjson.loads(res.stdout)
        assert out["is_error"] is False and out["session_id"] == sid
        text = "\n".join(r.text for r in requests if r.session_id == sid)
        assert text, f"{cid}: no request captured"
        assert "CLAUDE_CODE_SIMPLE" not in env.env
        stripped = set(env.cell.stripped)
        gone = stripped | {imp for lid in stripped for imp in imports.get(lid, [])}
        # what reached the model
        for lid in (*LOADED, "repo-claude-md"):
            if (canary(lid) in text) == (lid in gone):
                failures.append(f"{cid}: {lid} {'present' if lid in gone else 'missing'} in the request")
        # the transcript: found by session id, under the slug of the cwd, the cell's private checkout, ...
        (transcript,) = env.config_dir.glob(f"projects/*/{sid}.jsonl")
        assert transcript.parent.name == slug_for(env.cwd) == env.memory_slug
        att = attachments(transcript)
        for lid in INSTRUCTIONS:
            if (canary(lid) in att["instructions"]) == (lid in gone):
                failures.append(f"{cid}: {lid} wrong in the instructions attachment")
        for lid in LISTED:
            if (canary(lid) in att["skill_listing"]) == (lid in gone):
                failures.append(f"{cid}: {lid} wrong in the skill_listing attachment")
        # ... which is also its main worktree root, where auto-memory is read (docs/CLAUDE-CODE.md#memory-vs-transcript)
        assert f"{env.config_dir}/projects/{env.memory_slug}/memory/" in text
        assert setup.memory_slug != env.memory_slug
        # a private clone, not a linked worktree: no worktree notice the user's own sessions never see
        assert "This is a git worktree" not in text
        # repo docs are never auto-loaded: check the worktree's files
        docs = docs_text(env.cwd)
        for lid in REPO_DOCS:
            if (canary(lid) in docs) == (lid in stripped):
                failures.append(f"{cid}: repo layer {lid} wrong in the worktree")
        # the SessionStart hook ran in the shadow home only where hooks are kept
        log = env.config_dir / "data" / "sessions.log"
        fired = log.exists() and log.read_text().count("session start") > sessions_log.count("session start")
        if fired != (not env.cell.empty_config):
            failures.append(f"{cid}: hook fired={fired}")
    assert failures == []

    for env in envs:  # a reset cell is the freshly built one again
        reset_environment(env)
        assert (tree_listing(env.home), tree_listing(env.cwd, exclude=(".git",))) == fresh[env.cell.id], (
            env.cell.id
        )
    for env in envs:
        teardown_environment(env)
    assert (tree_hash(example.home), tree_hash(example.repo)) == before
    assert (example.config_dir / "data" / "sessions.log").read_text() == sessions_log
    assert git(example.repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(example.repo, "branch", "--format=%(refname:short)").split() == ["main"]
    print(f"\nbuilt 12 cells in {build_s:.1f}s; ran 12 sessions (3 at a time) in {run_s:.1f}s")

"""C0 is the user's repository, git included: the checkout carries the user's config, refs, stash, ``info/``
and hooks; layer files are hidden from ``git status`` only in the cells that strip them."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from ablate.core.claude import claude_argv, find_claude
from ablate.core.fsutil import tree_hash
from ablate.core.gitutil import git_env
from ablate.core.proc import run_process
from ablate.isolate.backend import BackendOptions
from ablate.isolate.detect import namespace_check
from ablate.isolate.environment import build_environment, reset_environment, retarget_environment
from ablate.isolate.registry import open_backend
from ablate.probe.probe import probe
from ablate.run.estimate import estimate_run, probe_capture
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import ExampleSetup
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup
from ablate.sim import SimServer, iter_requests, script_from_data
from tests.git_fidelity_support import GIT_STATE_COMMAND, ordinary_repo, real_git_state, real_status
from tests.helpers_cli import tool_output


@pytest.fixture
def repo(tmp_path: Path) -> ExampleSetup:
    return ordinary_repo(tmp_path / "ex")


def _sh(cwd: Path, command: str) -> str:
    env = {**git_env(), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    return subprocess.run(
        ["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout


def test_links_checkout_prints_the_users_git_state_and_keeps_the_sessions_to_itself(
    repo: ExampleSetup, tmp_path: Path
) -> None:
    setup = load_setup(repo.config_dir, repo.repo, home=repo.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog)
    real = real_git_state(repo)
    assert "Local Dev" in real and "origin\thttps://git.example.invalid" in real and "v1.0" in real
    assert "feature/login" in real and "wip: greeting tweak" in real
    before = tree_hash(repo.repo)
    env = build_environment(setup, catalog, cells.get("C0"), tmp_path / "out")
    assert real_git_state(repo, env.cwd) == real
    assert real_status(env.cwd) == real_status(repo.repo) == "?? docs/runbooks/rollback.md\n"
    # what a session does to git stays in the checkout, and a reset undoes it
    _sh(
        env.cwd,
        "git config user.name Session; git branch extra; git tag t2; git stash drop -q; "
        "git remote set-url origin https://elsewhere.invalid/x.git; git -c user.email=a@b commit -q "
        "--allow-empty -m session",
    )
    assert real_git_state(repo, env.cwd) != real
    assert tree_hash(repo.repo) == before and real_git_state(repo) == real
    reset_environment(env)
    assert real_git_state(repo, env.cwd) == real
    assert real_status(env.cwd) == real_status(repo.repo)
    # a cell that strips the runbooks hides them (no " D"), a cell retargeted back shows them again
    retarget_environment(env, setup, catalog, cells.get("C7"))
    assert not (env.cwd / "docs" / "runbooks").exists()
    assert real_status(env.cwd) == ""
    assert real_git_state(repo, env.cwd) == real
    retarget_environment(env, setup, catalog, cells.get("C0"))
    assert real_status(env.cwd) == real_status(repo.repo)
    assert tree_hash(repo.repo) == before


def test_a_stripped_cell_hides_only_its_own_layers(repo: ExampleSetup, tmp_path: Path) -> None:
    setup = load_setup(repo.config_dir, repo.repo, home=repo.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog)
    c11 = build_environment(setup, catalog, cells.get("C11"), tmp_path / "out")
    assert real_status(c11.cwd) == ""  # everything stripped, nothing named
    assert real_git_state(repo, c11.cwd) == real_git_state(repo)
    hidden = _sh(c11.cwd, "git ls-files -v | grep '^S' | cut -c3-").split()
    assert "docs/runbooks/deploy.md" in hidden and "app.py" not in hidden


def test_a_modified_tracked_layer_file_reads_as_in_the_users_repo(repo: ExampleSetup, tmp_path: Path) -> None:
    setup_file = repo.repo / "docs" / "runbooks" / "deploy.md"
    setup_file.write_text(setup_file.read_text() + "A live edit the user has not committed.\n")
    setup = load_setup(repo.config_dir, repo.repo, home=repo.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog)
    real = real_status(repo.repo)
    assert real == " M docs/runbooks/deploy.md\n?? docs/runbooks/rollback.md\n"
    env = build_environment(setup, catalog, cells.get("C0"), tmp_path / "out")
    assert real_status(env.cwd) == real
    retarget_environment(env, setup, catalog, cells.get("C7"))
    assert real_status(env.cwd) == ""  # stripped: no " D", no " M", no "??"
    retarget_environment(env, setup, catalog, cells.get("C0"))
    assert real_status(env.cwd) == real


# ---------------------------------------------------------------------------------------------------------
# end to end, with the real CLI against ablate.sim


def _git_script() -> Any:
    return script_from_data(
        {
            "default": {"text": "OK."},
            "rules": [
                {
                    "name": "git-state",
                    "where": "prompt",
                    "contains": ["GIT-STATE"],
                    "turn": 0,
                    "tool_use": [
                        {"name": "Bash", "input": {"command": GIT_STATE_COMMAND, "description": "git"}}
                    ],
                },
                {
                    "name": "done",
                    "where": "prompt",
                    "contains": ["GIT-STATE"],
                    "turn": {"min": 1},
                    "text": "ok",
                },
            ],
        }
    )


def _git_state_in(backend: Any, env: Any, claude: Path) -> str:
    sid = str(uuid.uuid4())
    argv = claude_argv(claude, prompt="GIT-STATE", model="claude-sonnet-4-6", session_id=sid, max_turns=3)
    res = run_process(backend.command(env, argv), cwd=env.cwd, env=env.env, timeout=120)
    assert res.returncode == 0, res.stderr_tail
    found = sorted(env.config_dir.glob(f"projects/*/{sid}.jsonl"))
    assert found, "no transcript"
    return tool_output(found[0])


@pytest.mark.e2e
@pytest.mark.parametrize("isolation", ["namespace", "links"])
def test_sessions_see_the_users_git_state_in_c0_and_c11(
    repo: ExampleSetup, claude: Path, tmp_path: Path, isolation: str
) -> None:
    if isolation == "namespace" and not namespace_check().ok:
        pytest.skip(f"namespace backend unavailable: {namespace_check().reason}")
    setup = load_setup(repo.config_dir, repo.repo, home=repo.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog)
    real = real_git_state(repo)
    before = tree_hash(repo.home), tree_hash(repo.repo)
    with SimServer(_git_script()) as sim:
        base_env = {
            "PATH": os.environ["PATH"],
            "SHELL": "/bin/bash",
            "IS_SANDBOX": "1",
            "ANTHROPIC_BASE_URL": sim.base_url,
            "ANTHROPIC_API_KEY": "sk-test",
        }
        backend = open_backend(
            isolation, setup, catalog, tmp_path / "work", BackendOptions(base_env=base_env)
        )
        env = backend.build(cells.get("C0"), 0)
        try:
            said = {"C0": _git_state_in(backend, env, claude)}
            backend.retarget(env, cells.get("C11"))
            said["C11"] = _git_state_in(backend, env, claude)
        finally:
            backend.teardown(env)
            getattr(backend, "close", lambda: None)()
    for cell, output in said.items():
        assert output.strip() == real.strip(), (cell, output, real)
    assert (tree_hash(repo.home), tree_hash(repo.repo)) == before


@pytest.mark.e2e
@pytest.mark.parametrize("isolation", ["namespace", "links"])
def test_probe_is_faithful_with_nothing_about_git_ignored(
    repo: ExampleSetup, claude: Path, tmp_path: Path, isolation: str
) -> None:
    """The untracked runbook is the only uncommitted file (the shape of a real published setup whose C0
    lacked it): the untouched session and C0 both show it, exactly as ``git status`` in the real repo."""
    setup = load_setup(repo.config_dir, repo.repo, home=repo.home)
    catalog = load_catalog()
    work = tmp_path / "probe"
    if isolation == "namespace" and not namespace_check().ok:
        pytest.skip(f"namespace backend unavailable: {namespace_check().reason}")
    result = probe(
        setup,
        catalog,
        load_cell_set("layered", catalog),
        find_claude(claude),
        work=work,
        cell_ids=["C0", "C11"],
        isolation=isolation,
    )
    fidelity = result.fidelity
    assert fidelity["checked"] and fidelity["equal"], fidelity
    assert result.isolation["backend"] == isolation
    # links compares at other paths (normalised); neither backend ignores anything about git
    assert not any("git" in what for what in fidelity["ignored"]), fidelity["ignored"]
    assert {c.id: c.verdict for c in result.cells} == {"C0": "faithful", "C11": "faithful"}
    assert result.real_setup_unchanged
    assert real_status(repo.repo) == "?? docs/runbooks/rollback.md\n"
    statuses = [
        t.split("Status:\\n", 1)[1].split("\\n\\n", 1)[0]
        for t in (json.dumps(r.body) for r in iter_requests(work / "requests.jsonl") if r.is_messages)
        if "Status:\\n" in t and "Git user: Local Dev" in t
    ]
    # the untouched session and C0 show the runbook; C11 (strips it) shows a clean tree
    assert statuses.count("?? docs/runbooks/rollback.md") >= 2, statuses
    assert "(clean)" in statuses, statuses
    # the probe's capture measures what this setup sends: the cost estimate rests on it
    seen = probe_capture([work], setup.head)
    assert seen is not None and min(seen[1]) > 20_000  # characters of a real Claude Code request
    assert estimate_run(12, model="claude-sonnet-4-6", max_turns=30, probe=seen).basis == "probe"

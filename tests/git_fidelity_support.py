"""An ordinary repository as a user has it: its own git identity over a global one, an ``origin`` URL, a
second branch, a tag, a stash, and an untracked runbook as the only uncommitted file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ablate.core.gitutil import git_env
from ablate.setup.examples import ExampleSetup, git, materialise_example

#: What a session runs to see the repository's git state (the issue's five commands).
GIT_STATE_COMMAND = "git config user.name; git remote -v; git branch; git tag; git stash list"


def ordinary_repo(dest: Path) -> ExampleSetup:
    ex = materialise_example(dest)
    (ex.home / ".gitconfig").write_text("[user]\n\tname = Global Person\n\temail = global@example.invalid\n")
    repo = ex.repo
    git(repo, "config", "user.name", "Local Dev")
    git(repo, "config", "user.email", "local@example.invalid")
    git(repo, "remote", "add", "origin", "https://git.example.invalid/team/greeter.git")
    git(repo, "config", "branch.main.remote", "origin")
    git(repo, "config", "branch.main.merge", "refs/heads/main")
    git(repo, "branch", "feature/login")
    git(repo, "tag", "v1.0")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    app = repo / "app.py"
    kept = app.read_text()
    app.write_text(kept + "# work in progress\n")
    git(repo, "stash", "push", "-q", "-m", "wip: greeting tweak")
    assert app.read_text() == kept
    return ex


def real_git_state(ex: ExampleSetup, cwd: Path | None = None) -> str:
    """What the five commands print in ``cwd`` (default: the real repository) for the example's user."""
    env = {**git_env(), "HOME": str(ex.home), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    env.pop("GIT_CONFIG_GLOBAL", None)
    out = subprocess.run(
        ["sh", "-c", GIT_STATE_COMMAND],
        cwd=cwd or ex.repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def real_status(repo: Path) -> str:
    env = {**git_env(), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout

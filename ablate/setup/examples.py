"""The bundled example setup (examples/setup/), laid out by ``materialise_example`` as a fake home plus a git
repository, so the demo and the tests run ablate against every layer without touching a real setup."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from ablate.core.gitutil import git_env
from ablate.core.resources import data_dir
from ablate.core.slug import slug_for

CONFIG_PLACEHOLDER = "@@CONFIG_DIR@@"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "ablate example",
    "GIT_AUTHOR_EMAIL": "example@ablate.invalid",
    "GIT_COMMITTER_NAME": "ablate example",
    "GIT_COMMITTER_EMAIL": "example@ablate.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


@dataclass(frozen=True)
class ExampleSetup:
    home: Path
    """The fake home; ``home/.claude`` is the config dir."""
    config_dir: Path
    repo: Path


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity and no user/system config."""
    env = {**git_env(), **_GIT_ENV}  # GIT_DIR & co. scrubbed: the commit must land in ``repo``
    out = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True)
    return out.stdout


def materialise_example(dest: Path, *, history_bytes: int = 4096, repo_name: str = "greeter") -> ExampleSetup:
    """Create the example setup under ``dest`` (which must not exist or be empty) and return its paths."""
    src = data_dir("examples") / "setup"
    home = dest / "home"
    config = home / ".claude"
    repo = dest / "work" / repo_name
    home.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src / "claude", config, ignore=shutil.ignore_patterns("MEMORY.auto.md", ".claude.json"))
    shutil.copy2(src / "claude" / ".claude.json", home / ".claude.json")
    settings = config / "settings.json"
    settings.write_text(settings.read_text().replace(CONFIG_PLACEHOLDER, str(config)))
    for script in (config / "hooks").glob("*.py"):
        script.chmod(0o755)
    (config / ".credentials.json").chmod(0o600)

    shutil.copytree(src / "repo", repo, ignore=shutil.ignore_patterns("gitignore"))
    shutil.copy2(src / "repo" / "gitignore", repo / ".gitignore")
    git(repo, "init", "-q", "-b", "main")
    # First commit: code only; second: the knowledge layers (MEMORY.md stays ignored, one runbook untracked).
    git(repo, "add", ".gitignore", "README.md", "app.py", "test_app.py")
    git(repo, "commit", "-q", "-m", "Initial greeter")
    untracked = repo / "docs" / "runbooks" / "rollback.md"
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Add project knowledge")
    untracked.write_text("# Rollback runbook\n\nRun `./deploy --rollback`. (untracked)\n")

    project = config / "projects" / slug_for(repo)
    memory = project / "memory"
    memory.mkdir(parents=True)
    shutil.copy2(src / "claude" / "MEMORY.auto.md", memory / "MEMORY.md")
    if history_bytes:
        line = b'{"type":"user","message":{"role":"user","content":"old session"}}\n'
        with (project / f"{uuid.UUID(int=1)}.jsonl").open("wb") as fh:
            fh.write(line * max(1, history_bytes // len(line)))
    return ExampleSetup(home=home, config_dir=config, repo=repo)

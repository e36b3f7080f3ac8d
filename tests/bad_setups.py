"""The unusable setups every command that reads a setup must reject with exit 2 and a hint."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ablate.setup.examples import ExampleSetup, git

#: case → what the error message must say
BAD_SETUPS = {
    "missing-config": "config dir does not exist",
    "missing-repo": "repository does not exist",
    "not-git": "not a git repository",
    "bare": "bare repository",
    "no-commits": "no commits",
    "subfolder": "not the top of the work tree",
}


def bad_setup(case: str, example: ExampleSetup, tmp_path: Path) -> tuple[Path, Path]:
    """(config dir, repo) for ``case``: the example setup with one thing made wrong."""
    cfg, repo = example.config_dir, example.repo
    if case == "missing-config":
        cfg = tmp_path / "nope"
    elif case == "missing-repo":
        repo = tmp_path / "nope"
    elif case == "not-git":
        repo = tmp_path / "plain"
        repo.mkdir()
    elif case == "bare":
        repo = tmp_path / "bare.git"
        subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    elif case == "no-commits":
        repo = tmp_path / "empty"
        repo.mkdir()
        git(repo, "init", "-q")
    elif case == "subfolder":
        repo = example.repo / "docs"
    else:
        raise ValueError(case)
    return cfg, repo

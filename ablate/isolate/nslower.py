"""The ``namespace`` backend's lower layers, built once per run: the pristine checkout every cell's repository
view starts from, and each cell's repo layer over it (:mod:`ablate.isolate.cowlayer`)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.core.errors import AblateError
from ablate.core.fsutil import atomic_write_json
from ablate.core.gitutil import run_git
from ablate.isolate import shadowfs, worktree
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup


def objects_dir(repo: Path) -> Path:
    """The user's object store (the common dir's, for a linked worktree)."""
    out = run_git(repo, "rev-parse", "--path-format=absolute", "--git-path", "objects").stdout.strip()
    return Path(out)


@dataclass
class RepoLower:
    """The run's pristine checkout: the lower layer of every cell's repository view."""

    path: Path
    pristine: Path
    """Snapshots of live layer files and variants (the sources of the cells' worktree operations)."""
    objects: Path
    branch: str | None
    plan: worktree.RepoPlan
    hidden: list[str] = field(default_factory=list)
    """Repo-layer paths marked skip-worktree or excluded, so `git status` looks alike in every cell."""


def build_repo_lower(setup: Setup, catalog: Catalog, dest: Path, *, dirty: bool) -> RepoLower:
    """A private clone of HEAD on a branch named like the user's, with every repo-layer path hidden from
    ``git status`` (tracked ones skip-worktree, untracked ones in ``.git/info/exclude``)."""
    plan = worktree.plan_repo(setup, catalog, dirty=dirty)
    checkout = dest / "repo"
    pristine = dest / "pristine"
    pristine.mkdir(parents=True)
    run_git(dest, "clone", "--shared", "--no-checkout", "--quiet", str(setup.repo), str(checkout))
    run_git(checkout, "remote", "remove", "origin")
    branch = worktree.current_branch(setup.repo)
    if branch:
        run_git(checkout, "checkout", "--quiet", "-B", branch, setup.head)
    else:
        run_git(checkout, "checkout", "--quiet", "--detach", setup.head)
    hidden = worktree.hide_layer_paths(checkout, setup, plan)
    # objects come from an overlay of the user's store at <repo>/.git/objects: no alternates path to write to
    (checkout / ".git" / "objects" / "info" / "alternates").unlink(missing_ok=True)
    return RepoLower(checkout, pristine, objects_dir(setup.repo), branch, plan, hidden)


def build_repo_layers(items: list[dict[str, Any]], spec_path: Path) -> None:
    """Run :mod:`ablate.isolate.cowlayer` on ``items`` (one subprocess, one private mount namespace)."""
    for item in items:
        for key in ("upper", "work", "mnt"):
            Path(item[key]).mkdir(parents=True, exist_ok=True)
    atomic_write_json(spec_path, {"layers": items})
    proc = subprocess.run(
        [sys.executable, "-m", "ablate.isolate.cowlayer", str(spec_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise AblateError(
            f"building a cell's repo layer failed: {(proc.stderr or proc.stdout).strip()[-500:]}"
        )
    for item in items:
        for key in ("work", "mnt"):
            shadowfs.remove_path(Path(item[key]))

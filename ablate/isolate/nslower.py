"""The ``namespace`` backend's lower layers, built once per run: the pristine checkout every cell's repository
view starts from, and each cell's repo layer over it (:mod:`ablate.isolate.cowlayer`)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.core.errors import AblateError
from ablate.core.fsutil import atomic_write_json
from ablate.isolate import checkout_cache, shadowfs, worktree
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup


@dataclass
class RepoLower:
    """The run's pristine checkout: the lower layer of every cell's repository view."""

    path: Path
    pristine: Path
    """Snapshots of live layer files and variants (the sources of the cells' worktree operations)."""
    objects: Path
    branch: str | None
    plan: worktree.RepoPlan


def build_repo_lower(setup: Setup, catalog: Catalog, dest: Path, *, dirty: bool) -> RepoLower:
    """The (cached) checkout of HEAD, and the folder of snapshots the cells' worktree operations read."""
    plan = worktree.plan_repo(setup, catalog, dirty=dirty)
    pristine = dest / "pristine"
    pristine.mkdir(parents=True)
    # objects come from an overlay of the user's store at <repo>/.git/objects: no alternates path to write to;
    # the checkout itself is reused across runs while nothing it is made of changed
    checkout, _ = checkout_cache.cached_checkout(setup)
    branch = worktree.current_branch(setup.repo)
    # repo-layer files are hidden per cell, only by the cells that strip them (the control hides nothing)
    return RepoLower(checkout, pristine, worktree.objects_dir(setup.repo), branch, plan)


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

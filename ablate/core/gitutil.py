"""Running git on the user's repository without changing it: no hooks, no optional locks (so the index is
never refreshed in place), no inherited variables pointing git elsewhere."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ablate.core.errors import AblateError

#: Variables that would point git at another repository or index.
_GIT_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)


def run_git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git without the user's hooks, optional locks (no index refresh) or inherited repo variables."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_VARS}
    env.update(LC_ALL="C", GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        raise AblateError(
            f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def live_changes(repo: Path) -> list[str]:
    """Paths with uncommitted changes (tracked, renamed from/to, untracked; not ignored), exactly spelled."""
    out = run_git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all").stdout
    tokens = out.split("\0")
    paths: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if len(tok) < 4:
            continue
        status, path = tok[:2], tok[3:]
        paths.append(path)
        if "R" in status or "C" in status:
            paths.append(tokens[i])  # the original path follows a rename or copy
            i += 1
    return sorted(set(paths))

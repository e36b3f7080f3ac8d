"""Running git on the user's repository without changing it: no hooks, no optional locks (so the index is
never refreshed in place), no inherited variables pointing git elsewhere."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ablate.core.errors import AblateError

#: Variables that would point git at another repository, index or config (docs/ARCHITECTURE.md#process-env).
GIT_REPO_VARS = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_QUARANTINE_PATH", "GIT_REPLACE_REF_BASE", "GIT_SHALLOW_FILE", "GIT_GRAFT_FILE",
)  # fmt: skip


def git_env(base_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base_env`` (default: this process's) without the variables that point git elsewhere: with ``GIT_DIR``
    exported, a commit ablate makes in a folder of its own would land in the user's repository."""
    env = os.environ if base_env is None else base_env
    return {
        k: v
        for k, v in env.items()
        if k not in GIT_REPO_VARS
        and not k.startswith("GIT_CONFIG_KEY_")
        and not k.startswith("GIT_CONFIG_VALUE_")
    }


def run_git(
    cwd: Path, *args: str, check: bool = True, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run git without the user's hooks, optional locks or inherited repo variables; ``input``: its stdin."""
    env = git_env()
    env.update(LC_ALL="C", GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
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

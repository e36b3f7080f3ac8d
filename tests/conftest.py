"""Shared fixtures. Every test runs with a temporary HOME: a test that could touch the real ~/.claude is a bug."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.user_support import User, make_user

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """End-to-end tests first (file order kept within each group): with the suite spread over processes, the
    long real-CLI tests start early and the quick ones fill in at the end, instead of one long test left
    running alone."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and every Claude/ablate variable at a fresh temporary home for each test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var in list(os.environ):
        if var.startswith(("CLAUDE_", "ANTHROPIC_")) or (
            var.startswith("ABLATE_") and var != "ABLATE_CLAUDE_BIN"
        ):
            monkeypatch.delenv(var, raising=False)
    # ablate's own cache (pristine checkouts reused across runs), fresh for each test
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(tmp_path_factory.mktemp("ablate-cache")))
    # no report after a run unless the test asks for one (`--report now`, or `ablate report DIR`): it costs
    # seconds of CPU per run, and a detached one (the default) would outlive its test's folder
    monkeypatch.setenv("ABLATE_REPORT", "none")
    return home


def claude_bin() -> Path | None:
    """The pinned CLI installed by `make` (or $ABLATE_CLAUDE_BIN), or None."""
    env = os.environ.get("ABLATE_CLAUDE_BIN")
    if env and Path(env).exists():
        return Path(env)
    local = REPO_ROOT / ".cache/claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
    if local.exists():
        return local
    found = shutil.which("claude")
    return Path(found) if found else None


@pytest.fixture
def claude() -> Path:
    """The real pinned Claude Code binary; end-to-end tests fail (not skip) in CI when it is missing."""
    path = claude_bin()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("the pinned claude CLI is not installed; run `make claude`")
        pytest.skip("claude CLI not installed (run `make claude`)")
    return path


@pytest.fixture(scope="module")
def ordinary_user() -> Iterator[User]:
    """An unprivileged account for the tests that run ablate as one (:func:`tests.user_support.make_user`)."""
    with make_user() as user:
        if user is None:
            pytest.skip("no ordinary user can be had here (root without useradd/setpriv)")
        yield user

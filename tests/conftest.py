"""Shared fixtures. Every test runs with a temporary HOME: a test that could touch the real ~/.claude is a bug."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.user_support import User, make_user, user_venv

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


#: The files whose tests run longest (from `make test`'s --durations), longest first: they start first.
LONGEST = (
    "test_demo.py",
    "test_piece_run_e2e.py",
    "test_k8s_e2e.py",
    "test_compare_adaptive.py",
    "test_adaptive_e2e.py",
    "test_one_path_e2e.py",
    "test_package.py",
    "test_runner_e2e.py",
    "test_compare_e2e.py",
    "test_isolation_user.py",
)


def _start(item: pytest.Item) -> tuple[bool, int]:
    name = item.path.name
    return item.get_closest_marker("e2e") is None, LONGEST.index(name) if name in LONGEST else len(LONGEST)


def pytest_configure(config: pytest.Config) -> None:
    """The tests' environment, set in the controlling process before pytest-xdist starts its workers, so they
    and every process they start inherit it.

    OpenBLAS starts a thread per core in every process that loads numpy; beside pytest's four workers on two
    cores they only contend (the screening, design and piece-run tests: 49.1 → 42.3 CPU-s, measured). And
    sessions' hooks call ``python3`` from ``PATH`` (the example setup's on every tool call): where that is a
    shell-script shim rather than an interpreter (pyenv's: ~0.13 CPU-s a call against ~0.02 s, measured), the
    system Python goes first on the tests' ``PATH``: the shim alone was 12% of an end-to-end run's CPU."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # pytest's own temporary folders (no --basetemp) under /var/tmp, as `make test`'s: under /tmp, a root test's
    # views mounted there would leave an ordinary-user test's sessions an empty /tmp (a user namespace cannot
    # show a /tmp with a mount below it), hiding the files that test put there
    if Path("/var/tmp").is_dir():
        os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", "/var/tmp")
    found, system = shutil.which("python3"), Path("/usr/bin/python3")
    if found is None or not system.is_file():
        return
    with open(found, "rb") as fh:
        if fh.read(2) != b"#!":
            return
    direct = REPO_ROOT / ".cache" / "python3-direct"
    direct.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # another pytest made it first
        (direct / "python3").symlink_to(system)
    os.environ["PATH"] = f"{direct}{os.pathsep}{os.environ.get('PATH', '')}"


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (scipy, pydantic models, every test module) is frozen out of the collector's
    walks: each full collection in a worker, and pytest's own at its end, then visits only what tests made
    (a worker's collector time on ~125 unit tests: 0.9 → 0.6 CPU-s, measured with ``gc.callbacks``)."""
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """End-to-end tests first, the longest files among them first (file order kept otherwise): with the suite
    spread over processes, the long real-CLI tests start early and the quick ones fill in at the end, instead
    of one long test left running alone."""
    items.sort(key=_start)


def built_once(tmp_path_factory: pytest.TempPathFactory, key: str, build: Callable[[Path], None]) -> Path:
    """A folder ``build`` fills once per test session, whatever process asks first: the suite runs its tests
    one at a time over pytest-xdist processes (``--dist load``), so a module fixture alone would run once in
    every process that gets one of its tests. The others wait on the lock and read what the first built."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / f"built-{key}"
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"built-{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / ".built").exists():
            shutil.rmtree(root, ignore_errors=True)  # a build that failed in another process: again
            root.mkdir()
            build(root)
            (root / ".built").touch()
    return root


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and every Claude/ablate variable at a fresh temporary home for each test."""
    return isolate_env(monkeypatch, tmp_path_factory)


def isolate_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What :func:`isolated_home` does for each test; a module fixture, which runs before it, calls it inside
    ``pytest.MonkeyPatch.context()`` for its shared run."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var in list(os.environ):
        if var.startswith(("CLAUDE_", "ANTHROPIC_")) or (
            var.startswith("ABLATE_") and var != "ABLATE_CLAUDE_BIN"
        ):
            monkeypatch.delenv(var, raising=False)
    # the XDG folders of whoever runs the tests: a command whose ABLATE_CACHE_DIR a test drops falls back to
    # $XDG_CACHE_HOME/ablate, which would be their real cache (and one all tests share)
    for var in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(var, raising=False)
    # ablate's own cache (pristine checkouts reused across runs), fresh for each test, but for the pinned
    # CLI's identity: hashing its 400 MB binary costs each test's first command ~0.4 CPU-s
    cache = tmp_path_factory.mktemp("ablate-cache")
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(cache))
    identity = claude_identity(tmp_path_factory)
    if identity is not None:
        shutil.copyfile(identity, cache / identity.name)
    # no report after a run unless the test asks for one (`--report now`, or `ablate report DIR`): it costs
    # seconds of CPU per run, and a detached one (the default) would outlive its test's folder
    monkeypatch.setenv("ABLATE_REPORT", "none")
    # no probe before a run unless the test asks for one (`--probe`): one more CLI start per cell and run
    monkeypatch.setenv("ABLATE_PROBE", "0")
    return home


def claude_identity(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """ablate's remembered identity of the pinned CLI (``claude-identity.json``, its version and sha256 by its
    stat), made once per test session by ``find_claude`` in a process of its own; None without the CLI. A test
    about the identity cache uses a binary of its own; one that counts the ``--version`` start runs with a home
    of its own, whose cache starts empty."""
    binary = claude_bin()
    if binary is None:
        return None

    def remember(root: Path) -> None:
        root.chmod(0o700)
        code = "from ablate.core.claude import find_claude; find_claude()"
        env = {**os.environ, "ABLATE_CACHE_DIR": str(root), "ABLATE_CLAUDE_BIN": str(binary)}
        subprocess.run([sys.executable, "-c", code], env=env, check=True)

    return built_once(tmp_path_factory, "claude-identity", remember) / "claude-identity.json"


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


@pytest.fixture(scope="session")
def claude() -> Path:
    """The real pinned Claude Code binary; end-to-end tests fail (not skip) in CI when it is missing (session
    scoped: a module fixture may share one expensive run among its tests)."""
    path = claude_bin()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("the pinned claude CLI is not installed; run `make claude`")
        pytest.skip("claude CLI not installed (run `make claude`)")
    return path


@pytest.fixture(scope="session")
def ordinary_user() -> Iterator[User]:
    """An unprivileged account the isolation tests run ablate as (tests/user_support.py)."""
    with make_user() as user:
        if user is None:
            pytest.skip("no ordinary user can be had here (root without useradd/setpriv)")
        yield user


@pytest.fixture(scope="session")
def installed(ordinary_user: User, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a venv where ablate is installed for :func:`ordinary_user`, as a user installs it:
    built once per test session, whichever pytest process asks first (a venv and a pip install, ~10 CPU-s,
    were built in every process)."""
    if not Path("/usr/bin/python3").is_file():
        pytest.skip("no system Python at /usr/bin/python3")

    def build(root: Path) -> None:
        root.chmod(0o755)
        # pytest's folders are private to root (``--basetemp``, or its own ``pytest-of-root/pytest-N``): the
        # user may only pass through
        for folder in (root.parent, root.parent.parent):
            if folder == root.parent or folder.name.startswith("pytest-of-"):
                folder.chmod(0o711)
        user_venv(root / "venv")

    return built_once(tmp_path_factory, "user-venv", build) / "venv" / "bin"

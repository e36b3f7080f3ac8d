"""The set-up steps explain themselves. `make claude`: npm's errors are shown (quiet on success), the user's
global npmrc is honoured (npm derives it from --prefix otherwise), and a failed step says what failed; a fake
`npm` on PATH plays the registry. `make venv` and the apt-get steps say which step failed too."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_NPM = """#!/bin/sh
echo "$@" >> "{log}"
case "$1 $2 $3" in
  "config get globalconfig") echo /etc/site-npmrc; exit 0 ;;
  "config get registry") echo https://registry.example.test/; exit 0 ;;
esac
if [ "{mode}" = fail ]; then
  echo "npm error code E404" >&2
  echo "npm error 404 Not Found - GET https://registry.example.test/@anthropic-ai%2fclaude-code" >&2
  exit 1
fi
while [ $# -gt 0 ]; do
  if [ "$1" = --prefix ]; then prefix="$2"; fi
  shift
done
bin="$prefix/node_modules/@anthropic-ai/claude-code-linux-x64"
mkdir -p "$bin"
printf '#!/bin/sh\\necho "2.1.332 (Claude Code)"\\n' > "$bin/claude"
chmod +x "$bin/claude"
echo "added 2 packages in 3s"
"""


def _make(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    if shutil.which("make") is None:
        pytest.skip("no make")
    work = tmp_path / mode
    (work / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", work / "Makefile")
    log = work / "npm-calls.log"
    npm = work / "bin" / "npm"
    npm.write_text(FAKE_NPM.format(log=log, mode=mode))
    npm.chmod(0o755)
    env = {**os.environ, "PATH": f"{work / 'bin'}:{os.environ['PATH']}"}
    env.pop("ABLATE_CLAUDE_BIN", None)
    for var in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS"):  # run from `make test`: a sub-make prints its directory
        env.pop(var, None)
    proc = subprocess.run(["make", "claude"], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    return proc, log.read_text().splitlines() if log.exists() else []


def test_a_failed_npm_install_shows_npms_error_and_says_what_failed(tmp_path: Path) -> None:
    proc, calls = _make(tmp_path, "fail")
    assert proc.returncode != 0
    assert "npm error code E404" in proc.stderr and "404 Not Found" in proc.stderr
    assert "make claude: npm install @anthropic-ai/claude-code@2.1.332 failed" in proc.stderr
    assert "registry: https://registry.example.test/" in proc.stderr
    (install,) = [c for c in calls if c.startswith("install")]
    assert "--globalconfig /etc/site-npmrc" in install  # the user's global npmrc (cafile, registry) kept


def test_a_successful_install_is_quiet(tmp_path: Path) -> None:
    proc, _calls = _make(tmp_path, "ok")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "added 2 packages" not in proc.stdout  # npm's chatter stays in the log
    assert proc.stdout.strip().splitlines() == [
        "installing @anthropic-ai/claude-code@2.1.332 into .cache/claude (npm; log: .cache/claude/npm.log)"
    ]


@pytest.mark.parametrize(
    ("target", "fake", "said"),
    [
        (
            "venv",
            "PY",
            "make venv: 'false -m venv .venv' failed: Python >= 3.11 with its venv module is needed",
        ),
        ("bubblewrap", "apt-get", "make bubblewrap: apt-get install bubblewrap failed"),
        ("sysdeps", "apt-get", "make sysdeps: apt-get install chromium bubblewrap tmux screen"),
    ],
)
def test_a_failed_venv_or_package_step_says_which_it_was(
    tmp_path: Path, target: str, fake: str, said: str
) -> None:
    """The other set-up steps name themselves on failure too: a Python without venv, an apt-get that cannot
    install (no bwrap on PATH, an apt-get that fails)."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    (tmp_path / "bin").mkdir()
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("")  # what the venv rule depends on
    for tool in ("apt-get", "sudo"):  # root or not: both fail like a machine without a package source
        (tmp_path / "bin" / tool).write_text("#!/bin/sh\necho 'E: Unable to locate package' >&2\nexit 100\n")
        (tmp_path / "bin" / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    if fake == "apt-get":  # only the fakes on PATH: `command -v bwrap` finds nothing (recipes run /bin/sh)
        env["PATH"] = str(tmp_path / "bin")
    make = shutil.which("make") or "make"
    argv = [make, target, *(["PY=false"] if fake == "PY" else [])]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert said in proc.stderr, proc.stderr


@pytest.mark.parametrize("target", ["demo", "examples", "test", "e2e"])
def test_every_target_that_runs_sessions_installs_bubblewrap(target: str) -> None:
    """Without bubblewrap ablate refuses to run sessions (they could not be sealed): a target that runs them
    installs it first, as `make test` does."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    proc = subprocess.run(
        ["make", "-n", "-p", "-f", str(ROOT / "Makefile"), "--no-builtin-rules", "venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")},
    )
    (rule,) = [line for line in proc.stdout.splitlines() if line.startswith(f"{target}:")]
    needs = rule.split(":", 1)[1].split()
    # sysdeps installs every system package the tests need in one apt-get, bubblewrap among them
    (sysdeps,) = [line for line in proc.stdout.splitlines() if line.startswith("SYSDEPS :=")]
    assert "bubblewrap" in needs or ("sysdeps" in needs and "bwrap:bubblewrap" in sysdeps.split()), rule

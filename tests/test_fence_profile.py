"""The macOS fence's Seatbelt profile, checked rule by rule against the one Anthropic's sandbox runtime
generates for the same writable paths (``tests/data/sandbox_runtime_profile.sb``, its output for a ``links``
cell at ``/Users/me/work/s00``). ``sandbox-exec`` runs only on macOS: both profiles are evaluated here by a
small reading of the profile language (a rule's operations and filters; the last matching rule decides, as
both profiles rely on), not by the kernel."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from ablate.isolate.fence import sandbox_profile

DATA = Path(__file__).resolve().parent / "data"
CELL = "/Users/me/work/s00"
CREDS = "/Users/me/.claude/.credentials.json"
CHECKOUT = f"{CELL}/wt/greeter"
_TOKEN = re.compile(r'\(|\)|#?"(?:[^"\\]|\\.)*"|[^\s()]+|;[^\n]*')


@dataclass(frozen=True)
class Rule:
    action: str
    operations: tuple[str, ...]
    filters: tuple[list[object], ...]
    """Each a filter form: ``[kind, ("str", argument)]``, or ``require-all``/``require-any`` of filters."""


def _forms(text: str) -> list[object]:
    stack: list[list[object]] = [[]]
    for token in _TOKEN.findall(text):
        if token.startswith(";"):
            continue
        if token == "(":
            stack.append([])
        elif token == ")":
            done = stack.pop()
            stack[-1].append(done)
        elif token.startswith(('#"', '"')):
            stack[-1].append(("str", json.loads(token.lstrip("#"))))
        else:
            stack[-1].append(token)
    assert len(stack) == 1, "unbalanced profile"
    return stack[0]


def rules(profile: str) -> list[Rule]:
    """The profile's allow/deny rules: operations, and filters (``with message`` left out)."""
    out = []
    for form in _forms(profile):
        if not isinstance(form, list) or form[0] not in ("allow", "deny"):
            continue
        ops = tuple(x for x in form[1:] if isinstance(x, str))
        filters = tuple(f for f in form[1:] if isinstance(f, list) and f[0] != "with")
        out.append(Rule(str(form[0]), ops, filters))
    return out


def _matches(flt: list[object], target: str) -> bool:
    kind, args = flt[0], flt[1:]
    if kind == "require-all":
        return all(_matches(f, target) for f in args if isinstance(f, list))
    if kind == "require-any":
        return any(_matches(f, target) for f in args if isinstance(f, list))
    if kind == "vnode-type":  # only beside (literal "/dev/null"): that is a character device
        return True
    arg = str(args[0][1]) if args and isinstance(args[0], tuple) else None
    if arg is None:
        return False  # (target same-sandbox), (local ip ...): not a path or a service name
    if kind == "subpath":
        return target == arg or target.startswith(arg.rstrip("/") + "/")
    if kind in ("literal", "global-name"):
        return target == arg
    if kind == "regex":
        return re.search(arg, target) is not None
    return False


def allowed(profile: str, operation: str, target: str) -> bool:
    """Whether ``operation`` on ``target`` (a path, a mach service) is allowed: the last rule whose
    operation covers it (``file-write*`` covers ``file-write-data``) and one of whose filters matches it (a
    rule with no filter matches everything) decides; ``default`` where none does."""
    decision = False
    for rule in rules(profile):
        covers = any(
            op in ("default", operation) or (op.endswith("*") and operation.startswith(op[:-1]))
            for op in rule.operations
        )
        if covers and (not rule.filters or any(_matches(f, target) for f in rule.filters)):
            decision = rule.action == "allow"
    return decision


@pytest.fixture(scope="module")
def theirs() -> str:
    return (DATA / "sandbox_runtime_profile.sb").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def ours() -> str:
    return sandbox_profile([Path(CELL), Path(CREDS)])


OUTSIDE = [
    "/Users/me/.gitconfig",
    "/Users/me/.bashrc",
    "/Users/me/x",
    "/Users/me/.config/app/state",
    "/Users/me/.claude/settings.json",  # the real config dir beside the login
    "/Users/me/src/repo/README.md",
    "/etc/hosts",
    "/tmp/x",
    "/private/tmp/x",
    f"{CELL}-other/x",  # a sibling whose name starts like the cell's
]
INSIDE = [f"{CELL}/home/.claude/projects/-x/s.jsonl", f"{CELL}/tmp/x", f"{CHECKOUT}/app.py", CREDS]
DEVICES = ["/dev/stdout", "/dev/stderr", "/dev/null", "/dev/tty", "/dev/dtracehelper", "/dev/autofs_nowait"]


@pytest.mark.parametrize("path", OUTSIDE)
def test_both_refuse_writes_outside_the_cell(ours: str, theirs: str, path: str) -> None:
    assert not allowed(theirs, "file-write-data", path)
    assert not allowed(ours, "file-write-data", path)
    assert not allowed(ours, "file-write-create", path)


@pytest.mark.parametrize("path", INSIDE + DEVICES)
def test_both_allow_the_cell_the_login_and_the_devices_they_list(ours: str, theirs: str, path: str) -> None:
    assert allowed(theirs, "file-write-data", path)
    assert allowed(ours, "file-write-data", path)


@pytest.mark.parametrize(
    ("operation", "target"),
    [
        ("file-read-data", "/Users/me/.gitconfig"),
        ("file-read-data", "/etc/hosts"),
        ("process-exec", "/bin/sh"),
        ("process-fork", ""),
        ("mach-lookup", "com.apple.SecurityServer"),  # the Keychain Claude Code reads its login from
        ("mach-lookup", "com.apple.securityd.xpc"),
        ("network-outbound", ""),
    ],
)
def test_both_allow_reads_exec_the_keychain_and_the_network(
    ours: str, theirs: str, operation: str, target: str
) -> None:
    assert allowed(theirs, operation, target) and allowed(ours, operation, target)


def test_the_differences_kept_on_purpose(ours: str, theirs: str) -> None:
    """Its deny default (ours allows what it does not name: a Go tool's certificate check through trustd, say), its
    mandatory denies inside the cell's checkout (a cell is thrown away: ``git config`` and a new command must
    work there as in the user's setup), its /tmp/claude; our pseudo-terminals and /dev/fd."""
    assert allowed(ours, "mach-lookup", "com.apple.trustd.agent")
    assert not allowed(theirs, "mach-lookup", "com.apple.trustd.agent")
    for path in (".git/config", ".git/hooks/pre-commit", ".claude/commands/c.md", ".mcp.json", ".bashrc"):
        assert allowed(ours, "file-write-data", f"{CHECKOUT}/{path}")
        assert not allowed(theirs, "file-write-data", f"{CHECKOUT}/{path}")
    assert allowed(theirs, "file-write-data", "/private/tmp/claude/x")
    assert not allowed(ours, "file-write-data", "/private/tmp/claude/x")
    for path in ("/dev/ptmx", "/dev/ttys003", "/dev/fd/3"):
        assert allowed(ours, "file-write-data", path) and not allowed(theirs, "file-write-data", path)


def test_the_evaluator_catches_a_broken_profile() -> None:
    """A profile without the write deny, with the home writable or missing a writable path fails above."""
    cell = [Path(CELL)]
    assert allowed(sandbox_profile(cell).replace("(deny file-write*)\n", ""), "file-write-data", "/etc/x")
    assert allowed(sandbox_profile([*cell, Path("/Users/me")]), "file-write-data", "/Users/me/.gitconfig")
    assert not allowed(sandbox_profile(cell), "file-write-data", CREDS)


@pytest.mark.parametrize("name", ['a "b"', "back\\slash", "naïve", "new\nline", "(paren) ;semi"])
def test_paths_are_quoted_as_sandbox_runtime_quotes_them(name: str) -> None:
    path = f"/Users/me/{name}/cell"
    profile = sandbox_profile([Path(path)])
    assert json.dumps(path, ensure_ascii=False) in profile  # JSON.stringify's quoting
    assert allowed(profile, "file-write-data", f"{path}/x")
    assert not allowed(profile, "file-write-data", "/Users/me/x")


@pytest.mark.e2e
def test_the_profiles_writable_set_is_all_the_cli_needs(claude: Path, tmp_path: Path) -> None:
    """The macOS profile gives no /tmp (a cell's TMPDIR is in its folder): the real CLI, run here under
    bubblewrap with just the cell writable and /tmp read-only as the profile leaves it, still completes a
    session whose Bash and Write tools run, and puts its own temporary folders in TMPDIR."""
    import subprocess
    import uuid

    from ablate.core.claude import claude_argv
    from ablate.isolate.fence import fence_argv, fence_support
    from ablate.sim import SimServer, script_from_data
    from tests.helpers_cli import MODEL, claude_env, tools_then_done

    support = fence_support()
    if not support.ok or support.bwrap is None:
        pytest.skip(f"no bubblewrap here: {support.reason}")
    cell = Path(tempfile.mkdtemp(prefix="ablate-cell-", dir="/var/tmp"))  # outside the real /tmp
    try:
        config, repo, tmp = cell / "home" / ".claude", cell / "wt", cell / "tmp"
        for folder in (config, repo, tmp):
            folder.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        tools = [
            {"name": "Bash", "input": {"command": "echo x > made.txt; mktemp", "description": "x"}},
            {"name": "Write", "input": {"file_path": str(repo / "new.txt"), "content": "x\n"}},
        ]
        script = tools_then_done("RO-TMP", tools)
        argv = claude_argv(claude, prompt="RO-TMP", model=MODEL, session_id=str(uuid.uuid4()), max_turns=3)
        with SimServer(script_from_data(script)) as sim:
            env = {
                **claude_env(home=cell / "home", config_dir=config, base_url=sim.base_url),
                "TMPDIR": str(tmp),
            }
            proc = subprocess.run(
                fence_argv(
                    support.bwrap, argv, writable=[cell], cwd=repo, network=True
                ),  # the sim listens on the host
                cwd=repo,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=120,
            )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["result"] == "done"
        assert (repo / "made.txt").is_file() and (repo / "new.txt").is_file()
        assert any(p.name.startswith("claude-") for p in tmp.iterdir()), sorted(tmp.iterdir())
    finally:
        shutil.rmtree(cell, ignore_errors=True)

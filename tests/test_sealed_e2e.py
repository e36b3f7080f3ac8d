"""End to end: a sealed session reaches nothing of the host but its view and the model's API (issue 27).

Real servers of the session's own user run on the host: a TCP listener on a loopback port, a listener on an
abstract unix socket, a tmux server and an ssh-agent and a D-Bus session bus whose sockets live outside
``/tmp`` (``/var/tmp``, as ``TMUX_TMPDIR`` or ``$XDG_RUNTIME_DIR`` often do), Docker- and X11-like socket
files (plain listeners, mode 0777), and a ``git daemon`` that accepts pushes. One ``ablate run`` session per
case, whose scripted Bash call attacks them all, lists ``/dev``, leaves a file in ``/dev/shm`` and a SysV
shared-memory segment and message queue behind, and appends a forged answer to its own transcript.
Afterwards every attack failed, the servers are untouched
and alive, nothing the session put in ``/dev/shm`` or SysV IPC outlives it, and the session still got its
answer through the forwarder (recorded in ``wire/<item>.jsonl``), whose token figures, not the forged
transcript's, are the result's. With ``--allow-network`` (a fourth case, ``links``) the loopback port and the
git daemon are reached, and nothing else is (an abstract socket is a unix socket: still refused). As root with the ``namespace`` backend,
with ``--isolation links``, and as an ordinary user.

The same call attacks the kernel (issue 43, item 1; ``kernel`` in tests/kernel_probe.py): it reads, overwrites
and adds keys in the session keyring it inherits from the runner (``ablate run`` is started in a fresh one
holding a planted key) and in the user's, writes ``/proc/sys/kernel/hostname`` and
``/proc/sys/vm/overcommit_memory`` and sets the hostname (each to the value it holds). Every one is refused,
in a UTS namespace of its own; the runner's key and the host's hostname are unchanged. The positive control:
the same attacks, run unsealed in the runner's keyring after the run, work. And it builds a tree 1,200
folders deep in its home and (as root) in the checkout (item 2; not with ``--allow-network``), whose depth it
measures with ``find`` (the positive control): the run completes, the writes listing names each
(``namespace``), and no work folder and nothing in the runner's ``TMPDIR`` is left.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.isolate.detect import namespace_check
from ablate.isolate.fence import fence_support
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data
from tests import kernel_probe
from tests.helpers_cli import BIN
from tests.kernel_probe import KERNEL, SEALED, outcomes, plant_argv
from tests.net_support import serve, settled
from tests.run_folder import items_said, why
from tests.user_support import User, user_venv, world_readable_dir

pytestmark = pytest.mark.e2e

#: Where the attack builds a deep tree, by name.
TREE_IN = {"home": "$HOME", "repo": "$PWD"}
#: What a sealed session's /dev may hold (bubblewrap's --dev, with the shell's own fd links).
DEV_ALLOWED = {
    "null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm", "fd",
    "stdin", "stdout", "stderr", "core", "console", "mqueue",
}  # fmt: skip
ATTACK = r"""exec 2>&1
PY=/usr/bin/python3
try() {{ name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=reached"; else echo "$name=refused"; fi; }}
conn() {{ $PY -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(sys.argv[1])" "$1"; }}
try loopback $PY -c "import socket
for left in (2, 1, 0):  # a connect timed out on a loaded machine is tried again; a refusal is the answer
    try:
        socket.create_connection(('127.0.0.1', {port}), 5); break
    except TimeoutError:
        if not left: raise"
try abstract $PY -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect(b'\0{abstract}')"
try docker conn {docker}
command -v docker >/dev/null && docker -H unix://{docker} version >/dev/null 2>&1  # the real client too
try x11 conn {x11}
try wayland conn {wayland}
try tmux tmux -S {tmux} run-shell "touch {base}/PWNED-tmux"
SCREENDIR={screens} screen -S host -X exec touch {base}/PWNED-screen >/dev/null 2>&1 && echo screen=reached || echo screen=refused
SSH_AUTH_SOCK={agent} ssh-add -l >/dev/null 2>&1; [ $? -eq 2 ] && echo sshagent=refused || echo sshagent=reached
try dbus dbus-send --bus=unix:path={bus} --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.ListNames
try gitpush git push git://127.0.0.1:{gport}/remote.git HEAD:refs/heads/attack
echo "DEV=[$(ls /dev | tr '\n' ' ')]"
for d in {blockdevs}; do [ -e "$d" ] && echo "blockdev=$d"; done
echo SHM > /dev/shm/{mark} && echo shm=written
$PY -c "import ctypes; l=ctypes.CDLL(None); print('SYSV=', l.shmget({key}, 4096, 0o1600), l.msgget({key}, 0o1600))"
FORGED='{{"type":"assistant","uuid":"forged-1","message":{{"id":"msg_forged","model":"claude-sonnet-4-6","role":"assistant","content":[{{"type":"text","text":"forged"}}],"usage":{{"input_tokens":7,"output_tokens":99999}}}}}}'
for t in "$CLAUDE_CONFIG_DIR"/projects/*/*.jsonl; do printf '%s\n' "$FORGED" >> "$t"; done
$PY {probe} kernel
deep() {{ (cd "$1" && $PY -c "import os
os.mkdir('deep'); os.chdir('deep')
for _ in range(1199): os.mkdir('level'); os.chdir('level')
open('leaf', 'w').write('deep')") && echo "DEPTH-$2=$(find "$1/deep" -name leaf -printf %d)"; }}
{trees}
echo NET-DONE
"""
PROMPT = "NET-TASK: look around."
ONE_CELL = """schema_version = 1
name = "one"
description = "the control only"
control = "C0"
universe = []

[[cell]]
id = "C0"
label = "setup on"
strip = []
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Listener:
    """A socket listener on the host that counts the connections it accepts."""

    def __init__(self, family: int, address: Any) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(8)
        self.accepted = 0
        serve(self.sock, self._count)

    def _count(self, conn: socket.socket) -> None:
        self.accepted += 1
        conn.close()

    def close(self) -> None:
        self.sock.close()


class Host:
    """The host's services, started as ``user`` (or as the test's own user)."""

    def __init__(self, base: Path, user: User | None) -> None:
        self.base, self.user = base, user
        self.procs: list[subprocess.Popen[bytes]] = []
        self.run_dir = base / "run-user"  # stands for /run/user/<uid>: sockets outside /tmp
        self.run_dir.mkdir()
        self.port, self.gport = _free_port(), _free_port()
        self.abstract = f"ablate-net-{uuid.uuid4().hex[:8]}"
        self.mark = f"ablate-net-{uuid.uuid4().hex[:8]}"
        self.key = 0x5EA1 + os.getpid() % 1000
        self.tmux, self.agent, self.bus = self.run_dir / "tmux", self.run_dir / "agent", self.run_dir / "bus"
        self.docker, self.x11 = self.run_dir / "docker.sock", self.run_dir / "X99"
        self.wayland, self.screens = self.run_dir / "wayland-0", self.run_dir / "screens"
        self.listeners = [
            _Listener(socket.AF_INET, ("127.0.0.1", self.port)),
            _Listener(socket.AF_UNIX, b"\0" + self.abstract.encode()),
            _Listener(socket.AF_UNIX, str(self.docker)),
            _Listener(socket.AF_UNIX, str(self.x11)),
            _Listener(socket.AF_UNIX, str(self.wayland)),
        ]
        for path in (self.docker, self.x11, self.wayland):
            path.chmod(0o777)
        git = base / "git"
        subprocess.run(["git", "init", "-q", "--bare", str(git / "remote.git")], check=True)
        self.probe = base / "kernel_probe.py"  # a copy the session (and an ordinary user) can read
        self.secret = f"runner-key-{uuid.uuid4().hex[:8]}"  # planted in the runner's session keyring
        shutil.copy(kernel_probe.__file__, self.probe)
        if user is not None:
            user.own(base)
        self._start(["tmux", "-S", str(self.tmux), "new-session", "-d", "-s", "host"], wait=True)
        self._start(["screen", "-dmS", "host"], wait=True)  # its socket in SCREENDIR (mode 700, made by it)
        self._start(["ssh-agent", "-D", "-a", str(self.agent)])
        self._start(["dbus-daemon", "--session", "--nofork", f"--address=unix:path={self.bus}"])
        self._start(
            ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
             f"--base-path={git}", "--listen=127.0.0.1", f"--port={self.gport}", str(git)]
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while not all(p.exists() for p in (self.tmux, self.agent, self.bus)) or not _listening(self.gport):
            assert time.monotonic() < deadline, "the host's services did not start"
            time.sleep(0.1)
        self.blockdevs = sorted(str(p) for p in Path("/dev").iterdir() if p.is_block_device())

    def _argv(self, argv: list[str]) -> list[str]:
        return self.user.argv(argv) if self.user is not None else argv

    @property
    def env(self) -> dict[str, str]:
        """The environment the services run in and are asked through (where their sockets are)."""
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.base),
            "TMUX_TMPDIR": str(self.run_dir),
            "SCREENDIR": str(self.screens),
            "SSH_AUTH_SOCK": str(self.agent),
        }

    def _ask(self, *argv: str) -> int:
        """Run a client of the services on the host; its exit status."""
        return subprocess.run(self._argv(list(argv)), env=self.env, capture_output=True).returncode

    def _start(self, argv: list[str], *, wait: bool = False) -> None:
        if wait:
            subprocess.run(self._argv(argv), env=self.env, check=True, timeout=20)
            return
        self.procs.append(
            subprocess.Popen(
                self._argv(argv), env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )

    def attack(self, trees: tuple[str, ...]) -> str:
        """The attack script, with a deep tree in each of ``trees`` (``home``, ``repo``: the checkout)."""
        return ATTACK.format(
            port=self.port, abstract=self.abstract, docker=self.docker, x11=self.x11, wayland=self.wayland,
            tmux=self.tmux, screens=self.screens,
            base=self.base, agent=self.agent, bus=self.bus, gport=self.gport, mark=self.mark, key=self.key,
            blockdevs=" ".join(self.blockdevs) or "/nonexistent", probe=self.probe,
            trees="; ".join(f'deep "{TREE_IN[t]}" {t}' for t in trees) or ":",
        )  # fmt: skip

    def alive(self) -> dict[str, bool]:
        return {
            "tmux": self._ask("tmux", "-S", str(self.tmux), "has-session") == 0,
            "screen": self._ask("screen", "-S", "host", "-Q", "select", ".") == 0,
            "ssh-agent": self._ask("ssh-add", "-l") == 1,  # "no identities": it answered
            "dbus": all(p.poll() is None for p in self.procs),
        }

    def leftovers(self) -> list[str]:
        """What the session left on the host: its /dev/shm file, its SysV segment and queue."""
        libc = ctypes.CDLL(None, use_errno=True)
        out = []
        if Path("/dev/shm", self.mark).exists():
            out.append(f"/dev/shm/{self.mark}")
        if libc.shmget(self.key, 0, 0) != -1:
            out.append(f"shm key {self.key:#x}")
        if libc.msgget(self.key, 0) != -1:
            out.append(f"msg key {self.key:#x}")
        return out

    def close(self) -> None:
        self._ask("tmux", "-S", str(self.tmux), "kill-server")
        self._ask("screen", "-S", "host", "-X", "quit")
        for p in self.procs:
            p.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        for listener in self.listeners:
            listener.close()
        libc = ctypes.CDLL(None)
        for get, ctl in ((libc.shmget, libc.shmctl), (libc.msgget, libc.msgctl)):
            ident = get(self.key, 0, 0)
            if ident != -1:
                ctl(ident, 0, None)  # IPC_RMID: a failed test must not leave them
        Path("/dev/shm", self.mark).unlink(missing_ok=True)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _kernel_sealed(said: str, unsealed: str, secret: str, *, root: bool) -> None:
    """Every kernel attack of the session (tests/kernel_probe.py) was refused, in a UTS namespace of its own,
    and the key planted in the runner's session keyring never reached it. The positive control: the same
    attacks run unsealed in the runner's keyring after the run work (as root the kernel settings too), and
    the key still holds what was planted."""
    sealed = {k: SEALED[k] for k in KERNEL}
    if not root:  # /sys refuses an ordinary user's write by its permissions before its read-only mount does
        sealed["sysfs"] = "refused:EACCES"
    assert outcomes(said) == sealed, said[-3000:]
    uts = re.search(r"UTS=(\d+)", said)
    assert uts is not None and int(uts.group(1)) != os.stat("/proc/self/ns/uts").st_ino, said[-3000:]
    assert secret not in said
    assert f"KEYDATA={secret}\n" in unsealed, unsealed
    reached = {"keyread", "keyupdate", "keyadd", "keyadduser"}
    reached |= {"hostname", "sethostname", "procsys", "sysfs"} if root else set()
    assert reached <= {k for k, v in outcomes(unsealed).items() if v == "reached"}, unsealed


def _deep_trees_listed_and_gone(
    result: dict[str, Any], said: str, base: Path, backend: str, trees: tuple[str, ...]
) -> None:
    """The session's trees 1,200 folders deep (the positive control: it measured them) are named in the
    result's writes listing (``namespace``: read from the session's upper folders) and gone after the run
    with everything else of it: no work folder, nothing in the runner's ``TMPDIR``."""
    for tree in trees:
        assert f"DEPTH-{tree}=1200" in said, said[-3000:]
    writes = result["writes"]
    assert writes.get("error") is None, writes
    if backend == "namespace":
        home = writes["outside_cell"].get("home", {}).get("by_folder", {})
        repo = writes["areas"]["repo"]["by_folder"]
        listed = {"home": home.get("~/deep") == 1, "repo": any(k.endswith("/deep") for k in repo)}
        assert {t for t, ok in listed.items() if ok} == set(trees), writes
    assert sorted(os.listdir(base / "envs")) == [] and sorted(os.listdir(base / "tmp")) == []


@pytest.mark.parametrize("case", ["namespace-root", "links-root", "namespace-user", "links-root-network"])
def test_a_sealed_session_reaches_no_host_service(
    case: str, claude: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    backend, who, *rest = case.split("-")
    network = rest == ["network"]  # --allow-network: the host's network, still no unix socket, /dev or IPC
    reached = {"loopback", "gitpush"} if network else set()  # an abstract socket is a unix socket: refused
    # the deep trees (removing 1,200 folders takes seconds on a disk mounted with `discard`): both as root, the
    # issue's one in the home as an ordinary user, none with the host's network (links-root proves them)
    trees = () if network else ("home",) if who == "user" else ("home", "repo")
    missing = [
        t
        for t in ("tmux", "screen", "ssh-agent", "ssh-add", "dbus-daemon", "dbus-send")
        if not shutil.which(t)
    ]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: `make hostservices` installs them")
    if who == "root" and os.geteuid() != 0:
        pytest.skip("the root case needs root")
    if (backend == "namespace" and not namespace_check().locked) or not fence_support().ok:
        pytest.skip("no locked bubblewrap fence here")
    user: User | None = request.getfixturevalue("ordinary_user") if who == "user" else None
    hostname = socket.gethostname()
    base = world_readable_dir("ablate-net-")
    host: Host | None = None
    try:
        ex = materialise_example(base / "ex")
        (base / "one.toml").write_text(ONE_CELL)
        (base / "net.toml").write_text(f'schema_version = 1\nid = "net"\nprompt = "{PROMPT}"\n')
        host = Host(base, user)
        (base / "attack.sh").write_text(host.attack(trees))
        (base / "tmp").mkdir()  # the runner's TMPDIR: its work folders, the forwarder's, none left after
        if user is not None:
            user.own(base)
        tools = [{"name": "Bash", "input": {"command": f"bash {base}/attack.sh", "description": "look"}}]
        script = {
            "default": {"text": "OK."},
            "rules": [
                {"name": "net", "where": "prompt", "contains": ["NET-TASK"], "turn": 0, "tool_use": tools},
                {"name": "done", "where": "prompt", "contains": ["NET-TASK"], "turn": {"min": 1}, "text": "done"},
            ],
        }  # fmt: skip
        bin_dir = Path(user_venv(base / "venv")) if user is not None else BIN
        with SimServer(script_from_data(script)) as sim:
            env = {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "LANG": "C.UTF-8",
                "HOME": str(ex.home),
                "ABLATE_CLAUDE_BIN": str(claude),
                "ANTHROPIC_API_KEY": "sk-test",
                "ANTHROPIC_BASE_URL": sim.base_url,
                "MPLCONFIGDIR": str(base / "mpl"),
                "ABLATE_PROBE": "0",  # the session's walls are under test, not the probe (tests/test_probe*.py)
                "TMPDIR": str(base / "tmp"),
            }
            argv = [
                str(bin_dir / "ablate"), "run", "--tasks", str(base / "net.toml"), "--cells", str(base / "one.toml"),
                "--isolation", backend, "--max-turns", "3", "--jobs", "1", "--report", "none",
                *(["--allow-network"] if network else []),
                "--out", str(base / "runs"), "--work-dir", str(base / "envs"),
                "--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--json",
            ]  # fmt: skip
            # the runner in a session keyring of its own holding a key; then, unsealed, the same kernel attacks
            unsealed = f'"$@"; rc=$?; /usr/bin/python3 {host.probe} kernel > {base}/unsealed.txt; exit $rc'
            argv = plant_argv(host.secret, ["sh", "-c", unsealed, "sh", *argv], probe=str(host.probe))
            proc = subprocess.run(
                user.argv(argv) if user else argv,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                cwd=base,
            )
        assert proc.returncode == 0, why(proc.stderr[-3000:], items_said(base / "runs"))
        (folder,) = list((base / "runs").iterdir())
        said = "\n".join(p.read_text(errors="replace") for p in folder.rglob("transcripts/**/*.jsonl"))
        assert "NET-DONE" in said, said[-2000:]
        for attack in (
            "loopback",
            "abstract",
            "docker",
            "x11",
            "wayland",
            "tmux",
            "screen",
            "sshagent",
            "dbus",
            "gitpush",
        ):
            outcome = "reached" if attack in reached else "refused"
            assert f"{attack}={outcome}" in said, (attack, said[-3000:])
        dev = said.split("DEV=[", 1)[1].split("]", 1)[0].replace("\\n", " ").split()
        assert set(dev) <= DEV_ALLOWED, dev
        assert "blockdev=" not in said and "shm=written" in said
        _kernel_sealed(said, (base / "unsealed.txt").read_text(), host.secret, root=who == "root")
        assert socket.gethostname() == hostname
        # the servers are untouched and alive; nothing the session left in /dev/shm or SysV IPC remains
        assert not (base / "PWNED-tmux").exists() and not (base / "PWNED-screen").exists()
        refs = subprocess.run(
            ["git", "--git-dir", str(base / "git" / "remote.git"), "show-ref"], capture_output=True, text=True
        )
        assert ("refs/heads/attack" in refs.stdout) is network
        counts = [1, 0, 0, 0, 0] if network else [0, 0, 0, 0, 0]
        assert settled(lambda: [listener.accepted for listener in host.listeners], counts) == counts
        assert host.alive() == {"tmux": True, "screen": True, "ssh-agent": True, "dbus": True}
        assert host.leftovers() == []
        # the session got its answer through the forwarder, which recorded every request
        (result_file,) = list((folder / "results").glob("*.json"))
        result = orjson.loads(result_file.read_bytes())
        assert result["status"] == "completed"
        _deep_trees_listed_and_gone(result, said, base, backend, trees)
        (wire_file,) = list((folder / "wire").glob("*.jsonl"))
        records = [json.loads(line) for line in wire_file.read_text().splitlines()]
        messages = [r for r in records if r["messages"]]
        assert messages and messages[-1]["answer"] == "done" and all(r["status"] == 200 for r in records)
        assert all(r["system_sha256"] and r["item"] == result["item"] for r in messages)
        # the session forged a 99999-token answer into its own transcript: the wire's figures count
        wire = result["wire"]
        assert wire["requests"] == len(records), wire
        # the forged entry is also one model call the wire never answered: flagged and kept out of the statistics
        assert [d.split(":")[0] for d in wire["differs"]] == [
            "input_tokens",
            "output_tokens",
            "model calls",
        ], wire
        assert "transcript-differs-from-wire" in result["flags"], result["flags"]
        total = result["session"]["total"]
        assert (total["input_tokens"], total["output_tokens"]) == (
            wire["input_tokens"],
            wire["output_tokens"],
        )
        assert wire["output_tokens"] == sum(r["usage"].get("output_tokens", 0) for r in records) < 99999
        manifest = orjson.loads((folder / "manifest.json").read_bytes())
        assert manifest["isolation"]["network"] == ("host" if network else "sealed")
        assert list(manifest["isolation"]["wire_differs"]) == [result["item"]]
    finally:
        if host is not None:
            host.close()
        shutil.rmtree(base, ignore_errors=True)

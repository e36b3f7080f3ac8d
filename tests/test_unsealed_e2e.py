"""End to end, with the real CLI against the sim: where sessions cannot be sealed (here: as if bubblewrap were
not installed, the backends' own checks run with no fence), ``ablate ab`` refuses before any probe or session,
saying why and how to fix it; with ``--unsealed`` it runs, and the manifest, the report's first caveat, the
first line of the terminal summary and ``ablate gate`` all say the run was unsealed.

It is also the positive control of the sealed-session tests (tests/test_sealed_e2e.py): the same host
services a sealed session cannot reach, a TCP listener on a loopback port and an abstract unix socket, are
reached by the unsealed session's Bash call, so a sealed test that passes because its attack broke would be
seen here.
"""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ablate.core.once import once
from ablate.isolate import detect, fence
from ablate.setup.examples import ExampleSetup, materialise_example
from ablate.sim import Script, SimServer, script_from_data
from tests.helpers_cli import invoke, tool_output
from tests.net_support import serve, settled

pytestmark = pytest.mark.e2e

#: The loopback connect is tried three times, and counts as reached only once the listener's reply came back. On
#: loaded machines one of two sessions' connects returned, yet the listener never accepted it (three times in
#: many runs; the abstract one after it did): a client's connect returns once the kernel has the handshake, and a
#: connection lost after that is never accepted. A control shows what an unsealed session can reach, so a try the
#: listener did not answer is retried, and what each try met is printed for the assertion's message.
LOOPBACK = (
    "import socket, time\n"
    "for _ in range(3):\n"
    "    try:\n"
    "        with socket.create_connection(('127.0.0.1', {port}), 5) as s:\n"
    "            said = s.recv(1)\n"
    "        if said == b'!': print('loopback=reached'); break\n"
    "        print('loopback try: no reply'); time.sleep(1)\n"
    "    except OSError as e:\n"
    "        print('loopback try:', e); time.sleep(1)"
)
ATTACK = (
    'python3 -c "' + LOOPBACK + '"; '
    "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect(b'\\0{abstract}')\" "
    "&& echo abstract=reached; echo ATTACK-DONE"
)


class _Host:
    """Host services a sealed session cannot reach, each counting the connections it accepted."""

    def __init__(self) -> None:
        self.accepted = {"loopback": 0, "abstract": 0}
        self.abstract = f"ablate-unsealed-{uuid.uuid4().hex[:8]}"
        self.socks = {
            "loopback": socket.socket(socket.AF_INET, socket.SOCK_STREAM),
            "abstract": socket.socket(socket.AF_UNIX, socket.SOCK_STREAM),
        }
        self.socks["loopback"].bind(("127.0.0.1", 0))
        self.socks["abstract"].bind(b"\0" + self.abstract.encode())
        for name, sock in self.socks.items():
            sock.listen(8)
            serve(sock, lambda conn, name=name: self._count(name, conn))  # type: ignore[misc]

    def _count(self, name: str, conn: socket.socket) -> None:
        """Count ``conn``, then answer it (the loopback client waits for that reply; the abstract one has gone)."""
        self.accepted[name] += 1
        with conn, contextlib.suppress(OSError):
            conn.sendall(b"!")

    def attack(self) -> str:
        return ATTACK.format(port=self.socks["loopback"].getsockname()[1], abstract=self.abstract)

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()


@pytest.fixture
def no_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as on a machine without bubblewrap: the fence check finds none, and the namespace
    backend's own check (tried for real, once) runs again without it."""
    missing = fence.FenceSupport(False, f"bubblewrap (bwrap) is not installed: {fence.INSTALL_HINT}", None)
    monkeypatch.setattr(fence, "_try_fence", lambda: missing)
    monkeypatch.setattr(detect, "_try_namespace", once(detect._try_namespace.__wrapped__))  # type: ignore[attr-defined]


@pytest.fixture
def host() -> Iterator[_Host]:
    services = _Host()
    try:
        yield services
    finally:
        services.close()


def _script(attack: str) -> Script:
    bash = {"name": "Bash", "input": {"command": attack, "description": "look around"}}
    return script_from_data(
        {
            "default": {"text": "OK"},
            "rules": [
                {
                    "name": "attack",
                    "where": "prompt",
                    "contains": ["LOOK-TASK"],
                    "turn": 0,
                    "tool_use": [bash],
                },
                {
                    "name": "done",
                    "where": "prompt",
                    "contains": ["LOOK-TASK"],
                    "turn": {"min": 1},
                    "text": "done",
                },
            ],
        }
    )


def _ab(ex: ExampleSetup, claude: Path, tmp: Path, sim: SimServer, *extra: str) -> tuple[int, str, str]:
    task = tmp / "look.toml"
    task.write_text('schema_version = 1\nid = "look"\nprompt = "LOOK-TASK: look around."\n')
    where = ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--claude-bin", str(claude)]
    args = ["ab", "--tasks", str(task), "--repeats", "1", "--max-turns", "3", "--out", str(tmp / "runs")]
    env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": sim.base_url}
    res = invoke([*args, *where, "--work-dir", str(tmp / "envs"), *extra], env={**env, "IS_SANDBOX": "1"})
    return res.exit_code, res.stdout, res.stderr


def test_without_a_seal_ab_refuses_and_with_unsealed_every_record_says_unsealed(
    claude: Path, tmp_path: Path, no_bubblewrap: None, host: _Host
) -> None:
    ex = materialise_example(tmp_path / "ex")
    with SimServer(_script(host.attack())) as sim:
        code, _out, err = _ab(ex, claude, tmp_path, sim)
        assert code == 2, err
        assert "error: sessions cannot be sealed here: bubblewrap (bwrap) is not installed" in err
        assert "sudo apt-get install bubblewrap" in err and "sudo pacman -S bubblewrap" in err
        assert "or pass --unsealed" in err
        assert not (tmp_path / "runs").exists()  # refused before the run folder, any probe or session
        assert [r for r in sim.requests() if r.is_messages] == []

        code, out, err = _ab(ex, claude, tmp_path, sim, "--unsealed", "--report", "now")
    assert code == 0, err[-3000:]
    assert "UNSEALED (--unsealed): sessions share the host's network and sockets" in err
    # the positive control: both sessions reached what a sealed session cannot
    both = {"loopback": 2, "abstract": 2}
    said = "\n".join(tool_output(t) for t in sorted((tmp_path / "runs").rglob("*.jsonl")))
    assert settled(lambda: dict(host.accepted), both) == both, said
    lines = out.splitlines()
    assert lines[0].startswith("UNSEALED (--unsealed): sessions shared the host's network and sockets"), out
    assert lines[1].startswith("finished: 2/2 complete"), out
    assert "UNSEALED (--unsealed): sessions shared the host's network and sockets (the first caveat)" in lines
    (run,) = (tmp_path / "runs").iterdir()
    isolation = orjson.loads((run / "manifest.json").read_bytes())["isolation"]
    assert (isolation["network"], isolation["locked"]) == ("unsealed", False)
    caveats = orjson.loads((run / "report.json").read_bytes())["caveats"]
    assert caveats[0]["id"] == "unsealed" and caveats[0]["text"].startswith(
        "UNSEALED: sessions ran with --unsealed"
    )
    assert "bubblewrap (bwrap) is not installed" in caveats[0]["text"]

    refused = invoke(["gate", str(run), "--detect", "off"])
    assert refused.exit_code == 1, refused.stdout
    assert refused.stdout.startswith("FAIL — not trustworthy: the sessions were not sealed")
    allowed = invoke(["gate", str(run), "--detect", "off", "--allow-unsealed"])
    assert allowed.exit_code == 0 and allowed.stdout.startswith("PASS"), allowed.stdout

"""End to end, with the real CLI against the sim: a session reads no credential file and never holds the
API key (issue 43 item 3).

The home holds an ssh key, AWS credentials, a ``.netrc``, gh's ``hosts.yml`` and a ``/login`` key in
``~/.claude.json`` (``primaryApiKey``), each with a marked value, and ablate runs with a real key the sim
alone accepts. The session's first answer asks for a Bash call that
cats every planted file (and the cell's own account state) and every ``/proc/*/environ``; its result goes to the endpoint in the next request.
By default none of the planted values nor the real key reaches the endpoint, a wire record, a transcript or
the CLI's output, yet every session completes: the forwarder swapped the placeholder the session held (its
environ shows it) for the key the sim requires. The positive control: with ``--expose`` for each file the
very same read sends every planted value to the endpoint. In the three boxes: the default backend as root
and as an ordinary user (a user namespace), and ``links`` under its fence. And where the ``/login`` key is
the user's only login, a run moves it into the swapped variable: the sessions complete with it, never holding it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.setup.examples import materialise_example
from ablate.sim import Script, SimServer, script_from_data
from tests.helpers_cli import BIN, invoke
from tests.run_folder import why
from tests.test_sealed_e2e import ONE_CELL
from tests.user_support import User, world_readable_dir

pytestmark = pytest.mark.e2e

REAL_KEY = "sk-ant-api03-REALKEY-7d1e9b"
PLANTED = {
    ".ssh/id_ed25519": "SECRET-SSH-1f2e",
    ".aws/credentials": "[default]\naws_secret_access_key = SECRET-AWS-9c8d\n",
    ".netrc": "machine example.com login me password SECRET-NETRC-77aa\n",
    ".config/gh/hosts.yml": "github.com:\n    oauth_token: SECRET-GH-3b4c\n",
}
LOGIN_MARK = "sk-ant-LOGINKEY-5a6b"  # the /login key of ~/.claude.json
MARKS = ("SECRET-SSH-1f2e", "SECRET-AWS-9c8d", "SECRET-NETRC-77aa", "SECRET-GH-3b4c", LOGIN_MARK)


def _script(home: Path) -> Script:
    """The session reads every planted file (at ``~`` and at the real home: ``links`` gives it a shadow
    home), its cell's account state and every process's ``ANTHROPIC_*`` variables; ``READ-DONE`` is in its
    output only (not in the command the request repeats)."""
    files = [f"~/{rel}" for rel in (*PLANTED, ".claude.json")] + [f"{home}/.claude.json"]
    read = (
        f'cat {" ".join(files)} "$CLAUDE_CONFIG_DIR/.claude.json"; for f in /proc/[0-9]*/environ; do '
        "tr '\\0' '\\n' < $f; done | grep -a ^ANTHROPIC_ | sort -u; printf 'READ-%s' DONE"
    )
    bash = {"name": "Bash", "input": {"command": read, "description": "look around"}}
    rule = {"name": "read", "where": "prompt", "contains": ["SECRETS-TASK"], "turn": 0, "tool_use": [bash]}
    return script_from_data({"default": {"text": "done"}, "rules": [rule]})


@dataclass
class Runner:
    """How ablate is run: in process as root, or as an ordinary user through its installed CLI."""

    claude: Path
    base: Path
    user: User | None = None
    bin_dir: Path = BIN
    extra: tuple[str, ...] = ()

    def run(
        self, name: str, *extra: str, env_key: bool = True, report: str = "now"
    ) -> tuple[Path, list[Any], str]:
        """One run of the control cell (one session, the whole setup with its hooks) in a home with the
        planted files: its folder, the requests the sim received (bodies included) and ablate's stderr.
        Without ``env_key`` the real key is the ``/login`` key of ``~/.claude.json`` alone; ``report``: when
        its report is written."""
        ex = materialise_example(self.base / name)
        for rel, text in PLANTED.items():
            (ex.home / rel).parent.mkdir(parents=True, exist_ok=True)
            (ex.home / rel).write_text(text)
        account = ex.home / ".claude.json"
        state = {**orjson.loads(account.read_bytes()), "primaryApiKey": LOGIN_MARK if env_key else REAL_KEY}
        account.write_bytes(orjson.dumps(state))
        task = self.base / f"{name}.toml"
        task.write_text('schema_version = 1\nid = "secrets"\nprompt = "SECRETS-TASK: look around."\n')
        out = self.base / f"{name}-runs"
        (self.base / "one.toml").write_text(ONE_CELL)
        args = ["run", "--cells", str(self.base / "one.toml"), "--tasks", str(task), "--repeats", "1"]
        args += ["--max-turns", "3", "--out", str(out)]
        args += ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--claude-bin", str(self.claude)]
        args += ["--report", report, "--work-dir", str(self.base / f"{name}-envs"), *self.extra, *extra]
        with SimServer(_script(ex.home), api_key=REAL_KEY) as sim:
            env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": REAL_KEY, "ANTHROPIC_BASE_URL": sim.base_url}
            if self.user is None:
                res = invoke(
                    args, env={**env, "IS_SANDBOX": "1", **({} if env_key else {"ANTHROPIC_API_KEY": None})}
                )
                code, stderr = res.exit_code, res.stderr
            else:
                self.user.own(self.base)
                env.update(PATH="/usr/local/bin:/usr/bin:/bin", LANG="C.UTF-8", TMPDIR=str(self.base))
                argv = self.user.argv([str(self.bin_dir / "ablate"), *args])
                proc = subprocess.run(
                    argv, env=env, capture_output=True, text=True, timeout=600, cwd=self.base
                )
                code, stderr = proc.returncode, proc.stderr
            requests = [r.record for r in sim.requests()]
        assert "Traceback" not in stderr and code == 0, why(code, stderr[-3000:])
        (run,) = out.iterdir()
        return run, requests, stderr


def _results(run: Path) -> list[dict[str, Any]]:
    return [orjson.loads(p.read_bytes()) for p in sorted((run / "results").glob("*.json"))]


def _everything(run: Path) -> str:
    """Every file of the run folder, as text (wire records, transcripts, stdout, stderr, manifest, report)."""
    return "\n".join(p.read_text(errors="replace") for p in sorted(run.rglob("*")) if p.is_file())


@pytest.fixture
def base() -> Iterator[Path]:
    folder = world_readable_dir("ablate-secrets-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: who runs ablate → the backend and mode its manifest records
BOXES = {"root": ("namespace", "root"), "user": ("namespace", "user-namespace"), "links": ("links", "fenced")}


@pytest.mark.parametrize("who", list(BOXES))
def test_a_session_reads_no_credential_file_and_never_holds_the_key(
    who: str, claude: Path, base: Path, request: pytest.FixtureRequest
) -> None:
    runner = Runner(claude, base)
    if who != "user" and os.geteuid() != 0:
        pytest.skip("runs as an ordinary user: this case needs root")
    runner.extra = ("--isolation", "links") if who == "links" else ()
    if who == "user":
        runner.user, runner.bin_dir = (
            request.getfixturevalue("ordinary_user"),
            request.getfixturevalue("installed"),
        )
    run, requests, stderr = runner.run("hidden")
    results = _results(run)
    assert len(results) == 1 and all(r["status"] == "completed" for r in results), why(
        stderr[-3000:], results
    )
    sent = orjson.dumps(requests).decode()
    # the read ran and its output reached the endpoint: the placeholder, never the key nor a planted value
    assert "READ-DONE" in sent and "sk-ablate-session-" in sent, sent[-3000:]
    for secret in (*MARKS, REAL_KEY, "REALKEY"):
        assert secret not in sent, secret
        assert secret not in _everything(run), secret
    # every model call was accepted upstream with the real key (the sim refuses any other)
    calls = [r for r in requests if r["path"] == "/v1/messages"]
    assert calls and all(r["status"] == 200 for r in calls), [(r["rule"], r["status"]) for r in calls]
    isolation = orjson.loads((run / "manifest.json").read_bytes())["isolation"]
    assert (isolation["backend"], isolation["mode"]) == BOXES[who]
    hidden = {"~/.ssh", "~/.aws", "~/.netrc", "~/.config/gh/hosts.yml", "~/.claude.json"}
    assert hidden <= set(isolation["hidden"]) and isolation["exposed"] == [], isolation
    caveats = orjson.loads((run / "report.json").read_bytes())["caveats"]
    said = next(c["text"] for c in caveats if c["id"] == "isolation")
    assert "credential files hidden from every session" in said and "~/.netrc" in said, said
    assert "placeholder for ANTHROPIC_API_KEY" in said, said

    # the positive control: exposed, the very same read sends every planted value to the endpoint
    exposed = [arg for path in sorted(hidden) for arg in ("--expose", path)]
    run, requests, stderr = runner.run("exposed", *exposed, report="none")  # its report proves nothing
    assert all(r["status"] == "completed" for r in _results(run)), stderr[-3000:]
    sent = orjson.dumps(requests).decode()
    assert all(mark in sent for mark in MARKS), sent[-3000:]
    assert REAL_KEY not in sent and REAL_KEY not in _everything(run)
    isolation = orjson.loads((run / "manifest.json").read_bytes())["isolation"]
    assert set(isolation["exposed"]) == hidden and not hidden & set(isolation["hidden"]), isolation


def test_a_login_key_is_moved_into_the_swapped_variable(claude: Path, base: Path) -> None:
    """No key in the environment, the real one only as ``primaryApiKey``: every cell would start logged out
    from its account state's copy (which leaves the key out), so the run hands the key to the sessions as
    ``ANTHROPIC_API_KEY``, swapped by the forwarder like any: the sim (which takes the real key alone)
    answers every call, and the key is in nothing the session sent or the run folder holds."""
    if os.geteuid() != 0:
        pytest.skip("runs as an ordinary user: this case needs root")
    run, requests, stderr = Runner(claude, base).run("moved", env_key=False, report="none")
    assert all(r["status"] == "completed" for r in _results(run)), stderr[-3000:]
    sent = orjson.dumps(requests).decode()
    assert "READ-DONE" in sent and "sk-ablate-session-" in sent, sent[-3000:]
    assert REAL_KEY not in sent and "REALKEY" not in _everything(run)
    calls = [r for r in requests if r["path"] == "/v1/messages"]
    assert calls and all(r["status"] == 200 for r in calls), [(r["rule"], r["status"]) for r in calls]
    auth = orjson.loads((run / "manifest.json").read_bytes())["isolation"]["auth"]
    assert auth["method"] == "api-key", auth
    assert auth["source"] == f"ANTHROPIC_API_KEY (moved from {base}/moved/home/.claude.json (primaryApiKey))"

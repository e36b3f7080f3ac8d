"""End to end: a session over a limit is stopped, its item fails with ``limit:<what>``, the rest of the run
goes on, and nothing is left behind (docs/ARCHITECTURE.md#limits, issue 38).

One ``ablate run`` of five tasks in one cell against the scripted sim: a quiet one, and four whose scripted
Bash call writes 80 MiB in the view, starts 300 processes, holds 1.8 GiB in three processes, or sends a
20 MiB request body through the relay. Under ``--limit disk=32MiB processes=200 memory=1GiB
request=8MiB`` each of the four fails with its limit and the quiet one completes; afterwards no mount,
work folder, cgroup or process of the run remains. The positive control: the four attacks under the
default limits complete (the attacks were real), one after another in one session of a second run (six
sessions in all; a session per attack made nine). As root (cgroups) and as an ordinary user (rlimits).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from ablate.isolate.detect import namespace_check
from ablate.setup.examples import ExampleSetup, materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import BIN
from tests.run_folder import items_said, why
from tests.test_sealed_e2e import ONE_CELL
from tests.user_support import User, world_readable_dir

pytestmark = pytest.mark.e2e

ATTACKS = {
    "quiet": "echo quiet",
    "disk": "for i in $(seq 80); do head -c 1048576 /dev/zero > big$i; done; du -sm . | tail -1",
    "processes": "for i in $(seq 300); do sleep 4 & done; wait; echo forked",
    "memory": "for i in 1 2 3; do python3 -c 'b = b\"x\" * (600 << 20); import time; time.sleep(4)' & done;"
    " wait; echo held",
    "request": "python3 -c \"import os, urllib.request as u; r = u.Request(os.environ['ANTHROPIC_BASE_URL']"
    " + '/v1/messages', data=b'x' * (20 << 20), headers={'content-type': 'application/json'});"
    ' print(u.urlopen(r, timeout=60).status)" 2>&1 | tail -1; echo sent',
}
#: The positive control: the four attacks one after another in one session (a claude start, not four).
ATTACKS["all"] = "; ".join(command for name, command in ATTACKS.items() if name != "quiet")
LIMITS = [
    "--limit",
    "disk=32MiB",
    "--limit",
    "processes=200",
    "--limit",
    "memory=1GiB",
    "--limit",
    "request=8MiB",
]


def _script() -> dict[str, object]:
    rules: list[dict[str, object]] = []
    for name, command in ATTACKS.items():
        marker = f"LIMIT-{name.upper()}"
        tool = {"name": "Bash", "input": {"command": command, "description": name, "timeout": 60000}}
        rules += [
            {"name": name, "where": "prompt", "contains": [marker], "turn": 0, "tool_use": [tool]},
            {"name": f"{name}-done", "where": "prompt", "contains": [marker], "turn": {"min": 1}, "text": "done"},
        ]  # fmt: skip
    return {"default": {"text": "OK."}, "rules": rules}


def _ablate_run(
    base: Path,
    ex: ExampleSetup,
    user: User | None,
    env: dict[str, str],
    limits: list[str],
    out: str,
    bin_dir: Path,
    tasks: list[str],
) -> Path:
    argv = [
        str(bin_dir / "ablate"), "run", *(a for t in tasks for a in ("--tasks", str(base / "tasks" / f"{t}.toml"))),
        "--cells", str(base / "one.toml"),
        "--isolation", "namespace", "--max-turns", "3", "--jobs", "1", "--report", "none", *limits,
        "--out", str(base / out), "--work-dir", str(base / f"envs-{out}"),
        "--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--json",
    ]  # fmt: skip
    proc = subprocess.run(user.argv(argv) if user else argv, env=env, capture_output=True, text=True,
                          timeout=600, cwd=base)  # fmt: skip
    assert proc.returncode in (0, 3), why(proc.returncode, proc.stderr[-3000:], items_said(base / out))
    (folder,) = list((base / out).iterdir())
    return folder


def _env(base: Path, ex: ExampleSetup, claude: Path, sim_url: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(ex.home),
        "ABLATE_CLAUDE_BIN": str(claude),
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": sim_url,
        "MPLCONFIGDIR": str(base / "mpl"),
        "ABLATE_PROBE": "0",  # the limits are under test, not the probe
    }


def _statuses(folder: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for path in (folder / "results").glob("*.json"):
        r = orjson.loads(path.read_bytes())
        out[r["task"]] = (r["status"], (r["error"] or "").split(":", 2)[1] if r["error"] else "")
    return out


def _tool_output(folder: Path) -> str:
    """The tool results in the transcripts of the run in ``folder``."""
    out = []
    for path in folder.rglob("transcripts/**/*.jsonl"):
        for line in path.read_bytes().splitlines():
            content = orjson.loads(line).get("message", {}).get("content")
            if isinstance(content, list):
                out += [str(b.get("content")) for b in content if b.get("type") == "tool_result"]
    return "\n".join(out)


def _leftovers(base: Path, folders: list[Path]) -> list[str]:
    """Mounts, work folders, cgroups and processes of the runs in ``folders`` (under ``base``) still there."""
    found = [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(base) in line]
    found += [str(p) for p in base.glob("envs-*/*")]
    plans = [orjson.loads(line) for f in folders for line in (f / "plan.jsonl").read_text().splitlines()]
    for sid in (a["session_id"] for p in plans for a in p["attempts"]):
        found += [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/**/ablate-{sid}")]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(base).encode() in cmd:
            found.append(f"pid {pid}: {cmd[:120]!r}")
    return found


@pytest.mark.parametrize("who", ["root", "user"])
def test_a_session_over_a_limit_is_stopped_and_the_run_goes_on(
    who: str, claude: Path, request: pytest.FixtureRequest
) -> None:
    if who == "root" and os.geteuid() != 0:
        pytest.skip("the root case needs root")
    if not namespace_check().locked:
        pytest.skip("no locked namespace backend here")
    user: User | None = request.getfixturevalue("ordinary_user") if who == "user" else None
    # the user's ablate: installed once per test session for it (tests/conftest.py), as a user installs it
    bin_dir = request.getfixturevalue("installed") if user is not None else BIN
    base = world_readable_dir("ablate-limits-")
    try:
        ex = materialise_example(base / "ex")
        (base / "one.toml").write_text(ONE_CELL)
        (base / "tasks").mkdir()
        for name in ATTACKS:
            (base / "tasks" / f"{name}.toml").write_text(
                f'schema_version = 1\nid = "{name}"\nprompt = "LIMIT-{name.upper()}: go."\n'
            )
        if user is not None:
            user.own(base)
        with SimServer(script_from_data(_script())) as sim:
            env = _env(base, ex, claude, sim.base_url)
            limited = _ablate_run(base, ex, user, env, LIMITS, "limited", bin_dir, list(ATTACKS)[:-1])
            # the attacks alone (the quiet task completes under the limits already), in one session
            control = _ablate_run(base, ex, user, env, [], "control", bin_dir, ["all"])
        said = items_said(limited.parent) + items_said(control.parent)
        # the positive control: the same attacks under the defaults all ran to their end
        assert _statuses(control) == {"all": ("completed", "")}, said
        # what the Bash call printed (not its command, which names the same words): each attack's last line
        lines = _tool_output(control).splitlines()
        disk = next((int(line.split("\t")[0]) for line in lines if line.endswith("\t.")), 0)
        assert disk >= 80 and {"forked", "held", "sent"} <= set(lines), (lines, said)
        got = _statuses(limited)
        assert got == {
            "quiet": ("completed", ""),
            "disk": ("error", "disk"),
            "processes": ("error", "processes"),
            "memory": ("error", "memory"),
            "request": ("error", "request"),
        }, said
        plan = [orjson.loads(line) for line in (limited / "plan.jsonl").read_text().splitlines()]
        outcomes = {p["task"]: p["attempts"][-1]["outcome"] for p in plan}
        assert outcomes["disk"] == "limit:disk" and len(plan[0]["attempts"]) == 1, outcomes
        manifest = orjson.loads((limited / "manifest.json").read_bytes())
        limits = manifest["isolation"]["limits"]
        assert (limits["disk"], limits["processes"], limits["request"]) == (32 << 20, 200, 8 << 20)
        mechanism = "cgroup" if who == "root" else "RLIMIT"
        assert limits["enforced_by"]["memory"].startswith(mechanism), limits
        assert _leftovers(base, [limited, control]) == [], said
    finally:
        shutil.rmtree(base, ignore_errors=True)

"""End to end: a session that tries to take its view apart, as root and as an ordinary user.

Every session (its Bash call, and its SessionStart hook, which also runs in the probe's sessions) first says
what it sees of earlier sessions' writes, then lazily unmounts every mount it can see under the test's own
folder (never the host's: a regression that ran the session in the host's mount namespace must not harm
the machine), also from a nested user namespace, writes through every ``/proc/<pid>/root`` and
``nsenter -t 1``, and then writes into the config dir, the home and the repository and commits. The test's
folder lives under ``/var/tmp``, not ``/tmp``: ablate's own ``/tmp`` overlay would otherwise hide a
regression. Afterwards the home (config dir included) and the repository are byte-identical and no session
saw another's writes.

As an ordinary user (a throwaway account made with ``useradd`` when the tests run as root) ablate is
installed non-editable into a venv of ``/usr/bin/python3`` and ``run``, ``probe`` and
``compare --executor claude-code`` go through its CLI; the manifest says ``namespace``/``user-namespace``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.fsutil import tree_listing
from ablate.isolate.detect import namespace_check
from ablate.setup.examples import ExampleSetup, materialise_example
from ablate.sim import SimServer, iter_requests, script_from_data
from tests.helpers_cli import BIN
from tests.run_folder import items_said, why
from tests.user_support import User, world_readable_dir

pytestmark = pytest.mark.e2e

UMOUNT = "import ctypes, sys\nlibc = ctypes.CDLL(None)\nfor p in sys.argv[1:]: libc.umount2(p.encode(), 2)\n"
ATTACK = r"""exec 2>/dev/null
cd "{repo}"
seen=$(cat "$HOME/.bashrc" "$HOME/x" "$HOME/.claude/CLAUDE.md" "$HOME/.gitconfig" README.md | grep -c ESCAPE)
seen=$((seen + $(git log --format=%s | grep -c escape)))
echo "SEEN=[$seen]"
mounts=$(awk '{{print $5}}' /proc/self/mountinfo | grep "^{base}/" | sort -r)
/usr/bin/python3 "{base}/umount.py" $mounts
unshare -Ur sh -c '/usr/bin/python3 "{base}/umount.py" "$@"; echo ESCAPE >> "$HOME/.bashrc"' sh $mounts
for r in /proc/[0-9]*/root; do
  echo ESCAPE >> "$r$HOME/.bashrc"; echo ESCAPE >> "$r{repo}/README.md"
done
for ns in -m -a; do
  nsenter -t 1 $ns sh -c 'echo ESCAPE >> "$HOME/.bashrc"; echo ESCAPE >> "{repo}/README.md"'
done
echo ESCAPE >> "$HOME/.claude/CLAUDE.md"
mkdir -p "$HOME/.claude/skills/escape" && echo ESCAPE > "$HOME/.claude/skills/escape/SKILL.md"
echo ESCAPE >> "$HOME/.bashrc"; touch "$HOME/x"; mkdir -p "$HOME/.config/app" && echo ESCAPE > "$HOME/.config/app/state"
git config --global user.name escape
echo ESCAPE >> README.md
printf '#!/bin/sh\nexit 0\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
git add -A && git -c user.name=e -c user.email=e@x.invalid commit -qm escape
echo ESCAPE > "$(git rev-parse --path-format=absolute --git-path objects)/planted"
exec 2>&1  # the last write says how it failed, where it fails (the links fence reports it)
echo ESCAPE >> "$HOME/.bashrc"
echo ESCAPE-DONE
"""
TASK_PROMPT = "ESCAPE-TASK: tidy the repository."
SCRIPT = {
    "default": {"text": "OK."},
    "rules": [
        {
            "name": "attack",
            "where": "prompt",
            "contains": ["ESCAPE-TASK"],
            "turn": 0,
            "tool_use": [{"name": "Bash", "input": {"command": "sh {attack}", "description": "tidy"}}],
        },
        {"name": "done", "where": "prompt", "contains": ["ESCAPE-TASK"], "turn": {"min": 1}, "text": "done"},
    ],
}


class Box:
    """The test's folder: the example setup, the attack script, ablate's work and run folders."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.ex: ExampleSetup = materialise_example(base / "ex")
        (base / "umount.py").write_text(UMOUNT)
        self.attack = base / "attack.sh"
        self.attack.write_text(ATTACK.format(base=base, repo=self.ex.repo))
        (self.ex.home / ".bashrc").write_text("# the user's own\n")
        settings_path = self.ex.config_dir / "settings.json"
        settings = json.loads(settings_path.read_text())
        hook = {"type": "command", "command": f"sh {self.attack}"}
        settings["hooks"].setdefault("SessionStart", []).append({"hooks": [hook]})
        settings_path.write_text(json.dumps(settings, indent=2))
        task = base / "escape.toml"
        task.write_text(f'schema_version = 1\nid = "escape"\nprompt = "{TASK_PROMPT}"\n')
        self.task = task
        self.tmp = base / "tmp"  # the TMPDIR ablate runs with: nothing of its own may stay there
        self.tmp.mkdir()
        self.listing = self.snapshot()

    def snapshot(self) -> tuple[dict[str, str], dict[str, str]]:
        # ~/.cache: ablate's own cache dir (~/.cache/ablate, made by the run) is not the user's change
        return tree_listing(self.ex.home, exclude=(".cache",)), tree_listing(self.ex.repo)

    def changed(self) -> list[str]:
        now = self.snapshot()
        return [
            f"{side}:{k}"
            for side, old, new in (("home", self.listing[0], now[0]), ("repo", self.listing[1], now[1]))
            for k in sorted(set(old) | set(new))
            if old.get(k) != new.get(k)
        ]

    def script(self) -> Any:
        data = json.loads(json.dumps(SCRIPT).replace("{attack}", str(self.attack)))
        return script_from_data(data)

    def env(self, claude: Path, base_url: str) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TERM")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
        env.update(
            HOME=str(self.ex.home),
            ABLATE_CLAUDE_BIN=str(claude),
            ANTHROPIC_API_KEY="sk-test",
            ANTHROPIC_BASE_URL=base_url,
            MPLCONFIGDIR=str(self.base / "mpl"),
            ABLATE_PROBE="0",  # no probe-first step: one CLI start per cell, not under test here
            TMPDIR=str(self.tmp),
        )
        return env

    def left_in_tmp(self) -> list[str]:
        """What ablate's commands left in their TMPDIR (work folders, the forwarder's, views): nothing."""
        return sorted(p.name for p in self.tmp.iterdir())


def _first_seen(folder: Path) -> list[int]:
    """Per transcript under ``folder``: what its session saw of earlier sessions' writes, before it wrote
    any of its own (the first ``SEEN=[n]``: its SessionStart hook's, or its Bash call's without hooks)."""
    out = []
    for path in sorted(folder.rglob("*.jsonl")):
        found = re.search(r"SEEN=\[(\d+)\]", path.read_text(encoding="utf-8", errors="replace"))
        if found:
            out.append(int(found.group(1)))
    return out


def _attacked(folder: Path) -> int:
    """How many attacks ran to the end in the transcripts under ``folder``."""
    return sum(p.read_text(errors="replace").count("ESCAPE-DONE") > 0 for p in folder.rglob("*.jsonl"))


@pytest.fixture
def box() -> Iterator[Box]:
    base = world_readable_dir("ablate-iso-")
    try:
        yield Box(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _ablate(bin_dir: Path, user: User | None, box: Box, env: dict[str, str], *args: str) -> Any:
    argv = [str(bin_dir / "ablate"), *args]
    proc = subprocess.run(
        user.argv(argv) if user else argv, env=env, capture_output=True, text=True, timeout=600, cwd=box.base
    )
    return proc


def _common(box: Box) -> list[str]:
    return ["--config-dir", str(box.ex.config_dir), "--repo", str(box.ex.repo)]


def _check_run(box: Box, bin_dir: Path, user: User | None, claude: Path, mode: str) -> None:
    with SimServer(box.script()) as sim:
        proc = _ablate(
            bin_dir,
            user,
            box,
            box.env(claude, sim.base_url),
            "run",
            "--tasks",
            str(box.task),
            "--cells",
            "binary",
            "--max-turns",
            "3",
            "--jobs",
            "1",
            "--out",
            str(box.base / "runs"),
            "--work-dir",
            str(box.base / "envs"),
            *_common(box),
            "--report",
            "none",  # the box is under test, not the report
            "--json",
        )
    assert proc.returncode == 0, why(proc.stderr[-3000:], items_said(box.base / "runs"))
    (folder,) = list((box.base / "runs").iterdir())
    manifest = orjson.loads((folder / "manifest.json").read_bytes())
    assert (manifest["isolation"]["backend"], manifest["isolation"]["mode"]) == ("namespace", mode)
    assert manifest["isolation"]["locked"] is True
    assert _attacked(folder) == 2
    assert _first_seen(folder) == [0, 0]
    assert box.changed() == []
    assert box.left_in_tmp() == []


def _check_probe(box: Box, bin_dir: Path, user: User | None, claude: Path, mode: str) -> None:
    work = box.base / "probe"
    env = box.env(claude, "http://127.0.0.1:9")  # the probe forces its own capture endpoint
    proc = _ablate(
        bin_dir, user, box, env, "probe", "--cell", "C0", "--work", str(work), *_common(box), "--json"
    )
    doc = orjson.loads(proc.stdout) if proc.stdout.strip() else {}
    assert proc.returncode == 0, why(proc.stderr[-3000:], (doc.get("fidelity") or {}).get("differences"))
    assert (doc["isolation"]["backend"], doc["isolation"]["mode"]) == ("namespace", mode)
    assert doc["fidelity"]["equal"], doc["fidelity"]
    assert doc["real_setup_unchanged"]
    texts = [json.dumps(r.body) for r in iter_requests(work / "requests.jsonl") if r.is_messages]
    seen = [int(n) for t in texts for n in re.findall(r"SEEN=\[(\d+)\]", t)]
    assert len(seen) >= 2 and set(seen) == {0}, seen  # the untouched session's hook and C0's
    assert box.changed() == []
    assert box.left_in_tmp() == []


@pytest.mark.parametrize("who", ["root", "user"])
def test_a_session_cannot_undo_its_view(
    who: str, claude: Path, box: Box, request: pytest.FixtureRequest
) -> None:
    if who == "root" and os.geteuid() != 0:
        pytest.skip("runs as an ordinary user: the root case needs root")
    user: User | None = None
    bin_dir = BIN
    if who == "user":
        user = request.getfixturevalue("ordinary_user")
        bin_dir = request.getfixturevalue("installed")
        assert user is not None
        user.own(box.base)
    ns = namespace_check()
    if who == "root" and not (ns.ok and ns.locked):
        pytest.skip(f"namespace backend not locked here: {ns.reason}")
    mode = "root" if who == "root" else "user-namespace"
    _check_run(box, bin_dir, user, claude, mode)
    _check_probe(box, bin_dir, user, claude, mode)


def test_compare_as_an_ordinary_user_changes_nothing(
    ordinary_user: User, installed: Path, claude: Path, box: Box
) -> None:
    arm = box.base / "rules.md"
    arm.write_text("# Rules\n\nBe brief.\n")
    ordinary_user.own(box.base)
    with SimServer(box.script()) as sim:
        proc = _ablate(
            installed,
            ordinary_user,
            box,
            box.env(claude, sim.base_url),
            "compare",
            f"one={arm}",
            f"two={arm}@duplicate:Rules",
            "--tasks",
            str(box.task),
            "--repeats",
            "5",  # the fewest compare takes
            "--max-turns",
            "3",
            "--jobs",
            "2",
            "--claude-bin",
            str(claude),
            "--work-dir",
            str(box.base / "envs"),
            "--out",
            str(box.base / "runs"),
            *_common(box),
            "--yes",
            "--json",
        )
    assert proc.returncode == 0, why(proc.stderr[-3000:], items_said(box.base / "runs"))
    doc = orjson.loads(proc.stdout)
    run = box.base / "runs" / doc["compare_id"] / doc["execution"]["run_folder"]
    assert box.changed() == [] and box.left_in_tmp() == []
    assert _attacked(run) == 10
    assert _first_seen(run) == [0] * 10
    isolation = orjson.loads((run / "manifest.json").read_bytes())["isolation"]
    assert (isolation["backend"], isolation["mode"]) == ("namespace", "user-namespace")
    assert isolation["auth"] == {"method": "api-key", "source": "ANTHROPIC_API_KEY"}


def test_links_fence_as_an_ordinary_user_refuses_and_reports(
    ordinary_user: User, installed: Path, claude: Path, box: Box
) -> None:
    """``--isolation links`` (the fallback, asked for): the hostile session's writes through the shadow
    home's links fail with EROFS instead of landing, and each session's refused writes are in its result."""
    ordinary_user.own(box.base)
    with SimServer(box.script()) as sim:
        proc = _ablate(
            installed,
            ordinary_user,
            box,
            box.env(claude, sim.base_url),
            "run",
            "--tasks",
            str(box.task),
            "--cells",
            "binary",
            "--max-turns",
            "3",
            "--jobs",
            "1",
            "--out",
            str(box.base / "runs"),
            "--work-dir",
            str(box.base / "envs"),
            *_common(box),
            "--isolation",
            "links",
            "--report",
            "none",  # the fence is under test, not the report
            "--json",
        )
    assert box.changed() == [] and box.left_in_tmp() == []
    assert proc.returncode == 0, why(proc.stderr[-3000:], items_said(box.base / "runs"))
    (folder,) = list((box.base / "runs").iterdir())
    isolation = orjson.loads((folder / "manifest.json").read_bytes())["isolation"]
    assert (isolation["backend"], isolation["mode"], isolation["locked"]) == ("links", "fenced", True)
    assert _attacked(folder) == 2
    results = [orjson.loads(p.read_bytes()) for p in sorted((folder / "results").glob("*.json"))]
    for r in results:
        denied = {d["path"] for d in r["writes"]["denied"]}
        assert "~/.bashrc" in denied, r["writes"]  # the home, as the session's tool named it
    assert "2 of 2 sessions were refused writing ~/.bashrc — the fence held" in proc.stderr
    assert sorted(isolation["fence_denied"]["~/.bashrc"]) == sorted(r["item"] for r in results)


def test_doctor_as_an_ordinary_user_names_the_backend_and_why(
    ordinary_user: User, installed: Path, claude: Path, box: Box
) -> None:
    ordinary_user.own(box.base)
    env = box.env(claude, "http://127.0.0.1:9")
    proc = _ablate(
        installed, ordinary_user, box, env, "doctor", "--config-dir", str(box.ex.config_dir), "--json"
    )
    doc = orjson.loads(proc.stdout)
    assert proc.returncode == 0, why(proc.stderr, doc["problems"])
    assert doc["ok"] and doc["problems"] == []
    iso = doc["isolation"]
    assert (iso["backend"], iso["mode"], iso["locked"]) == ("namespace", "user-namespace", True)
    assert "ordinary user" in iso["reason"] and "bubblewrap" in iso["reason"]
    assert doc["auth"] == {"method": "api-key", "source": "ANTHROPIC_API_KEY"}
    assert doc["claude"]["version"] == doc["claude"]["pinned"]
    # without a login anywhere, the doctor says so and fails
    env.pop("ANTHROPIC_API_KEY")
    (box.ex.config_dir / ".credentials.json").unlink()
    proc = _ablate(
        installed, ordinary_user, box, env, "doctor", "--config-dir", str(box.ex.config_dir), "--json"
    )
    doc = orjson.loads(proc.stdout)
    assert proc.returncode == 1 and doc["auth"]["method"] == "none"
    assert any("claude setup-token" in p["fix"] for p in doc["problems"])

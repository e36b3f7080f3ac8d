"""Test doubles for the runner: a fake `claude` executable and an environment backend of plain folders.

The fake CLI writes a transcript and a `--output-format json` result like the real one (docs/CLAUDE-CODE.md#transcript, docs/CLAUDE-CODE.md#json-output), so the
real miner reads them. What it does is keyed on words in the prompt and on ``FAKE_*`` variables:

* ``FAKE_RL_CALLS=N``: the first N calls (counted in ``FAKE_STATE``, a file) answer with a 429;
  ``FAKE_RL_MESSAGE`` replaces the 429 text (e.g. a "hit your limit · resets …" message).
* prompt contains ``SLEEP``: sleep 60 s (a session that times out or gets killed);
* prompt contains ``FAIL500``: a 500 api_error after retries;
* ``FAKE_COST``: the session's cost (default 0.01); ``FAKE_AGENT=1``: also write a sub-agent transcript.
* prompt contains ``DAEMON``: start a double-forked ``sleep`` (its own session, parent exited: out of the
  process tree) whose command line carries ``FAKE_DAEMON_MARK``, as a model's ``setsid … &`` would.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.isolate.backend import CellConfig
from ablate.setup.cells import ResolvedCell

FAKE_CLAUDE = r"""
import json, os, sys, time, pathlib, uuid
args = sys.argv[1:]
if args == ["--version"]:
    print("2.1.332 (Claude Code)")
    sys.exit(0)
sid = args[args.index("--session-id") + 1]
prompt = args[args.index("--") + 1]
cfg = pathlib.Path(os.environ["CLAUDE_CONFIG_DIR"])
proj = cfg / "projects" / "-fake-cwd"
proj.mkdir(parents=True, exist_ok=True)
n = 0
state = os.environ.get("FAKE_STATE")
if state:
    fd = os.open(state, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, b"x")
    n = os.fstat(fd).st_size - 1
    os.close(fd)
ts = "2026-12-01T10:00:00.000Z"
base = {"sessionId": sid, "cwd": os.getcwd(), "version": "2.1.332", "timestamp": ts}
recs = [dict(base, type="user", uuid=str(uuid.uuid4()), message={"role": "user", "content": prompt})]
cost = float(os.environ.get("FAKE_COST", "0.01"))
def emit(doc, code):
    with open(proj / (sid + ".jsonl"), "w") as fh:
        for r in recs:
            fh.write(json.dumps(r) + "\n")
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
    sys.exit(code)
if "DAEMON" in prompt:
    import subprocess
    subprocess.Popen(["sh", "-c", "setsid sleep " + os.environ["FAKE_DAEMON_MARK"] + " >/dev/null 2>&1 &"],
                     start_new_session=True).wait()
if "SLEEP" in prompt:
    with open(proj / (sid + ".jsonl"), "w") as fh:
        fh.write(json.dumps(recs[0]) + "\n")
    time.sleep(60)
if n < int(os.environ.get("FAKE_RL_CALLS", "0")) or "FAIL500" in prompt:
    status = 500 if "FAIL500" in prompt else 429
    text = os.environ.get("FAKE_RL_MESSAGE") or f"API Error: Request rejected ({status}) · slow down"
    recs.append(dict(base, type="assistant", uuid=str(uuid.uuid4()), isApiErrorMessage=True,
                     error="rate_limit" if status == 429 else "unknown", apiErrorStatus=status,
                     message={"id": str(uuid.uuid4()), "model": "<synthetic>", "role": "assistant",
                              "content": [{"type": "text", "text": text}],
                              "usage": {"input_tokens": 0, "output_tokens": 0}}))
    recs.append(dict(base, type="cost-state", totalCostUSD=0.0))
    emit({"type": "result", "subtype": "success", "is_error": True, "terminal_reason": "api_error",
          "api_error_status": status, "result": text, "session_id": sid, "num_turns": 1,
          "total_cost_usd": 0.0}, 1)
recs.append(dict(base, type="assistant", uuid=str(uuid.uuid4()),
                 message={"id": "msg_" + uuid.uuid4().hex, "model": args[args.index("--model") + 1], "role": "assistant",
                          "content": [{"type": "text", "text": "Done: " + prompt[:40]}],
                          "stop_reason": "end_turn", "usage": {"input_tokens": 100, "output_tokens": 10}}))
recs.append(dict(base, type="cost-state", totalCostUSD=cost))
if os.environ.get("FAKE_AGENT"):
    sub = proj / sid / "subagents"
    sub.mkdir(parents=True, exist_ok=True)
    (sub / "agent-a1.jsonl").write_text(json.dumps(dict(base, type="user", isSidechain=True,
        agentId="a1", message={"role": "user", "content": "sub"})) + "\n")
    (sub / "agent-a1.meta.json").write_text(json.dumps({"agentType": "helper"}))
emit({"type": "result", "subtype": "success", "is_error": False, "terminal_reason": "completed",
      "result": "Done", "session_id": sid, "num_turns": 1, "total_cost_usd": cost, "duration_ms": 5}, 0)
"""


def write_fake_claude(dest: Path) -> Path:
    """Write the fake CLI as an executable script and return its path. Its interpreter is the real one behind
    the venv's link (the script needs the standard library only): a venv under /tmp, as in a clone there, is
    hidden from a fenced session by its private /tmp, and the script would not start."""
    dest.write_text(f"#!{os.path.realpath(sys.executable)}\n{FAKE_CLAUDE}")
    dest.chmod(0o755)
    return dest


@dataclass
class FakeEnv:
    root: Path
    config_dir: Path
    cwd: Path
    env: dict[str, str]
    cell: str
    slot: int


@dataclass
class FakeBackend:
    """Environments as plain folders; records every build, reset and teardown."""

    root: Path
    base_env: dict[str, str]
    builds: list[tuple[str, int]] = field(default_factory=list)
    resets: int = 0
    retargets: list[tuple[str, str]] = field(default_factory=list)
    teardowns: int = 0
    cleans: int = 0

    def build(self, cell: ResolvedCell, slot: int) -> FakeEnv:
        self.builds.append((cell.id, slot))
        root = self.root / (cell.dirname + (f"s{slot}" if slot else ""))
        cfg = root / "home" / ".claude"
        cwd = root / "work"
        cfg.mkdir(parents=True, exist_ok=True)
        cwd.mkdir(parents=True, exist_ok=True)
        env = {**self.base_env, "CLAUDE_CONFIG_DIR": str(cfg), "HOME": str(root / "home")}
        return FakeEnv(root, cfg, cwd, env, cell.id, slot)

    def cell_config(self, cell: ResolvedCell) -> CellConfig:
        return CellConfig(self.root / "configs" / cell.dirname, {})

    def prepare(self, cells: Sequence[ResolvedCell]) -> None: ...

    def reset(self, env: Any) -> None:
        self.resets += 1
        import shutil

        shutil.rmtree(env.config_dir / "projects", ignore_errors=True)

    def retarget(self, env: Any, cell: ResolvedCell) -> None:
        self.retargets.append((env.cell, cell.id))
        self.reset(env)
        env.cell = cell.id

    def teardown(self, env: Any) -> None:
        self.teardowns += 1

    def describe(self, env: Any) -> dict[str, Any]:
        return {
            "fingerprints": {"fake": env.cell},
            "leaks": [],
            "notes": [],
            "env": {"HOME": env.env["HOME"]},
        }

    def clean(self) -> None:
        self.cleans += 1

    def close(self) -> None:
        pass

    def command(self, env: Any, argv: list[str]) -> list[str]:
        return list(argv)

    def after_session(self, env: Any) -> dict[str, Any] | None:
        return None

    def stripped_paths(self, env: Any) -> list[str]:
        return []

    def checkout(self, env: Any) -> Any:
        import contextlib

        return contextlib.nullcontext(env.cwd)


def base_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FAKE_STATE": str(tmp / "calls")}
    env.update(extra)
    return env

"""Shared helpers for tests that launch the real ``claude`` CLI against ablate's simulated endpoint.

Every run gets an environment built from scratch (never the test process's own), a fresh
``CLAUDE_CONFIG_DIR`` and HOME, and a fixed ``--session-id`` so the transcript is found by id.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ablate.core.claude import claude_argv
from ablate.core.proc import run_process

MODEL = "claude-sonnet-4-6"
PATH = "/usr/local/bin:/usr/bin:/bin"
#: the test venv's bin folder, where ``ablate`` (and the tools the tests run) are installed
BIN = Path(sys.executable).parent
#: the ``ablate`` command of this venv, for tests that run it as a user would (a process of its own)
ABLATE = str(BIN / "ablate")


def claude_env(
    *,
    home: Path,
    config_dir: Path,
    base_url: str,
    max_retries: int = 0,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of a test run: nothing inherited, loopback endpoint, telemetry off."""
    env = {
        "PATH": PATH,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "IS_SANDBOX": "1",
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-test",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_MAX_RETRIES": str(max_retries),
    }
    env.update(extra or {})
    return env


def tools_then_done(marker: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A sim script (``ablate.sim.script_from_data`` data): a prompt containing ``marker`` gets the tool calls
    ``tools`` on its first turn and "done" after them; anything else gets "OK"."""
    base = {"where": "prompt", "contains": [marker]}
    return {
        "default": {"text": "OK"},
        "rules": [
            {**base, "name": f"{marker}-tools", "turn": 0, "tool_use": tools},
            {**base, "name": f"{marker}-done", "turn": {"min": 1}, "text": "done"},
        ],
    }


@dataclass(frozen=True)
class ClaudeRun:
    """What one ``claude -p`` run left behind."""

    returncode: int
    stdout: str
    stderr: str
    output: dict[str, Any] | None
    """The ``--output-format json`` result, or None when stdout is not one JSON object."""
    session_id: str
    config_dir: Path
    duration_s: float

    def transcript(self) -> Path | None:
        """``projects/*/<session_id>.jsonl`` in the run's config dir (the CLI picks the slug)."""
        return find_transcript(self.config_dir, self.session_id)

    def records(self) -> list[dict[str, Any]]:
        path = self.transcript()
        return read_jsonl(path) if path else []

    def subagent_files(self) -> list[Path]:
        return sorted(self.config_dir.glob(f"projects/*/{self.session_id}/subagents/agent-*.jsonl"))


def run_claude(
    claude: Path,
    prompt: str,
    *,
    cwd: Path,
    home: Path,
    config_dir: Path,
    base_url: str,
    max_turns: int = 10,
    max_retries: int = 0,
    model: str = MODEL,
    timeout: float = 120,
    extra_env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
) -> ClaudeRun:
    """Run ``claude -p --output-format json`` once, the way ablate runs it, and collect the result."""
    session_id = str(uuid.uuid4())
    argv = claude_argv(
        claude,
        prompt=prompt,
        model=model,
        session_id=session_id,
        max_turns=max_turns,
        extra=extra_args,
    )
    env = claude_env(
        home=home, config_dir=config_dir, base_url=base_url, max_retries=max_retries, extra=extra_env
    )
    res = run_process(argv, cwd=cwd, env=env, timeout=timeout)
    stdout = res.stdout.decode("utf-8", "replace")
    output: dict[str, Any] | None
    try:
        parsed = orjson.loads(stdout) if stdout.strip() else None
        output = parsed if isinstance(parsed, dict) else None
    except orjson.JSONDecodeError:
        output = None
    return ClaudeRun(
        returncode=res.returncode,
        stdout=stdout,
        stderr=res.stderr_tail,
        output=output,
        session_id=session_id,
        config_dir=config_dir,
        duration_s=res.duration_s,
    )


def find_transcript(config_dir: Path, session_id: str) -> Path | None:
    hits = sorted(config_dir.glob(f"projects/*/{session_id}.jsonl"))
    return hits[0] if hits else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with path.open("rb") as fh:
        for line in fh:
            if line.strip():
                rec = orjson.loads(line)
                if isinstance(rec, dict):
                    out.append(rec)
    return out


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A real git repository with one commit (README.md by default)."""
    path.mkdir(parents=True, exist_ok=True)
    for rel, text in (files or {"README.md": "# Demo app\n\nA tiny demo.\n"}).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git = [
        "git",
        "-c",
        "user.name=ablate-test",
        "-c",
        "user.email=test@example.invalid",
        "-c",
        "init.defaultBranch=main",
    ]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(
            [*git, *args], cwd=path, check=True, capture_output=True, env={"PATH": PATH, "HOME": str(path)}
        )
    return path


def write_skill(config_dir: Path, name: str, description: str, body: str) -> Path:
    """``skills/<name>/SKILL.md`` with a name/description frontmatter."""
    path = config_dir / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    return path


def write_agent(
    config_dir: Path, name: str, description: str, body: str, tools: tuple[str, ...] = ("Read", "Bash")
) -> Path:
    """``agents/<name>.md`` with name, description and tools frontmatter."""
    path = config_dir / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {name}\ndescription: {description}\ntools: {', '.join(tools)}\n---\n{body}\n"
    )
    return path


def tool_uses(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ``tool_use`` block of the assistant records, in order."""
    out: list[dict[str, Any]] = []
    for rec in records:
        if rec.get("type") != "assistant":
            continue
        content = rec.get("message", {}).get("content")
        if isinstance(content, list):
            out.extend(b for b in content if isinstance(b, dict) and b.get("type") == "tool_use")
    return out


def tool_results(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ``tool_result`` block of the user records, in order."""
    out: list[dict[str, Any]] = []
    for rec in records:
        if rec.get("type") != "user":
            continue
        content = (rec.get("message") or {}).get("content")
        if isinstance(content, list):
            out.extend(b for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return out


def tool_output(transcript: Path) -> str:
    """What every tool said back in the session of ``transcript``, one ``tool_result`` per line (a result's
    content as the CLI wrote it: text as is, a list of blocks as JSON)."""
    said = (block.get("content") for block in tool_results(read_jsonl(transcript)))
    return "\n".join(c if isinstance(c, str) else json.dumps(c) for c in said)


class Invoked(NamedTuple):
    """What ``ablate ARGS`` run in this process gave, named as click's ``Result`` names it: the exit code, and
    stdout and stderr apart (to parse ``--json`` from stdout alone)."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """Everything the command printed: stdout, then stderr."""
        return self.stdout + self.stderr

    @property
    def shown(self) -> tuple[int, str]:
        """The exit code and everything the command printed."""
        return self.exit_code, self.output


def invoke(args: Sequence[str], env: Mapping[str, str | None] | None = None) -> Invoked:
    """The one in-process CLI wrapper of the tests: ``ablate ARGS`` through typer's ``CliRunner`` (``env``:
    variables set for the call only, ``None`` unsets one). A command that ends in a traceback instead of an
    exit code fails the test: every bad input is a located error with a documented code."""
    from typer.testing import CliRunner

    from ablate.cli.main import add_groups

    res = CliRunner().invoke(add_groups(), list(args), env=dict(env) if env is not None else None)
    assert res.exception is None or isinstance(res.exception, SystemExit), (res.exception, res.output)
    return Invoked(res.exit_code, res.stdout, res.stderr)

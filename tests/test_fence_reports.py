"""The writes a fence refused, as a session's tools report them: a shell's ``<path>: Read-only file system``
and Claude Code's own Write and Edit tools (``EROFS: read-only file system, open '<path>.tmp.<pid>.<hex>'``,
the file it writes and renames), under bubblewrap; ``Operation not permitted``/``EPERM`` under macOS's
``sandbox-exec``. The end-to-end test runs the real CLI's Write and Edit tools under the Linux fence."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from ablate.core.claude import claude_argv
from ablate.isolate.fence import denied_writes, fence_support
from ablate.isolate.seal import fenced
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import MODEL, claude_env, tools_then_done


def _transcript(config_dir: Path, *outputs: str) -> None:
    project = config_dir / "projects" / "-repo"
    project.mkdir(parents=True)
    records = [
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": text}]}}
        for text in outputs
    ]
    (project / "s.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")


def test_claude_codes_own_tools_refusals_name_the_file_not_its_temporary_copy(tmp_path: Path) -> None:
    home = Path("/h")
    _transcript(
        tmp_path,
        "EROFS: read-only file system, open '/h/notes.md.tmp.2.469209a1b23e'",
        "EROFS: read-only file system, mkdir '/h/.config/app'",
        "sh: 1: cannot create /h/.gitconfig: Read-only file system",
        "zsh:1: read-only file system: /h/.zshrc",
        "EPERM: operation not permitted, open '/h/x'",  # not bubblewrap's: a chmod, say
    )
    assert denied_writes(tmp_path, homes=[home], fence="bubblewrap") == [
        {"path": "~/.config/app", "count": 1},
        {"path": "~/.gitconfig", "count": 1},
        {"path": "~/.zshrc", "count": 1},
        {"path": "~/notes.md", "count": 1},
    ]


def test_sandbox_exec_refusals_read_as_operation_not_permitted(tmp_path: Path) -> None:
    _transcript(
        tmp_path,
        "touch: /Users/me/x: Operation not permitted\nbash: /Users/me/.bashrc: Operation not permitted",
        "zsh:1: operation not permitted: /Users/me/.zshrc",  # the Bash tool runs the user's shell
        "EPERM: operation not permitted, open '/Users/me/.gitconfig.tmp.4711.0a3c8931ad29'",
        "sh: /Users/me/y: Read-only file system",  # no read-only mount on macOS: not this fence's
    )
    assert denied_writes(tmp_path, homes=[Path("/Users/me")], fence="sandbox-exec") == [
        {"path": "~/.bashrc", "count": 1},
        {"path": "~/.gitconfig", "count": 1},
        {"path": "~/.zshrc", "count": 1},
        {"path": "~/x", "count": 1},
    ]


@pytest.mark.e2e
def test_the_clis_write_and_edit_tools_refused_by_the_fence_are_reported(
    claude: Path, tmp_path: Path
) -> None:
    """One real session under the links fence writes a new file and edits one outside its cell: both fail,
    nothing changes there, and both are reported by the file's name."""
    if not fence_support().ok or fence_support().bwrap is None:
        pytest.skip(f"no bubblewrap fence here: {fence_support().reason}")
    cell, outside = tmp_path / "cell", tmp_path / "outside"
    config, repo = cell / "home" / ".claude", cell / "wt"
    config.mkdir(parents=True)
    repo.mkdir()
    outside.mkdir()
    (outside / "f.txt").write_text("orig\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    tools = [
        {"name": "Write", "input": {"file_path": str(outside / "new.txt"), "content": "x\n"}},
        {
            "name": "Edit",
            "input": {"file_path": str(outside / "f.txt"), "old_string": "orig", "new_string": "x"},
        },
    ]
    script = tools_then_done("WRITE-OUT", tools)
    argv = claude_argv(claude, prompt="WRITE-OUT", model=MODEL, session_id=str(uuid.uuid4()), max_turns=3)
    with SimServer(script_from_data(script)) as sim:
        env = claude_env(home=cell / "home", config_dir=config, base_url=sim.base_url)
        proc = subprocess.run(
            fenced(argv, root=cell, cwd=repo, visible=[outside]),
            cwd=repo,
            env={**env, "TMPDIR": str(cell / "tmp")},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "orig\n"
    assert denied_writes(config, fence="bubblewrap") == [
        {"path": str(outside / "f.txt"), "count": 1},
        {"path": str(outside / "new.txt"), "count": 1},
    ]

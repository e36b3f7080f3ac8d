"""Builder of the realistic setup in tests/data/real_setup (see its README): one setup with every shape that
made an earlier ``ablate probe`` fail on real published setups although nothing leaked."""

from __future__ import annotations

import json
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from ablate.core.slug import slug
from ablate.setup.examples import git

DATA = Path(__file__).resolve().parent / "data" / "real_setup"


@dataclass(frozen=True)
class RealSetup:
    home: Path
    config_dir: Path
    repo: Path
    unused_url: str
    """A loopback URL nobody listens on: where every endpoint variable of the fixture points."""


def unused_loopback_url() -> str:
    """``http://127.0.0.1:<port>`` of a port that was free a moment ago (a leak shows as an error)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def build_real_setup(dest: Path) -> RealSetup:
    home, repo = dest / "home", dest / "work" / "shop"
    shutil.copytree(DATA / "home", home)
    shutil.copytree(DATA / "repo", repo)
    cfg = home / ".claude"
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "shop")
    unused = unused_loopback_url()
    hooks = "python3 $HOME/.claude/hooks"

    def cmd(command: str, **extra: object) -> dict[str, object]:
        return {"hooks": [{"type": "command", "command": command, **extra}]}

    settings = {
        "hooks": {
            "SessionStart": [
                cmd(f"{hooks}/session_async.py", **{"async": True}),
                cmd(f"{hooks}/session_silent.py"),
            ],
            # an absolute path into the config dir: cells rewrite it, the probe compares it canonicalised
            "UserPromptSubmit": [cmd(f"python3 {cfg}/hooks/prompt_context.py")],
            "Stop": [cmd(f"{home}/tools/not-on-this-machine/stop_hook.py")],  # exit 127
            "PostToolUse": [{"matcher": "Bash", **cmd(f"python3 {cfg}/hooks/post_tool.py")}],
        },
        "outputStyle": "Terse Reviewer",
        "env": {"ANTHROPIC_BASE_URL": unused, "FIXTURE_FLAG": "1"},
        "apiKeyHelper": "echo sk-from-helper",
    }
    (cfg / "settings.json").write_text(json.dumps(settings, indent=2))
    # hook state holding projects/ behind a link: auto-memory and an old transcript live in data/projects
    project = cfg / "data" / "projects" / slug(str(repo.resolve()))
    (project / "memory").mkdir(parents=True)
    (project / "memory" / "MEMORY.md").write_text(
        "# Memory\n\n- The payments service owns the refunds table, marker m3m0.\n"
    )
    (project / "0000-old-session.jsonl").write_text('{"type":"user","message":"old history h1st"}\n')
    (cfg / "projects").symlink_to(cfg / "data" / "projects")
    return RealSetup(home, cfg, repo, unused)

"""ablate inside Claude Code: the repository's plugin (plugin/) loaded with `--plugin-dir`, or installed from
the repository's marketplace entry (.claude-plugin/marketplace.json), in one real `claude -p` session against
ablate.sim. The skill and the commands are listed in the request, and
`/ablate:usage` runs `ablate usage --json` (from PATH) and the model receives its output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from ablate import __version__
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import BIN, claude_env, make_repo, run_claude

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugin"


@pytest.mark.parametrize("how", ["plugin-dir", "marketplace"])
def test_the_plugin_lists_its_skill_and_usage_reaches_the_model(
    claude: Path, tmp_path: Path, how: str
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "# app\n"})
    home = tmp_path / "home"
    home.mkdir()
    config_dir = home / ".claude"
    path = f"{BIN}:/usr/bin:/bin"  # the `ablate` of this venv
    with SimServer(script_from_data({"default": {"text": "OK"}})) as sim:
        if how == "marketplace":  # as a user installs it: the repository as a marketplace, then the plugin
            env = claude_env(home=home, config_dir=config_dir, base_url=sim.base_url)
            for args in (["marketplace", "add", str(ROOT)], ["install", "ablate@ablate"]):
                done = subprocess.run([str(claude), "plugin", *args], env=env, capture_output=True, text=True)
                assert done.returncode == 0 and "Successfully" in done.stdout, (
                    args,
                    done.stdout,
                    done.stderr,
                )
        run = run_claude(
            claude,
            "/ablate:usage",
            cwd=repo,
            home=home,
            config_dir=config_dir,
            base_url=sim.base_url,
            extra_args=("--plugin-dir", str(PLUGIN)) if how == "plugin-dir" else (),
            extra_env={"PATH": path},
        )
        requests = [r for r in sim.requests() if r.is_messages]
    assert run.returncode == 0, run.stderr
    assert len(requests) == 1
    text = requests[0].text
    assert "- ablate:ablate: Use when the user asks whether their Claude Code setup" in text
    for command in ("usage", "probe", "report"):
        assert f"- ablate:{command}: " in text
    # the command's !`ablate usage --json` ran in the session's repository and its output is in the prompt
    body = text.split("The output of `ablate usage --json ` for this repository:", 1)[1]
    doc = orjson.loads(body.split("Summarise it for the user", 1)[0])
    assert doc["window"]["config_dir"] == str(config_dir.resolve())
    assert doc["window"]["repo"] == str(repo.resolve())
    assert doc["sessions"]["count"] == 0 and {r["id"] for r in doc["layers"]} >= {"user-claude-md", "skills"}
    manifest = orjson.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_bytes())
    assert manifest["version"] == __version__

"""End to end: the login check before a run's first session, through the real CLI.

A user who logs in with the config dir's ``.credentials.json`` (no API key in the environment) and declares
a layer of their own that covers it: C11 strips every config layer, so its sessions would start logged out
(and fall back to whatever else they find), while C0 keeps the login. ``ablate ab`` refuses the run with
exit 2 before any session starts, naming the cell and the fix; the real credentials file is untouched.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ablate.core.fsutil import tree_hash
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, iter_requests, script_from_data
from tests.helpers_cli import ABLATE

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("isolation", ["links", "namespace"])
def test_a_run_whose_c11_would_log_in_differently_is_refused_before_any_session(
    isolation: str, claude: Path, tmp_path: Path
) -> None:
    if isolation == "namespace":
        from ablate.isolate.detect import namespace_check

        ok, why = namespace_check().ok, namespace_check().reason
        if not ok:
            pytest.skip(f"namespace backend unavailable: {why}")
    ex = materialise_example(tmp_path / "ex")
    assert (ex.config_dir / ".credentials.json").is_file()  # the example's login
    toml = tmp_path / "ablate.toml"
    toml.write_text(
        'schema_version = 1\n[[layer]]\nid = "login"\nside = "config"\npaths = [".credentials.json"]\n'
    )
    task = tmp_path / "t.toml"
    task.write_text('schema_version = 1\nid = "t"\nprompt = "Say OK."\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env["ABLATE_PROBE"] = "0"  # no probe-first step: one CLI start per cell, not under test here
    env.update({"HOME": str(ex.home), "IS_SANDBOX": "1"})
    before = tree_hash(ex.config_dir)
    log = tmp_path / "requests.jsonl"
    with SimServer(script_from_data({"default": {"text": "OK"}, "rules": []}), log_path=log) as sim:
        proc = subprocess.run(
            [
                ABLATE,
                "ab",
                "--tasks",
                str(task),
                "--out",
                str(tmp_path / "runs"),
                "--isolation",
                isolation,
                "--ablate-toml",
                str(toml),
                "--report",
                "none",
                "--config-dir",
                str(ex.config_dir),
                "--repo",
                str(ex.repo),
                "--claude-bin",
                str(claude),
                "--work-dir",
                str(tmp_path / "envs"),
            ],
            env={**env, "ANTHROPIC_BASE_URL": sim.base_url},
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 2, proc.stderr
    said = proc.stderr
    assert "cell C11: would authenticate with nothing (logged out)" in said, said
    assert f"your setup with credentials-file ({ex.config_dir / '.credentials.json'})" in said
    assert "claude setup-token" in said and "CLAUDE_CODE_OAUTH_TOKEN" in said
    # no session started: nothing reached the model (ablate's own HEAD /api/hello tells the sim apart)
    assert not log.exists() or [r.path for r in iter_requests(log) if r.method != "HEAD"] == []
    assert list((tmp_path / "runs").glob("*/results/*.json")) == []
    assert tree_hash(ex.config_dir) == before  # the real login is untouched
    assert not (tmp_path / "envs").exists() or list((tmp_path / "envs").iterdir()) == []

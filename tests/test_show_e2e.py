"""`ablate show` end to end: a tiny real run (the real claude CLI against the demo's simulated model, the control
and C11, which strips everything, on release-notes: the skill it needs is gone, so the pair flips), then the
run's summary and the pair side by side, stacked, and as JSON."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ablate.core.resources import data_dir
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer

pytestmark = pytest.mark.e2e


def _ablate(args: list[str], env: dict[str, str], cols: int = 80) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ablate", *args], env={**env, "COLUMNS": str(cols)}, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


@pytest.mark.timeout(600)
def test_show_opens_the_flipped_pair_of_a_real_run(claude: Path, tmp_path: Path) -> None:
    example = materialise_example(tmp_path / "setup")
    cells = tmp_path / "cells.toml"
    cells.write_text(
        'schema_version = 1\nname = "two"\ncontrol = "C0"\n[[cell]]\nid = "C0"\nstrip = []\n'
        '[[cell]]\nid = "C11"\nstrip = "all"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env |= {"ABLATE_PROBE": "0", "ABLATE_CLAUDE_BIN": str(claude), "HOME": str(example.home)}
    with SimServer(data_dir("shadow") / "sim" / "demo.toml") as sim:
        env |= {"ANTHROPIC_BASE_URL": sim.base_url, "ANTHROPIC_API_KEY": "sk-test"}
        run = _ablate(
            ["run", "--cells", str(cells), "--tasks", str(data_dir("tasks") / "release-notes.toml"),
             "--repeats", "1", "--max-turns", "8", "--jobs", "2", "--out", str(tmp_path / "runs"),
             "--work-dir", str(tmp_path / "envs"), "--config-dir", str(example.config_dir),
             "--repo", str(example.repo), "--json"],
            env,
        )  # fmt: skip
    assert run.returncode in (0, 3), run.stdout[-2000:] + run.stderr[-2000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = _ablate(["show", str(run_dir)], env)
    assert summary.returncode == 0, summary.stderr
    lines = summary.stdout.splitlines()
    assert "C11" in lines[2] and "verdict" in lines[0]  # the answer first
    assert "  C11 (strips 9 layers (everything)): 1 of 1 pairs flipped" in lines
    assert f"      ablate show {run_dir} --cell C11 --task release-notes --repeat 0" in lines
    pair = _ablate(["show", str(run_dir), "--cell", "C11"], env)
    assert pair.returncode == 0, pair.stderr
    out = pair.stdout
    assert out.startswith("release-notes r0: C0 (control): passed · completed; C11: failed · completed")
    assert "[C0]" in out and "[C11]" in out  # stacked below 120 columns
    assert max(len(ln) for ln in out.splitlines()) <= 80
    assert "-release-notes" in out  # the stripped skill, removed from what C11 was offered
    assert "✗ pitfall bumps-version" in out and "✓ pitfall bumps-version" in out
    wide = _ablate(
        ["show", str(run_dir), "--cell", "C11", "--task", "release-notes", "--repeat", "0"], env, 160
    )
    assert "[C0]" not in wide.stdout and " │ " in wide.stdout
    assert max(len(ln) for ln in wide.stdout.splitlines()) <= 160
    data = orjson.loads(_ablate(["show", str(run_dir), "--cell", "C11", "--json"], env).stdout)
    control, other = data["control"], data["other"]
    assert (control["passed"], other["passed"]) == (True, False)
    assert control["answer"] and other["answer"] and control["tokens"] > 0 < other["tokens"]
    assert any(t["calls"] for t in control["turns"]) and control["prompt"].startswith(
        "Draft the release notes"
    )
    assert "attached context" in data["differs"] or "system prompt" in data["differs"]
    bad = _ablate(["show", str(run_dir), "--cell", "C7"], env)
    assert bad.returncode == 2 and "--cell C7: not a tested cell of this run" in bad.stderr
    assert "cells: C11" in bad.stderr and "Traceback" not in bad.stderr

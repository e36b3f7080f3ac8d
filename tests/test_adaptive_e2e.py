"""`ablate run --adaptive` end to end: the real claude CLI against the demo's simulated model.

On deploy-command, typed-farewell and deterministic-tests the demo's simulated model (shadow/sim/demo.toml)
hits a pitfall exactly when the whole setup is missing: cell C11 (strips everything) is planted, C2 (strips
axioms, which the model ignores) is null. The run is killed with SIGKILL mid-round and resumed: the same
analysis goes on, no item is scheduled or completed twice, the planted cell ends real, the null one does not,
and the run stops well before its maximum (about 25 sessions).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from ablate.core.resources import data_dir
from ablate.folder.layout import RunFolder
from ablate.folder.result import iter_results
from ablate.run.adaptive import read_state
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer

MAX_REPEATS = 12
TASKS = ("deploy-command", "typed-farewell", "deterministic-tests")


def _env(claude: Path, home: Path, base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env.update(
        ABLATE_CLAUDE_BIN=str(claude),
        HOME=str(home),
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="sk-test",
    )
    return env


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_adaptive_run_stops_early_survives_kill_9_and_finds_the_planted_layer(
    claude: Path, tmp_path: Path
) -> None:
    example = materialise_example(tmp_path / "setup")
    cells = tmp_path / "cells.toml"
    cells.write_text(
        'schema_version = 1\nname = "truth"\ncontrol = "C0"\n'
        '[[cell]]\nid = "C0"\nstrip = []\n'
        '[[cell]]\nid = "C11"\nstrip = "all"\n'
        '[[cell]]\nid = "C2"\nstrip = ["axioms"]\n'
    )
    args = [
        sys.executable, "-m", "ablate", "run", "--adaptive", "--max-repeats", str(MAX_REPEATS),
        "--min-effect", "0.5", "--cells", str(cells),
        *(a for t in TASKS for a in ("--tasks", str(data_dir("tasks") / f"{t}.toml"))),
        "--model", "claude-sonnet-4-6", "--max-turns", "8", "--jobs", "3", "--seed", "5",
        "--out", str(tmp_path / "runs"), "--work-dir", str(tmp_path / "envs"),
        "--config-dir", str(example.config_dir), "--repo", str(example.repo), "--json",
    ]  # fmt: skip
    with SimServer(data_dir("shadow") / "sim" / "demo.toml") as sim:
        env = _env(claude, example.home, sim.base_url)
        first = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        runs = tmp_path / "runs"
        deadline = time.monotonic() + 300
        killed_with: set[str] = set()
        while time.monotonic() < deadline and first.poll() is None:
            folders = [p for p in runs.iterdir() if p.is_dir()] if runs.exists() else []
            done = list((folders[0] / "results").glob("*.json")) if folders else []
            if len(done) >= 11 and len(done) % 9 != 0:  # past the first round (9 items), inside the second
                first.send_signal(signal.SIGKILL)
                killed_with = {p.stem for p in done}
                break
            time.sleep(0.05)
        first.wait(timeout=60)
        assert killed_with, "the run ended before it could be killed mid-round"
        (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
        folder = RunFolder(run_dir)
        before = {r.item: r.session_id for r in iter_results(folder) if r.complete}
        resumed = subprocess.run(
            [sys.executable, "-m", "ablate", "run", "--resume", str(run_dir), "--jobs", "3", "--json",
             "--work-dir", str(tmp_path / "envs")],
            env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    out = orjson.loads(resumed.stdout)
    state = read_state(folder)
    assert state is not None and out["adaptive"]["stopped"] == state.stopped == "decided"
    decisions = state.decisions()
    assert decisions["C11"].decision == "real", decisions["C11"].reason
    assert decisions["C2"].decision != "real", decisions["C2"].reason
    assert len(state.looks) < MAX_REPEATS  # stopped early
    plan = folder.read_plan()
    assert len({p.item for p in plan}) == len(plan)  # no item scheduled twice
    results = {r.item: r for r in iter_results(folder)}
    assert all(results[i].session_id == sid for i, sid in before.items())  # no complete item run again
    assert all(r.complete for r in results.values()) and set(results) == {p.item for p in plan}
    assert [lk.round for lk in state.looks] == list(range(1, len(state.looks) + 1))
    report = orjson.loads((run_dir / "report.json").read_bytes())
    assert report["sequential"]["stopped"] == "decided"

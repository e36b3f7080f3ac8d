"""`ablate run --adaptive` end to end: the real claude CLI against the demo's simulated model.

The demo's simulated model (shadow/sim/demo.toml) answers deterministic-tests and release-notes with a
pitfall exactly when the whole setup is missing: cell C11 (strips everything) is planted, C2 (strips axioms,
which the model ignores) is null. Five tasks (release-notes and four copies of deterministic-tests, one call
each) make every C11 block discordant and every C2 block concordant, so after round 2 (10 blocks; two
comparisons, Holm at 0.05) C11 is real and C2 is "no effect" (min effect 0.5: both e-values against an effect
of ±0.5 past 1 / 0.05; five blocks are too few for that): 30 sessions, 2 rounds of at most 12. The run
is killed with SIGKILL inside round 2 and resumed: the same analysis goes on, no item is scheduled or
completed twice, the planted cell ends real, the null one does not, and the report's marks are the
sequential ones.
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
from ablate.folder.adaptive import read_state
from ablate.folder.layout import RunFolder
from ablate.folder.result import iter_results
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer

MAX_REPEATS = 12
COPIES = 4
ROUND1 = ROUND2 = 3 * (COPIES + 1)


def _tasks(out: Path) -> list[Path]:
    """release-notes and COPIES copies of deterministic-tests under their own ids (same prompt, same answer)."""
    out.mkdir()
    source = (data_dir("tasks") / "deterministic-tests.toml").read_text()
    paths = [data_dir("tasks") / "release-notes.toml"]
    for i in range(COPIES):
        path = out / f"deterministic-tests-{i}.toml"
        path.write_text(source.replace('id = "deterministic-tests"', f'id = "deterministic-tests-{i}"'))
        paths.append(path)
    return paths


def _env(claude: Path, home: Path, base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env["ABLATE_PROBE"] = "0"  # no probe-first step: one CLI start per cell, not under test here
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
        *(a for t in _tasks(tmp_path / "tasks") for a in ("--tasks", str(t))),
        "--model", "claude-sonnet-4-6", "--max-turns", "8", "--jobs", "2", "--seed", "5",
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
            if ROUND1 + 2 <= len(done) < ROUND1 + ROUND2:  # inside the second round
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
            [sys.executable, "-m", "ablate", "run", "--resume", str(run_dir), "--jobs", "2", "--json", "--report", "now",
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
    assert len(state.looks) == 2 and decisions["C2"].decision == "no-effect"  # stopped early (of 12)
    assert state.looks[0].cells["C2"].decision == "undecided" and state.looks[-1].sessions == ROUND1 + ROUND2
    plan = folder.read_plan()
    assert len({p.item for p in plan}) == len(plan)  # no item scheduled twice
    per_cell = {c: sum(1 for p in plan if p.cell == c) for c in ("C0", "C11", "C2")}
    assert per_cell == {"C0": 2 * (COPIES + 1), "C11": 2 * (COPIES + 1), "C2": 2 * (COPIES + 1)}
    results = {r.item: r for r in iter_results(folder)}
    assert all(results[i].session_id == sid for i, sid in before.items())  # no complete item run again
    assert all(r.complete for r in results.values()) and set(results) == {p.item for p in plan}
    assert [lk.round for lk in state.looks] == list(range(1, len(state.looks) + 1))
    report = orjson.loads((run_dir / "report.json").read_bytes())
    assert report["sequential"]["stopped"] == "decided"
    pooled = {
        c["cell"]: c for c in report["comparisons"] if c["task"] is None and c["metric"] == "pitfall_free"
    }
    assert pooled["C11"]["real"] and not pooled["C2"]["real"]  # the report's marks are the sequential ones

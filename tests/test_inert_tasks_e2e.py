"""`ablate run --adaptive` end to end with the real CLI against ablate.sim: a task that tells the cells nothing
is named, stops being scheduled once the run is sure, and the report says what that saved.

The demo's simulated model answers deterministic-tests with its pitfall exactly when the whole setup is
missing (C11), so every block of that task is discordant. Its copy "inert" asks the same and gets the same
answers, but its pitfall pattern matches nothing: every session passes in both cells. With --min-effect 0.9 and
the default draw error 0.05 a task is dropped after ⌈ln 0.05 / ln 0.1⌉ = 2 blocks without a discordant one; C11
is real after 8 discordant blocks (anytime p 0.035; any min effect over 0.29 leaves that: the test's prior is
then the uniform), so rounds 3 to 8 run deterministic-tests alone: 2 × 4 + 6 × 2 = 20 sessions, one model call each,
12 saved.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ablate.core.resources import data_dir
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer
from tests.test_adaptive_e2e import _env

INERT_AFTER = 2
ROUNDS = 8


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_an_inert_task_is_dropped_after_enough_blocks_and_the_report_names_it_and_the_saving(
    claude: Path, tmp_path: Path
) -> None:
    example = materialise_example(tmp_path / "setup")
    cells = tmp_path / "cells.toml"
    cells.write_text(
        'schema_version = 1\nname = "two"\ncontrol = "C0"\n'
        '[[cell]]\nid = "C0"\nstrip = []\n[[cell]]\nid = "C11"\nstrip = "all"\n'
    )
    source = data_dir("tasks") / "deterministic-tests.toml"
    inert = tmp_path / "inert.toml"
    inert.write_text(
        source.read_text()
        .replace('id = "deterministic-tests"', 'id = "inert"')
        .replace(
            'pattern = "pytest-randomly|pytest-rerunfailures|--reruns|pip install"', 'pattern = "NEVER-4q7z"'
        )
    )
    args = [
        sys.executable, "-m", "ablate", "run", "--adaptive", "--max-repeats", "12", "--min-effect", "0.9",
        "--cells", str(cells), "--tasks", str(source), "--tasks", str(inert), "--model", "claude-sonnet-4-6",
        "--max-turns", "4", "--jobs", "2", "--seed", "5", "--out", str(tmp_path / "runs"),
        "--work-dir", str(tmp_path / "envs"), "--config-dir", str(example.config_dir), "--repo", str(example.repo),
        "--report", "now", "--json",
    ]  # fmt: skip
    with SimServer(data_dir("shadow") / "sim" / "demo.toml") as sim:
        env = _env(claude, example.home, sim.base_url)
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=560)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    state = orjson.loads((run_dir / "adaptive.json").read_bytes())
    assert state["stopped"] == "decided" and state["inert"] == {"inert": INERT_AFTER}
    assert len(state["looks"]) == ROUNDS
    plan = [orjson.loads(line) for line in (run_dir / "plan.jsonl").read_bytes().splitlines()]
    assert sorted({p["repeat"] for p in plan if p["task"] == "inert"}) == list(range(INERT_AFTER))
    assert len(plan) == INERT_AFTER * 4 + (ROUNDS - INERT_AFTER) * 2
    report = orjson.loads((run_dir / "report.json").read_bytes())
    rows = {r["id"]: r for r in report["tasks"]}
    assert (
        rows["deterministic-tests"]["discriminating"] and rows["deterministic-tests"]["discordant"] == ROUNDS
    )
    got = rows["inert"]
    assert (got["discriminating"], got["blocks"], got["dropped_after"], got["sessions_saved"]) == (
        False, INERT_AFTER, INERT_AFTER, 2 * (ROUNDS - INERT_AFTER)
    )  # fmt: skip
    per_session = report["run"]["spend_usd"] / len(plan)
    assert (
        got["usd_saved"] == pytest.approx(got["sessions_saved"] * per_session, rel=1e-3)
        and got["usd_saved"] > 0
    )
    md = (run_dir / "report.md").read_text()
    assert "## Tasks that tell the cells apart" in md and "| inert | 2 | 0 | no | 2 | 12 |" in md
    assert "**inert-tasks**: inert: every cell scored the same" in md and "saved 12 sessions" in md

"""`ablate demo` end to end: the real CLI, the probe, a 72-session run judged as it goes, and the ground truth
recovered."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.core.errors import UsageError
from ablate.grade.summary import grade_summary
from ablate.run.demo import MARKER, prepare_demo_folder, summarise_results


def test_demo_folder_is_only_reused_when_ablate_made_it(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="not an ablate demo folder"):
        prepare_demo_folder(theirs)
    assert (theirs / "keep.txt").read_text() == "mine"
    ours = prepare_demo_folder(tmp_path / "ours")
    (ours / "old-run").mkdir()
    again = prepare_demo_folder(tmp_path / "ours")
    assert (again / MARKER).exists() and not (again / "old-run").exists()


@pytest.mark.e2e
def test_demo_recovers_the_simulated_ground_truth(claude: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_"))}
    env["ABLATE_CLAUDE_BIN"] = str(claude)
    proc = subprocess.run(
        [sys.executable, "-m", "ablate", "demo", "--out", str(out), "--jobs", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "OK: 12 cells" in proc.stdout  # the probe proved every cell faithful
    (run_dir,) = [p for p in (out / "runs").iterdir() if p.is_dir()]
    cells = {s.cell: s for s in summarise_results(run_dir)}
    assert all(s.complete == s.items == 6 for s in cells.values())
    hits = {cid: s.pitfall_hits for cid, s in cells.items()}
    # shadow/sim/demo.toml's ground truth, recovered from the transcripts
    assert hits["C0"] == {}
    assert hits["C1"] == {"drops-hello": 1, "untested-claim": 1}
    assert hits["C4"] == {"bumps-version": 3}
    assert hits["C5"] == {"plugin-instead-of-seed": 2}
    assert hits["C6"] == {"drops-hello": 1}
    assert hits["C8"] == {"adds-dependency": 1}
    assert hits["C11"] == {
        "adds-dependency": 1,
        "bumps-version": 3,
        "drops-hello": 1,
        "plugin-instead-of-seed": 2,
        "untested-claim": 1,
        "untyped-def": 1,
        "wrong-region": 1,
    }
    for cid in ("C2", "C3", "C7", "C9", "C10"):
        assert hits[cid] == {}, cid
    # checks on the checkouts the sessions left, and the sim playing the blind judge as the run went
    graded = {g.cell: g for g in grade_summary(run_dir)}
    passed = {cid: (g.checks_passed, g.checked, g.judge_pass, g.judged) for cid, g in graded.items()}
    assert passed["C0"] == (3, 3, 6, 6)
    assert passed["C1"] == passed["C4"] == passed["C6"] == (2, 3, 5, 6)
    assert passed["C5"] == passed["C8"] == (3, 3, 5, 6)
    assert passed["C11"] == (0, 3, 0, 6)
    assert cells["C3"].mean_turns is not None and cells["C0"].mean_turns is not None
    assert cells["C3"].mean_turns > cells["C0"].mean_turns  # no lessons: deploy needs the runbook
    # the example setup the demo read is untouched by the run (its hook log only has the seed line)
    log = out / "setup" / "home" / ".claude" / "data" / "sessions.log"
    assert log.read_text().count("session start") == 1

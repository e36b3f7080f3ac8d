"""`ablate run --pieces` end to end with the real CLI: a planted piece that helps and one that hurts are found among
eight, and no null piece is flagged (issue 32, item 6).

The user CLAUDE.md of the example setup is rewritten as eight sections, each carrying a unique marker. The sim
(``seed_from = "session"``: an independent, reproducible draw per session) answers with the task's pitfall word
by which markers reached the request:

* the "helps" section present and the "hurts" one absent → never (pass rate 1);
* "hurts" present and "helps" absent → always (pass rate 0);
* both or neither → half the time (pass rate ½).

So keeping "helps" adds +50 points of the pitfall-free rate, keeping "hurts" −50, averaged over the other
(additive: no interaction), and the six null sections nothing. The screening design for eight pieces is the
folded-over Plackett–Burman N=12 (24 cells); two repeats of one task are 48 sessions, one turn each — simulated
with :func:`ablate.stats.screening_inference.analyse` the run finds both planted pieces with no null flagged
about 92% of the time (``tests/test_piece_run.py`` checks that rate); the run's seed fixes the draws, so the
test is deterministic. The run skips its probe-first step (26 more CLI starts): the probe of piece cells, a
faithful one and a deliberately wrong cut, is tested in ``tests/test_pieces_e2e.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data

HELP, HURT = "HELPMARK-7f3a", "HURTMARK-2c9b"
NULLS = [f"NULLMARK-{i}" for i in range(6)]
BAD = "BADWORD-9q"
SECTIONS = [("Helps", HELP), ("Hurts", HURT)] + [(f"Null {i}", m) for i, m in enumerate(NULLS)]
PIECES = [f"user-claude-md#{title.lower().replace(' ', '-')}" for title, _ in SECTIONS]
REPEATS = 2
SESSIONS = 24 * REPEATS

TASK = f"""schema_version = 1
id = "say-hello"
prompt = "Say hello in one short sentence."
[[pitfalls]]
id = "bad-word"
pattern = "{BAD}"
description = "The planted failure."
"""


def planted_script() -> dict[str, object]:
    """Pass rate 1 / 0 / ½ by which of the two planted markers reached the main model's request."""
    main = {"where": "request", "model": "sonnet"}
    return {
        "seed_from": "session",
        "default": {"text": "Hello there."},
        "rules": [
            {**main, "name": "hurts-alone", "contains": [HURT], "not_contains": [HELP], "text": BAD},
            {**main, "name": "both", "contains": [HELP, HURT], "probability": 0.5, "text": BAD},
            {**main, "name": "neither", "not_contains": [HELP, HURT], "probability": 0.5, "text": BAD},
        ],
    }


def run_pieces(
    claude: Path, tmp_path: Path, sections: list[tuple[str, str]], script: dict[str, object], *extra: str
) -> tuple[subprocess.CompletedProcess[str], float, Path]:
    """`ablate run` (``extra``: its piece options) on the example setup whose user CLAUDE.md is ``sections``,
    against the sim answering by ``script``: the finished process, its wall time and the run folder."""
    ex = materialise_example(tmp_path / "setup")
    (ex.config_dir / "CLAUDE.md").write_text(
        "".join(f"## {title}\nA note for the assistant ({marker}).\n\n" for title, marker in sections)
    )
    task = tmp_path / "say-hello.toml"
    task.write_text(TASK)
    args = [
        sys.executable, "-m", "ablate", "run", *extra, "--tasks", str(task), "--model", "claude-sonnet-4-6",
        "--max-turns", "2", "--jobs", "3", "--seed", "11", "--out", str(tmp_path / "runs"),
        "--work-dir", str(tmp_path / "envs"), "--config-dir", str(ex.config_dir), "--repo", str(ex.repo),
        "--report", "now",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    with SimServer(script_from_data(script)) as sim:
        env.update(
            ABLATE_CLAUDE_BIN=str(claude),
            HOME=str(ex.home),
            ANTHROPIC_BASE_URL=sim.base_url,
            ANTHROPIC_API_KEY="sk-test",
            ABLATE_PROBE="0",
        )
        started = time.monotonic()
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=880)
        wall = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    return done, wall, run_dir


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_piece_run_finds_the_planted_pieces_and_flags_no_null_one(claude: Path, tmp_path: Path) -> None:
    _done, wall, run_dir = run_pieces(
        claude, tmp_path, SECTIONS, planted_script(), "--pieces", ",".join(PIECES), "--design", "screening",
        "--confirm", "none", "--repeats", str(REPEATS), "--json",
    )  # fmt: skip
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["design"]["kind"] == "screening" and len(manifest["design"]["rows"]) == 24
    assert [p["id"] for p in manifest["design"]["pieces"]] == PIECES
    assert manifest["items"] == SESSIONS
    report = orjson.loads((run_dir / "report.json").read_bytes())
    rows = {r["id"]: r for r in report["pieces"]}
    assert report["piece_design"]["sessions"] == SESSIONS
    verdicts = {pid: rows[pid]["verdict"] for pid in PIECES}
    assert verdicts[PIECES[0]] == "helps", (verdicts, wall)
    assert verdicts[PIECES[1]] == "hurts", verdicts
    assert all(verdicts[p] not in ("helps", "hurts") for p in PIECES[2:]), verdicts
    help_row = rows[PIECES[0]]
    assert help_row["ci_low"] > 0 and help_row["tokens_per_point"] > 0
    assert "## Pieces" in (run_dir / "report.md").read_text()
    assert (run_dir / "plots" / "pieces.svg").exists()
    print(f"piece run: {SESSIONS} sessions in {wall:.0f}s wall")

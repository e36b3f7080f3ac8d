"""`ablate run --pieces --confirm` end to end with the real CLI: a planted piece that helps and one that hurts are
found among seven, no null piece is flagged (issue 32, item 6), and the one-out confirmation stage confirms the
helpful one (its removal interval excludes 0) and a null piece named with ``--confirm`` to be nothing of the
kind (issue 37, item 2). One run proves both (it was two runs, 110 sessions; now 83).

The user CLAUDE.md of the example setup is rewritten as seven sections, each carrying a unique marker. The sim
answers with the task's pitfall word exactly when the "hurts" marker reached the main model's request and the
"helps" one did not: a deterministic plant, so no seed decides the outcome. Averaged over the other piece (as
the screening estimates), keeping "helps" adds +50 points of the pitfall-free rate and keeping "hurts" −50; the
five null sections nothing. The screening design for seven pieces is the folded-over Plackett–Burman N=8 (16
rows a repeat) with its columns drawn at random from the run's seed, once per repeat (docs/PIECES.md#drawn):
the control and 3 × 15 drawn rows, 46 cells; three repeats of one task are 48 sessions, one turn each. The
conditional randomization test marks helps and hurts at Holm-adjusted p ≈ 0.003 (α = 0.05) and no null piece
(``tests/test_piece_run.py`` checks these figures for this seed). The stage then confirms "helps" and "hurts"
(real at screening) and "null 0" (named), and estimates the interaction of the two real ones: the control,
their three one-out cells and the cell without both, in the 7 blocks ``--max-sessions`` leaves (48 // 5 = 9
without it), 35 sessions. Removing "helps" from the full setup fails every block (exact test p = 2/2⁷, Holm over
three: 0.047, the fewest blocks under α = 0.05); removing "hurts" or "null 0" changes nothing; helps × hurts is
a synergy (+100 pts a block: "helps" matters only where "hurts" is kept). The run skips its probe-first step
(more CLI starts): the probe of piece cells, a faithful one and a deliberately wrong cut, is tested in
``tests/test_pieces_e2e.py``.
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
NULLS = [f"NULLMARK-{i}" for i in range(5)]
BAD = "BADWORD-9q"
SECTIONS = [("Helps", HELP), ("Hurts", HURT)] + [(f"Null {i}", m) for i, m in enumerate(NULLS)]
PIECES = [f"user-claude-md#{title.lower().replace(' ', '-')}" for title, _ in SECTIONS]
REPEATS = 3
SESSIONS = 16 * REPEATS
#: The stage's blocks: the fewest whose exact p (2/2⁷) stays under α after Holm over three pieces.
BLOCKS = 7
STAGE = 5 * BLOCKS

TASK = f"""schema_version = 1
id = "say-hello"
prompt = "Say hello in one short sentence."
[[pitfalls]]
id = "bad-word"
pattern = "{BAD}"
description = "The planted failure."
"""


def planted_script() -> dict[str, object]:
    """The pitfall word exactly when the "hurts" marker reached the main model's request and "helps" did not."""
    main = {"where": "request", "model": "sonnet"}
    return {
        "default": {"text": "Hello there."},
        "rules": [{**main, "name": "hurts-alone", "contains": [HURT], "not_contains": [HELP], "text": BAD}],
    }


def run_pieces(
    claude: Path, tmp_path: Path, sections: list[tuple[str, str]], script: dict[str, object], *extra: str
) -> tuple[subprocess.CompletedProcess[str], float, Path]:
    """`ablate run` (``extra``: its piece options) on the example setup whose user CLAUDE.md is ``sections``,
    against the sim answering by ``script``: the finished process, its wall time and the run folder. The setup's
    hooks are dropped: no piece under test, and its SessionStart hook is a python3 start in every session."""
    ex = materialise_example(tmp_path / "setup")
    settings = orjson.loads((ex.config_dir / "settings.json").read_bytes())
    (ex.config_dir / "settings.json").write_bytes(
        orjson.dumps({k: v for k, v in settings.items() if k != "hooks"})
    )
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


def report_method(run_dir: Path) -> str:
    """The test the report's piece rows rest on."""
    return str(orjson.loads((run_dir / "report.json").read_bytes())["piece_design"]["method"])


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_piece_run_finds_the_planted_pieces_and_the_stage_confirms_the_helpful_one(
    claude: Path, tmp_path: Path
) -> None:
    done, wall, run_dir = run_pieces(
        claude, tmp_path, SECTIONS, planted_script(), "--pieces", ",".join(PIECES), "--design", "screening",
        "--confirm", PIECES[2], "--repeats", str(REPEATS), "--max-sessions", str(SESSIONS + STAGE),
    )  # fmt: skip
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    # the design's columns are drawn from the run's seed, once per repeat: the control and 3 × 15 drawn rows
    assert manifest["design"]["kind"] == "screening" and manifest["design"]["drawn"] == 11
    # then a one-out cell per piece for the stage and a both-removed cell per pair of pieces
    assert len(manifest["design"]["rows"]) == 46 and len(manifest["cells"]) == 46 + 7 + 21
    assert report_method(run_dir) == "drawn-columns-conditional-randomization-test"
    assert [p["id"] for p in manifest["design"]["pieces"]] == PIECES
    plan = [orjson.loads(line) for line in (run_dir / "plan.jsonl").read_bytes().splitlines()]
    assert len(plan) == SESSIONS + STAGE
    report = orjson.loads((run_dir / "report.json").read_bytes())
    rows = {r["id"]: r for r in report["pieces"]}
    assert report["piece_design"]["sessions"] == SESSIONS
    # the screening: both planted pieces found, no null one flagged
    verdicts = {pid: rows[pid]["verdict"] for pid in PIECES}
    assert verdicts[PIECES[0]] == "helps", (verdicts, wall)
    assert verdicts[PIECES[1]] == "hurts", verdicts
    assert all(verdicts[p] not in ("helps", "hurts") for p in PIECES[2:]), verdicts
    helps = rows[PIECES[0]]
    assert helps["ci_low"] > 0 and helps["tokens_per_point"] > 0
    # confirmed: removing "helps" from the full setup loses the pass rate, with an interval above 0
    removal = helps["removal"]
    assert removal["verdict"] == "helps" and removal["blocks"] == BLOCKS, removal
    assert removal["effect"] > 0 and removal["ci_low"] > 0 and removal["p_adjusted"] <= 0.05
    # the named null piece is confirmed too, and removing it changes nothing
    named = rows[PIECES[2]]
    assert named["removal"]["verdict"] not in ("helps", "hurts"), named
    assert named["removal"]["ci_low"] <= 0 <= named["removal"]["ci_high"]
    assert rows[PIECES[1]]["removal"] is not None  # real at screening: confirmed as well
    assert all(rows[p].get("removal") is None for p in PIECES[3:])  # neither real nor named
    md = (run_dir / "report.md").read_text()
    assert "## Pieces" in md and "helps** (removal; screening: helps)" in md and "removing it" in md
    assert "helps (removal; screening: helps)" in done.stdout + done.stderr  # the terminal's headline
    assert (run_dir / "plots" / "pieces.svg").exists()
    # one task is no sample of tasks: the report says what a task-level claim about seven pieces needs
    general = report["generalization"]
    assert general["tasks"] == 1 and general["tasks_needed"] == 9
    assert "it needs at least 9" in general["subjects"][0]["sentence"] and "## How far it generalizes" in md
    # the two real pieces' interaction: helps matters only where hurts is kept
    (pair,) = report["interactions"]
    assert pair["pieces"] == PIECES[:2] and pair["verdict"] == "synergy" and pair["blocks"] == BLOCKS, pair
    print(f"piece run: {SESSIONS + STAGE} sessions in {wall:.0f}s wall")


MONEY, LEDGER = "MONEYMARK-41d0", "LEDGERMARK-8e2a"
PAIR_SECTIONS = [("Money", MONEY), ("Ledger", LEDGER)] + [(f"Null {i}", f"NULLMARK-{i}") for i in range(5)]
PAIR_PIECES = [f"user-claude-md#{title.lower().replace(' ', '-')}" for title, _ in PAIR_SECTIONS]
#: The stage's blocks, within what ``--max-sessions`` leaves beside the screening's 2 × 16 sessions (8 without it):
#: the fewest whose exact p (2/2⁷) stays under α after Holm over the two pieces.
PAIR_BLOCKS = 7


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_two_sections_that_help_only_together_are_each_confirmed_and_their_interaction_reported(
    claude: Path, tmp_path: Path
) -> None:
    """Among seven sections, "money" and "ledger" help only together: the sim answers with the pitfall word
    unless both markers reached the main model's request. Screening (2 repeats of the N=8 design, 32
    sessions; the seed's figures: ``tests/test_piece_run.py``) marks both real and none of the five null
    pieces; the stage runs the control, each removed and both removed in the 7 blocks ``--max-sessions`` leaves
    (32 // 4 = 8 without it): removing either fails every block (exact p = 2/2⁷, Holm over the two: 0.031), and
    the interaction is +100 pts in every block (exact p = 2/2⁷)."""
    script: dict[str, object] = {
        "default": {"text": "Hello there."},
        "rules": [
            {"where": "request", "model": "sonnet", "name": "both", "contains": [MONEY, LEDGER],
             "text": "Hello there."},
            {"where": "request", "model": "sonnet", "name": "not-both", "text": BAD},
        ],
    }  # fmt: skip
    _done, wall, run_dir = run_pieces(
        claude, tmp_path, PAIR_SECTIONS, script, "--pieces", ",".join(PAIR_PIECES), "--repeats", "2",
        "--max-sessions", str(2 * 16 + 4 * PAIR_BLOCKS),
    )  # fmt: skip
    report = orjson.loads((run_dir / "report.json").read_bytes())
    rows = {r["id"]: r for r in report["pieces"]}
    money, ledger = PAIR_PIECES[:2]
    # the screening: both found, no null piece marked
    assert rows[money]["verdict"] == "helps" and rows[ledger]["verdict"] == "helps", (rows, wall)
    assert all(rows[p]["verdict"] not in ("helps", "hurts") for p in PAIR_PIECES[2:])
    # confirmed: removing either loses the pass rate, with an interval above 0; no other piece is confirmed
    for p in (money, ledger):
        removal = rows[p]["removal"]
        assert removal["verdict"] == "helps" and removal["blocks"] == PAIR_BLOCKS, removal
        assert removal["effect"] == 1.0 and removal["ci_low"] > 0 and removal["p_adjusted"] <= 0.05
    assert all(rows[p].get("removal") is None for p in PAIR_PIECES[2:])
    # their interaction is found: together +100 pts, either alone nothing
    (pair,) = report["interactions"]
    assert pair["pieces"] == [money, ledger] and pair["verdict"] == "synergy", pair
    assert pair["effect"] == 1.0 and pair["blocks"] == PAIR_BLOCKS and pair["p_adjusted"] <= 0.05
    assert pair["alone"] == {money: 0.0, ledger: 0.0}
    said = f"{money} and {ledger} help only together: removing {money} loses +100 pts"
    md = (run_dir / "report.md").read_text()
    assert pair["sentence"].startswith(said) and said in md and "## Interactions" in md
    print(f"pair run: {len((run_dir / 'plan.jsonl').read_bytes().splitlines())} sessions in {wall:.0f}s wall")

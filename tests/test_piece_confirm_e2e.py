"""`ablate run --pieces --confirm` end to end with the real CLI: the screening marks a planted helpful piece real,
the one-out confirmation stage confirms it (its removal interval excludes 0), and a null piece named with
``--confirm`` is confirmed to be nothing of the kind (issue 37, item 2).

The user CLAUDE.md of the example setup is rewritten as four sections, each with a unique marker. The sim
(``seed_from = "session"``: an independent, reproducible draw per session) answers with the task's pitfall
word 90% of the time when the "helps" marker is missing from the request, never when it is there. So keeping
"helps" adds +90 points, the three null sections nothing. The screening design for four pieces is the
folded-over Plackett–Burman N=8 (16 cells); two repeats of one task are 32 sessions. The stage then confirms
"helps" (real at screening) and "null 0" (named): the control and their two cells in 32 // 3 = 10 blocks, 30
sessions. The run skips its probe-first step (the probe of piece cells is tested in test_pieces_e2e.py).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.test_piece_run_e2e import BAD, run_pieces

HELP = "HELPMARK-5d1e"
NULLS = [f"NULLMARK-{i}" for i in range(3)]
SECTIONS = [("Helps", HELP)] + [(f"Null {i}", m) for i, m in enumerate(NULLS)]
PIECES = [f"user-claude-md#{title.lower().replace(' ', '-')}" for title, _ in SECTIONS]
SCREENING = 16 * 2
STAGE = 3 * 10


def planted_script() -> dict[str, object]:
    """The pitfall word 90% of the time when the "helps" marker did not reach the main model's request."""
    main = {"where": "request", "model": "sonnet"}
    return {
        "seed_from": "session",
        "default": {"text": "Hello there."},
        "rules": [{**main, "name": "no-help", "not_contains": [HELP], "probability": 0.9, "text": BAD}],
    }


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_the_stage_confirms_the_planted_piece_and_not_the_named_null_one(
    claude: Path, tmp_path: Path
) -> None:
    done, wall, run_dir = run_pieces(
        claude, tmp_path, SECTIONS, planted_script(), "--pieces", ",".join(PIECES), "--design", "screening",
        "--confirm", PIECES[1], "--repeats", "2",
    )  # fmt: skip
    plan = [orjson.loads(line) for line in (run_dir / "plan.jsonl").read_bytes().splitlines()]
    assert len(plan) == SCREENING + STAGE
    report = orjson.loads((run_dir / "report.json").read_bytes())
    rows = {r["id"]: r for r in report["pieces"]}
    assert report["piece_design"]["sessions"] == SCREENING
    helps, named = rows[PIECES[0]], rows[PIECES[1]]
    assert helps["verdict"] == "helps", (rows, wall)
    assert all(rows[p]["verdict"] not in ("helps", "hurts") for p in PIECES[1:]), rows
    # confirmed: removing "helps" from the full setup loses the pass rate, with an interval above 0
    removal = helps["removal"]
    assert removal["verdict"] == "helps" and removal["blocks"] == 10, removal
    assert removal["effect"] > 0 and removal["ci_low"] > 0 and removal["p_adjusted"] <= 0.05
    # the named null piece is confirmed too, and removing it changes nothing
    assert named["removal"]["verdict"] not in ("helps", "hurts"), named
    assert named["removal"]["ci_low"] <= 0 <= named["removal"]["ci_high"]
    assert all(rows[p].get("removal") is None for p in PIECES[2:])  # neither real nor named
    md = (run_dir / "report.md").read_text()
    assert "helps** (removal; screening: helps)" in md and "removing it" in md
    assert "helps (removal; screening: helps)" in done.stdout + done.stderr  # the terminal's headline
    print(f"confirmation run: {SCREENING + STAGE} sessions in {wall:.0f}s wall")

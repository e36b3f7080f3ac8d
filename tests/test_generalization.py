"""How far it generalizes (issue 37, item 4): per subject the effect on each task and the sign test across
tasks, Holm over the subjects, and the tasks a task-level claim needs when the run has too few."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ablate.report import write_report
from ablate.report.generalization import sign_p, tasks_needed
from tests.report_support import Outcome, make_run


def test_a_task_level_claim_needs_enough_tasks() -> None:
    assert tasks_needed(11, 0.05) == 9  # 2^(1 − 9) = 1/256 ≤ 0.05 / 11 < 2^(1 − 8)
    assert tasks_needed(1, 0.05) == 6 and tasks_needed(16, 0.05) == 10
    assert sign_p(7, 0) == 2 / 2**7 and sign_p(0, 0) is None and sign_p(2, 2) == 1.0


def _run(tmp: Path, tasks: list[str]) -> dict[str, Any]:
    """C1 (no user CLAUDE.md) fails every session of every task but the last; C2 (no axioms) changes nothing."""

    def outcome(task: str, cell: str, repeat: int) -> Outcome:
        return Outcome(pitfall=cell == "C1" and task != tasks[-1], turns=3, tool_calls=2, cost=0.03)

    run = make_run(
        tmp / "run", cells={"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"]}, tasks=tasks, repeats=2,
        outcome=outcome,
    )  # fmt: skip
    write_report(run, formats=["json", "md"])
    report = orjson.loads((run / "report.json").read_bytes())
    part = report["generalization"]
    assert isinstance(part, dict)
    md = (run / "report.md").read_text()
    assert "## How far it generalizes" in md and "| subject |" in md
    return part


def test_a_layer_that_helps_on_most_tasks_holds_across_them_only_with_enough_tasks(tmp_path: Path) -> None:
    few = _run(tmp_path / "few", ["t1", "t2", "t3", "t4"])
    c1 = next(s for s in few["subjects"] if s["subject"] == "C1")
    assert (c1["helps_on"], c1["hurts_on"], c1["tasks"]) == (3, 0, 4)
    assert [t["effect"] for t in c1["per_task"]] == [-1.0, -1.0, -1.0, 0.0]  # removing it: a loss
    assert c1["p"] == 0.25 and c1["verdict"] == "not shown across tasks"
    assert few["tasks_needed"] == 7 and "it needs at least 7" in c1["sentence"]
    assert "C1 (user-claude-md) helps on 3 of 4 tasks, hurts on 0" in c1["sentence"]
    c2 = next(s for s in few["subjects"] if s["subject"] == "C2")
    assert c2["p"] is None and c2["verdict"] == "not shown across tasks" and "no task shows" in c2["sentence"]
    many = _run(tmp_path / "many", [f"t{i}" for i in range(9)])
    c1 = next(s for s in many["subjects"] if s["subject"] == "C1")
    assert c1["helps_on"] == 8 and c1["p"] == 2 / 2**8 and c1["p_adjusted"] <= 0.05
    assert c1["verdict"] == "helps across tasks" and "needs at least" not in c1["sentence"]

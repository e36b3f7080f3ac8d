"""Cost of a pass (issue 40 item 4) and what an inconclusive gate says it would take (item 6), on synthetic run
folders: the figures are checked against their definitions, not against the code's own arithmetic."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson

from ablate.ci.gate import needed
from ablate.ci.verdicts import load_evidence
from ablate.folder.result import ItemResult
from ablate.folder.wire import WireTotals
from ablate.report.cost_per_pass import cell_cost_per_pass, session_cost
from ablate.report.items import Item
from ablate.report.sections import build_report
from ablate.stats.power import blocks_to_detect, power_binary
from tests.helpers_cli import invoke
from tests.report_support import Outcome, make_run


def _item(passed: bool, cost: float, wire: float | None = None) -> Item:
    res = ItemResult(
        item="i", task="t", cell="C0", repeat=0, order=0, attempt=1, session_id="s", status="completed",
        cost_usd=cost, wire=None if wire is None else WireTotals(cost_usd=wire),
    )  # fmt: skip
    return Item(res, values={"pitfall_free": float(passed)})


def test_a_cell_where_nothing_passed_has_no_cost_per_pass_and_says_why(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "run", cells={"C0": [], "C1": ["user-claude-md"]}, tasks=["a", "b"], repeats=2,
        outcome=lambda task, cell, repeat: Outcome(pitfall=cell == "C1", cost=0.01 + 0.001 * repeat),
    )  # fmt: skip
    cells = {c.cell: c for c in build_report(run).cells}
    assert cells["C1"].cost_per_pass is None
    assert cells["C1"].cost_per_pass_note == "no session passed (pitfall-free rate: 0 of 4)"
    c0 = cells["C0"].cost_per_pass
    assert c0 is not None and c0.value == (2 * 0.01 + 2 * 0.011) / 4 and (c0.passes, c0.sessions) == (4, 4)
    code, out = invoke(["report", str(run)]).shown
    assert code == 0, out
    line = next(x for x in out.splitlines() if x.startswith("cost per pass ("))
    assert "C1 – (no session passed" in line and "claude-sonnet-4-6, pitfall-free rate" in line
    js = orjson.loads((run / "report.json").read_bytes())
    by = {c["cell"]: c for c in js["cells"]}
    assert by["C1"]["cost_per_pass"] is None and by["C1"]["cost_per_pass_note"].startswith("no session")
    assert set(by["C0"]["cost_per_pass"]) >= {"value", "ci_low", "ci_high"}
    assert "cost per pass [CI]" in (run / "report.md").read_text()


def test_a_sessions_cost_is_the_wires_when_it_crossed_the_forwarder() -> None:
    assert session_cost(_item(True, 0.5, wire=0.2)) == 0.2
    assert session_cost(_item(True, 0.5)) == 0.5
    per_pass, why = cell_cost_per_pass(
        [_item(True, 0.5, 0.2), _item(False, 0.5, 0.4)], "pitfall_free", 0.05, 1
    )
    assert why is None and per_pass is not None and math.isclose(per_pass.value, 0.6)


def test_the_interval_covers_the_true_cost_per_pass_and_is_reproducible() -> None:
    """Cells of 40 sessions, pass rate 0.6, log-normal costs: the true cost per pass is E[cost] / 0.6; the
    95% interval covers it in at least 90% of 200 cells (a bootstrap at this n is a little liberal)."""
    rng = np.random.default_rng(3)
    truth = math.exp(0.5**2 / 2) * 0.01 / 0.6
    covered = 0
    for i in range(200):
        passed = rng.random(40) < 0.6
        costs = 0.01 * rng.lognormal(0.0, 0.5, 40)
        got, _ = cell_cost_per_pass(
            [_item(bool(p), float(c)) for p, c in zip(passed, costs, strict=True)], "pitfall_free", 0.05, i
        )
        assert got is not None and got.ci_low is not None and got.ci_high is not None
        assert got.ci_low <= got.value <= got.ci_high
        covered += got.ci_low <= truth <= got.ci_high
    assert covered >= 180, covered
    items = [_item(k % 3 != 0, 0.01 * (1 + k % 4)) for k in range(12)]
    assert cell_cost_per_pass(items, "pitfall_free", 0.05, 7) == cell_cost_per_pass(
        items, "pitfall_free", 0.05, 7
    )


def test_the_ranking_names_a_cell_cheaper_per_pass_than_the_control(tmp_path: Path) -> None:
    """C1 spends 40% less per session and passes as often: −40% cost per pass, no real change in passes; C2
    costs the same: no trade-off."""
    run = make_run(
        tmp_path / "run", cells={"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"]}, tasks=["a", "b", "c"],
        repeats=4,
        outcome=lambda task, cell, repeat: Outcome(
            pitfall=repeat == 3, cost=(0.006 if cell == "C1" else 0.01) * (1 + 0.1 * repeat)
        ),
    )  # fmt: skip
    report = build_report(run)
    ranks = {e.cell: e for e in report.ranking}
    said = [t for t in ranks["C1"].tradeoffs if t.startswith("stripping")]
    assert len(said) == 1 and said[0].startswith("stripping user-claude-md: −40% cost per pass [−"), said
    assert said[0].endswith("], no real change in pitfall-free rate")
    assert not any(t.startswith("stripping") for t in ranks["C2"].tradeoffs)
    code, out = invoke(["report", str(run)]).shown
    assert code == 0 and "; stripping user-claude-md: −40% cost per pass" in out, out


def test_an_inconclusive_gate_says_the_repeats_sessions_and_dollars_it_would_take(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "run", cells={"C0": [], "C1": ["user-claude-md"]}, tasks=["a", "b"], repeats=2,
        outcome=lambda task, cell, repeat: Outcome(pitfall=cell == "C0" and repeat == 1, cost=0.02),
    )  # fmt: skip
    blocks = blocks_to_detect(0.5, 0.2, 0.05)  # the control passes half the time; one comparison
    assert isinstance(blocks, int)
    assert all(power_binary(blocks, 0.5, p, 0.05) >= 0.8 for p in (0.3, 0.7))
    assert power_binary(blocks - 1, 0.5, 0.3, 0.05) < 0.8 or power_binary(blocks - 1, 0.5, 0.7, 0.05) < 0.8
    repeats = math.ceil(blocks / 2)
    sessions = repeats * 2 * 2  # tasks × cells
    code, out = invoke(["gate", str(run)]).shown
    assert code == 4, out
    assert (
        f"Detecting it takes {repeats} repeats (this run: 2): {2 * repeats} paired blocks per cell, "
        f"{sessions} sessions, about ${sessions * 0.02:.2f}"
    ) in out, out
    need = orjson.loads(invoke(["gate", str(run), "--json"]).shown[1])["needed"]
    assert (need["repeats"], need["sessions"]) == (repeats, sessions)
    assert math.isclose(need["cost_usd"], sessions * 0.02)
    assert needed(load_evidence(run), 0.4).repeats == math.ceil(blocks_to_detect(0.5, 0.4, 0.05) / 2)  # type: ignore[operator]

"""`--cells layered+leave-one-in` (issue 37, item 3): both sets in shared blocks, and per layer its total
interaction — its leave-one-out effect minus its leave-one-in effect — with an interval and Holm p."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest

from ablate.core.errors import UsageError
from ablate.report import write_report
from ablate.setup.cells import combined, load_cell_set
from ablate.setup.layers import load_catalog
from tests.report_support import Outcome, make_run

ALL = ["user-claude-md", "axioms", "decisions", "output-styles"]


def test_two_sets_run_as_one_with_the_first_sets_control_and_each_cell_once() -> None:
    catalog = load_catalog(None)
    both = load_cell_set("layered+leave-one-in", catalog)
    layered, loi = load_cell_set("layered", catalog), load_cell_set("leave-one-in", catalog)
    assert both.control == "C0" and both.name == "layered+leave-one-in"
    ids = [c.id for c in both.cells]
    assert ids == [c.id for c in layered.cells] + [c.id for c in loi.cells if c.id != "C11"]
    assert [c.index for c in both.cells] == list(range(len(ids)))
    assert {c.id: c.kept for c in both.cells}["K1"] == ("user-claude-md",)
    clash = load_cell_set("binary", catalog)  # its C11 is nothing too; a C0 that strips nothing
    assert [c.id for c in combined([layered, clash], "x").cells] == [c.id for c in layered.cells]
    other_c1 = dataclasses.replace(layered.cells[1], stripped=("axioms",))
    bad = dataclasses.replace(layered, name="mine", cells=(other_c1,))
    with pytest.raises(UsageError, match="cell C1 of 'mine' differs from the cell C1 of an earlier set"):
        combined([layered, bad], "layered+mine")
    with pytest.raises(UsageError, match="empty set name"):
        load_cell_set("layered+", catalog)


def test_a_layer_that_needs_another_shows_a_total_interaction(tmp_path: Path) -> None:
    """user-claude-md and axioms help only together: only the full setup passes. Removing either from the full
    setup loses 100 pts; alone, either adds nothing: each one's total interaction is +100 pts."""
    cells = {
        "C0": [],
        "C1": ["user-claude-md"],
        "C2": ["axioms"],
        "C11": ALL,
        "K1": [x for x in ALL if x != "user-claude-md"],
        "K2": [x for x in ALL if x != "axioms"],
    }
    run = make_run(
        tmp_path / "run", cells=cells, tasks=["a", "b"], repeats=6, cell_set="layered+leave-one-in",
        outcome=lambda task, cell, repeat: Outcome(pitfall=cell != "C0"),
        kept={"K1": ["user-claude-md"], "K2": ["axioms"]}, empty=frozenset({"C11"}),
    )  # fmt: skip
    write_report(run, formats=["json", "md"])
    report = orjson.loads((run / "report.json").read_bytes())
    assert sorted(r["cell"] for r in report["ranking"]) == ["C1", "C11", "C2"]  # the K cells are not ranked
    rows = {r["layer"]: r for r in report["layer_interactions"]}
    assert sorted(rows) == ["axioms", "user-claude-md"]
    ucm = rows["user-claude-md"]
    assert ucm["cells"] == ["C1", "K1", "C11"] and ucm["blocks"] == 12
    assert (ucm["leave_one_out"], ucm["leave_one_in"], ucm["interaction"]) == (1.0, 0.0, 1.0)
    assert ucm["verdict"] == "needs the others" and ucm["p_adjusted"] <= 0.05
    assert "user-claude-md: beside the rest it does +100 pts" in ucm["sentence"]
    md = (run / "report.md").read_text()
    assert "## Layer interactions: leave-one-out against leave-one-in" in md and "| user-claude-md |" in md

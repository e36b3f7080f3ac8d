"""`ablate run --pieces --adaptive`: the round driver against a planted executor, the look per piece, the stop
when every piece is decided, and the report's verdicts from the anytime-valid look."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from ablate.core.claude import ClaudeBinary
from ablate.folder.adaptive import AdaptiveOptions, read_state
from ablate.folder.design import DesignPiece, DesignRow, PieceDesignRecord
from ablate.folder.layout import PlanItem, RunFolder, RunManifest
from ablate.report.sections import build_report
from ablate.run.adaptive import run_adaptive
from ablate.run.create import create_run
from ablate.setup.cells import ResolvedCell
from ablate.stats.screening import MAX_DRAWS, draw_columns, screening_design
from tests.run_folder import pitfall_tasks, write_outcome

PIECES = [f"user-claude-md#s{i}" for i in range(8)]


def planned(tmp: Path, tasks: int = 2, repeats: int = 12) -> tuple[RunFolder, RunManifest]:
    """A piece run of the screening design over eight pieces (24 rows a repeat), as `ablate run --pieces` plans
    it: its columns drawn four times from the run's seed (1 + 4 × 23 cells)."""
    loaded = pitfall_tasks(tmp / "tasks", tasks)
    design = draw_columns(screening_design(PIECES), 3, draws=min(repeats, MAX_DRAWS))
    assert design.groups is not None
    cells = [
        ResolvedCell(id="C0" if i == 0 else f"P{i:02d}", index=i, label="", stripped=(), empty_config=False,
                     pieces=design.removed(i))
        for i in range(len(design.rows))
    ]  # fmt: skip
    record = PieceDesignRecord(
        kind="screening",
        construction=design.construction,
        pieces=[DesignPiece(id=p, kind="section", tokens=100) for p in PIECES],
        rows=[
            DesignRow(cell=c.id, keeps=list(r), draw=g)
            for c, r, g in zip(cells, design.rows, design.groups, strict=True)
        ],
        min_effect=0.5,
        drawn=3,
    )
    exe = tmp / "claude"
    exe.write_text("")
    return create_run(
        tmp / "runs", tasks=loaded, cell_set="pieces-screening", cells=cells, repeats=repeats, seed=3,
        model="claude-sonnet-4-6", max_turns=5, claude=ClaudeBinary(path=exe, version="2.1.332", sha256="0" * 64), design=record,
    )  # fmt: skip


class Planted:
    """Writes a result per item: pass/fail with rate ½ + ½·(keeps piece 0) − ½·(keeps piece 1)."""

    def __init__(self, folder: RunFolder, manifest: RunManifest, seed: int = 0) -> None:
        assert manifest.design is not None
        self.folder, self.rng = folder, random.Random(seed)
        self.keeps = {r.cell: r.keeps for r in manifest.design.rows}
        self.rounds: list[set[str]] = []

    def __call__(self, items: Sequence[PlanItem]) -> str:
        self.rounds.append({i.cell for i in items})
        for it in items:
            keeps = self.keeps[it.cell]
            free = self.rng.random() < 0.5 + 0.5 * keeps[0] - 0.5 * keeps[1]
            write_outcome(self.folder, it, free)
        return "finished"


@pytest.mark.parametrize("seed", [0, 1])
def test_an_adaptive_piece_run_runs_whole_designs_and_stops_on_the_pieces(tmp_path: Path, seed: int) -> None:
    folder, manifest = planned(tmp_path)
    planted = Planted(folder, manifest, seed)
    options = AdaptiveOptions(max_repeats=12, min_effect=0.5, alpha=0.05)
    summary = run_adaptive(folder, manifest, planted, options)
    state = read_state(folder)
    assert state is not None and state.looks
    assert manifest.design is not None and len(manifest.cells) == 1 + 4 * 23
    # every round runs the control and one whole draw of the design's rows, the draws in turn
    assert all(r == set(manifest.design.cells_in(i)) for i, r in enumerate(planted.rounds))
    assert all(len(r) == 24 for r in planted.rounds) and planted.rounds[0] != planted.rounds[1]
    assert all(not lk.cells for lk in state.looks)  # a piece run compares pieces, not cells one by one
    pieces = state.piece_decisions()
    assert list(pieces) == PIECES
    assert (pieces[PIECES[0]].decision, pieces[PIECES[0]].verdict) == ("real", "helps"), pieces[
        PIECES[0]
    ].reason
    assert (pieces[PIECES[1]].decision, pieces[PIECES[1]].verdict) == ("real", "hurts"), pieces[
        PIECES[1]
    ].reason
    assert all(pieces[p].decision != "real" for p in PIECES[2:])
    assert "Holm anytime p" in pieces[PIECES[0]].reason
    if state.stopped == "decided":
        assert all(v.decision != "undecided" for v in pieces.values())
        assert len(state.looks) < options.max_repeats  # stopped early
    else:
        assert state.stopped == "max-repeats" and len(state.looks) == options.max_repeats
    assert summary.to_json()["decisions"][PIECES[0]]["decision"] == "real"
    report = build_report(folder.root)
    rows = {r.id: r for r in report.pieces}
    assert report.piece_design is not None and report.piece_design.decided_by == "anytime"
    assert rows[PIECES[0]].verdict == "helps" and rows[PIECES[1]].verdict == "hurts"
    assert rows[PIECES[0]].p_adjusted == pytest.approx(pieces[PIECES[0]].p_holm)
    assert all(rows[p].verdict not in ("helps", "hurts") for p in PIECES[2:])
    # how far it generalizes: each piece on each of the two tasks; two tasks cannot carry a task-level claim
    general = (report.model_extra or {})["generalization"]
    first = general["subjects"][0]
    assert [s["subject"] for s in general["subjects"]] == PIECES and first["kind"] == "piece"
    assert first["helps_on"] == 2 and all(t["effect"] > 0.2 for t in first["per_task"])
    assert general["tasks_needed"] == 9 and first["verdict"] == "not shown across tasks"


def test_a_piece_run_read_before_it_can_estimate_says_why(tmp_path: Path) -> None:
    """Three sessions of a 24-cell design cannot estimate eight pieces: the rows say why, never a verdict."""
    folder, manifest = planned(tmp_path, tasks=1, repeats=1)
    Planted(folder, manifest)(folder.read_plan()[:3])
    report = build_report(folder.root)
    assert [r.id for r in report.pieces] == PIECES
    assert all(r.verdict == "undecided" and r.effect is None and r.reason for r in report.pieces)
    assert report.piece_design is not None and report.piece_design.method == "not estimated"

"""Adaptive piece runs that re-plan (docs/PIECES.md#runs): once pieces are decided, later rounds run the control
and the one-out cell of each piece still undecided. The rule, the pooled analysis of rounds of different designs
(each piece over the blocks that gave it a contrast), the driver that schedules, records and resumes them, and
what the report reads."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ablate.core.claude import ClaudeBinary
from ablate.folder.adaptive import AdaptiveOptions, read_state
from ablate.folder.design import ConfirmPlan, DesignPiece, DesignRow, PieceDesignRecord
from ablate.folder.layout import PlanItem, RunFolder, RunManifest
from ablate.report import write_report
from ablate.run.adaptive import run_adaptive
from ablate.run.create import create_run
from ablate.setup.cells import ResolvedCell
from ablate.stats import screening_sequential
from ablate.stats.screening import Design, draw_columns, make_design, screening_design
from ablate.stats.screening_inference import Outcome
from ablate.stats.screening_sequential import look, look_points, mixture_log_e, scheduled_p, should_replan
from ablate.stats.sequential import anytime_p
from benchmarks.screening_sim import Planted, adaptive_piece_run
from tests.run_folder import pitfall_tasks, write_outcome

RATES = (0.55, 0.65, 0.45, 0.6)


def test_one_out_rounds_shrink_at_once_and_a_drawn_screening_turns_to_them_when_they_are_small() -> None:
    one = make_design("one-out", ["a", "b", "c"])
    assert should_replan(one, 3, 2) and should_replan(one, 2, 1)
    assert not should_replan(one, 3, 3) and not should_replan(one, 3, 0)  # nothing decided / nothing left
    fixed = screening_design([f"p{i}" for i in range(8)])
    assert not any(should_replan(fixed, 8, k) for k in range(1, 8))  # a fixed design is never rebuilt
    drawn = draw_columns(fixed, 3, draws=2)  # 24 cells a round
    share = screening_sequential.REPLAN_SHARE
    assert [should_replan(drawn, 8, k) for k in range(1, 8)] == [k + 1 <= share * 24 for k in range(1, 8)]
    assert [should_replan(drawn, 8, k, share=0.25) for k in range(1, 8)] == [k <= 5 for k in range(1, 8)]
    assert should_replan(drawn, 5, 4)  # re-planned already: its one-out rounds only shrink


def test_a_one_out_piece_is_tested_over_the_blocks_that_ran_its_cell() -> None:
    """Rows dropped after a re-plan: each piece's anytime p is the normal-mixture e-process of its own control −
    cell contrasts; a block without the control is named and left out."""
    d = make_design("one-out", ["a", "b", "c"])
    rng = np.random.default_rng(4)
    outs: list[Outcome] = []
    order: list[tuple[str, int]] = []
    for rep in range(12):
        rows = [0, 1, 2, 3] if rep < 4 else [0, 2, 3] if rep < 8 else [0, 3]  # a, then b, decided
        for t in ("x", "y"):
            order.append((t, rep))
            outs += [Outcome(r, t, rep, float(rng.random() < (0.9 if r == 0 else 0.4))) for r in rows]
    outs = [o for o in outs if (o.task, o.repeat, o.row) != ("y", 11, 0)]  # the control failed in one block
    got = look(d, outs, order, alpha=0.05, min_effect=0.2)
    assert got.blocks == [8, 16, 23] and got.blocks_used == 23 and got.blocks_incomplete == [("y", 11)]
    for j, n in enumerate(got.blocks):
        by = {(o.task, o.repeat, o.row): o.value for o in outs}
        x = [by[(t, r, 0)] - by[(t, r, j + 1)] for t, r in order if (t, r, 0) in by and (t, r, j + 1) in by]
        assert len(x) == n and got.effects[j] == pytest.approx(np.mean(x))
        assert got.p_anytime[j] == pytest.approx(anytime_p(mixture_log_e(np.array(x), 0.5, 0.2))[-1])


def _drawn(k: int = 4) -> Design:
    return draw_columns(screening_design([f"p{i}" for i in range(k)]), 9, draws=2)


def test_a_drawn_run_that_can_re_plan_splits_alpha_between_the_schedule_and_the_one_out_e_process() -> None:
    """Bonferroni over the L randomization tests and the one-out e-process (L + 1, fixed before the run): a piece
    whose effect shows only in the one-out rounds is found by the e-process, and the design rounds' p is the
    schedule's times (L + 1) / L."""
    design = _drawn()
    rng = np.random.default_rng(2)
    outs: list[Outcome] = []
    removals: list[Outcome] = []
    order: list[tuple[str, int]] = []
    for rep in range(2):  # whole design: nothing planted
        for t in ("x", "y"):
            order.append((t, rep))
            outs += [Outcome(r, t, rep, float(rng.random() < 0.5)) for r in design.rows_of(rep)]
    for rep in range(2, 14):  # one-out rounds of p1 and p3: removing p1 fails every session
        for t in ("x", "y"):
            order.append((t, rep))
            removals += [Outcome(0, t, rep, 1.0), Outcome(2, t, rep, 0.0), Outcome(4, t, rep, 1.0)]
    kwargs = {"alpha": 0.05, "min_effect": 0.2, "max_blocks": 40}
    got = look(design, outs, order, removals=removals, one_out_test=True, **kwargs)  # type: ignore[arg-type]
    tests = len(look_points(40)) + 1
    crt = scheduled_p(design, outs, order[:4], max_blocks=40, alpha=0.05)
    e_p1 = anytime_p(mixture_log_e(np.ones(24), 0.5, 0.2))[-1]
    assert got.p_anytime[1] == pytest.approx(min(1.0, crt[1] * tests / (tests - 1), e_p1 * tests))
    assert got.p_anytime[0] == pytest.approx(min(1.0, crt[0] * tests / (tests - 1)))  # no one-out block of p0
    assert got.decisions[1] == "real" and got.blocks == [4, 28, 4, 28]
    plain = look(design, outs, order, removals=removals, **kwargs)  # type: ignore[arg-type]
    assert plain.p_anytime[0] == pytest.approx(crt[0])  # a run that cannot re-plan keeps the schedule's L


def test_re_planning_keeps_the_family_wise_error_of_null_pieces_at_alpha() -> None:
    """Every piece null, one-out rounds that drop each piece once decided (the run's own rule and look), a look
    after every round: some piece is ever called real at most α of the time."""
    rng = np.random.default_rng(11)
    null = Planted(RATES, (0.0,) * 3)
    runs = 300
    real = sum(
        "real"
        in adaptive_piece_run("one-out", null, 15, rng, replan=1.0, alpha=0.05, min_effect=0.2).decisions
        for _ in range(runs)
    )
    assert real / runs <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)


PIECES = [f"user-claude-md#s{i}" for i in range(4)]


def _piece_run(
    tmp: Path, design: Design, *, confirm: bool, repeats: int = 10
) -> tuple[RunFolder, RunManifest]:
    """A piece run of ``design`` over PIECES on two tasks, as `ablate run --pieces` plans it; with ``confirm``,
    a one-out cell O01… per piece (the confirmation stage's) after the design's rows."""
    cells = [
        ResolvedCell(id="C0" if i == 0 else f"P{i:02d}", index=i, label="", stripped=(), empty_config=False,
                     pieces=design.removed(i))
        for i in range(len(design.rows))
    ]  # fmt: skip
    out = {
        p: ResolvedCell(id=f"O{j + 1:02d}", index=len(cells) + j, label="", stripped=(), empty_config=False,
                        pieces=(p,))
        for j, p in enumerate(PIECES)
    } if confirm else {}  # fmt: skip
    record = PieceDesignRecord(
        kind=design.name,
        construction=design.construction,
        pieces=[DesignPiece(id=p, kind="section", tokens=100) for p in PIECES],
        rows=[
            DesignRow(cell=c.id, keeps=list(r), draw=None if design.groups is None else design.groups[i])
            for i, (c, r) in enumerate(zip(cells, design.rows, strict=True))
        ],
        min_effect=0.3,
        drawn=design.drawn,
        confirm=ConfirmPlan(cells={p: c.id for p, c in out.items()}, first_repeat=repeats)
        if confirm
        else None,
    )
    exe = tmp / "claude"
    exe.write_text("")
    return create_run(
        tmp / "runs", tasks=pitfall_tasks(tmp / "tasks", 2), cell_set="pieces", cells=[*cells, *out.values()],
        repeats=repeats, seed=3, model="claude-sonnet-4-6", max_turns=5,
        claude=ClaudeBinary(path=exe, version="2.1.332", sha256="0" * 64), design=record,
    )  # fmt: skip


class Removes:
    """Writes a result per item: passes with rate 0.9 unless the cell removes piece 0 (then 0.1)."""

    def __init__(self, folder: RunFolder, manifest: RunManifest) -> None:
        self.folder, self.rng = folder, random.Random(1)
        self.cut = {c.id: set(c.pieces) for c in manifest.cells}
        self.rounds: list[set[str]] = []

    def __call__(self, items: Sequence[PlanItem]) -> str:
        self.rounds.append({i.cell for i in items})
        for it in items:
            free = self.rng.random() < (0.1 if PIECES[0] in self.cut[it.cell] else 0.9)
            write_outcome(self.folder, it, free)
        return "finished"


def _check_rounds(
    manifest: RunManifest, rounds: list[set[str]], replans: list[tuple[int, list[str]]]
) -> None:
    """Every round before the first re-plan ran the design's cells; each later one the control and the one-out
    cells of the latest re-plan's pieces."""
    assert manifest.design is not None
    out = manifest.design.one_out_cells()
    assert out is not None
    for r, cells in enumerate(rounds):
        now = [pieces for first, pieces in replans if first <= r]
        assert cells == ({"C0", *(out[p] for p in now[-1])} if now else set(manifest.design.cells_in(r)))


def test_a_one_out_run_drops_a_decided_piece_and_a_resume_goes_on_with_the_rebuilt_rounds(
    tmp_path: Path,
) -> None:
    folder, manifest = _piece_run(tmp_path, make_design("one-out", PIECES), confirm=False)
    executor = Removes(folder, manifest)
    options = AdaptiveOptions(max_repeats=10, min_effect=0.3, alpha=0.05)

    def killed_in_round_4(items: Sequence[PlanItem]) -> str:
        if len(executor.rounds) == 3:
            executor(items[: len(items) // 2])
            return "interrupted"
        return executor(items)

    assert run_adaptive(folder, manifest, killed_in_round_4, options).state.stopped == "interrupted"
    run_adaptive(folder, manifest, executor)
    state = read_state(folder)
    assert state is not None and state.replans and state.replans[0].pieces == PIECES[1:]
    assert state.piece_decisions()[PIECES[0]].decision == "real"
    replans = [(r.round, r.pieces) for r in state.replans]
    rounds: dict[int, set[str]] = {}
    for p in folder.read_plan():
        rounds.setdefault(p.repeat, set()).add(p.cell)
    _check_rounds(manifest, [rounds[r] for r in sorted(rounds)], replans)
    looks = state.piece_decisions()
    assert looks[PIECES[1]].blocks > looks[PIECES[0]].blocks  # the decided piece's cell stopped running
    md = write_report(folder.root, formats=["md"]).paths["md"].read_text()
    assert (
        f"After round {replans[0][0]} the rounds ran the control and the one-out cells of the 3 pieces" in md
    )


def test_a_screening_run_re_plans_onto_its_one_out_cells_and_its_fit_keeps_the_whole_design_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(screening_sequential, "REPLAN_SHARE", 1.0)  # rebuild as soon as a piece is decided
    folder, manifest = _piece_run(tmp_path, draw_columns(screening_design(PIECES), 5, draws=4), confirm=True)
    executor = Removes(folder, manifest)
    run_adaptive(folder, manifest, executor, AdaptiveOptions(max_repeats=10, min_effect=0.3, alpha=0.05))
    state = read_state(folder)
    assert state is not None
    assert state.replans, [lk.pieces for lk in state.looks]
    first = state.replans[0].round
    assert state.looks[first - 1].pieces[PIECES[0]].decision == "real"
    assert all(state.looks[first - 1].pieces[p].decision == "undecided" for p in state.replans[0].pieces)
    _check_rounds(manifest, executor.rounds, [(r.round, r.pieces) for r in state.replans])
    assert all(len(r) < 16 for r in executor.rounds[first:])  # the control and at most three one-out cells
    report = write_report(folder.root, formats=["json"]).report
    assert report.piece_design is not None and report.piece_design.sessions == first * 16 * 2
    assert report.sequential is not None and report.sequential.replans == state.replans

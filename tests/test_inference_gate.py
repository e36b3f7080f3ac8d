"""Issue 30: the report and the gate say only what the run's own analysis supports.

Constructed run folders (``tests.report_support.make_run``), no CLI sessions: the anytime-valid path is the
path in time, the report marks "real" at the run's own α.
"""

from __future__ import annotations

from pathlib import Path

from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.result import iter_results
from ablate.report import build_report
from ablate.run.adaptive import AdaptiveOptions, AdaptiveState, Look, analyse, paired_outcomes, write_state
from tests.report_support import Outcome, make_run

T0 = "2026-01-01T00:{:02d}:{:02d}+00:00"


def _at(seconds: int) -> str:
    return T0.format(seconds // 60, seconds % 60)


def _see_saw(root: Path, *, timed: bool) -> Path:
    """Repeats 0–19 favour C1, 20–39 the control; the blocks finish alternately (r0, r20, r1, r21, …)."""

    def outcome(task: str, cell: str, repeat: int) -> Outcome:
        return Outcome(pitfall=(cell == "C1") == (repeat >= 20))

    def finished(task: str, cell: str, repeat: int) -> str:
        return _at(2 * (repeat % 20) + (repeat >= 20))

    run = make_run(
        root, cells={"C0": [], "C1": ["user-claude-md"]}, tasks=["t"], repeats=40, outcome=outcome,
        finished=finished if timed else None,
    )  # fmt: skip
    RunFolder(run).result_path("t__C1__r19").unlink()  # one item still missing: a peek
    return run


def test_a_peek_follows_the_blocks_in_the_order_they_completed(tmp_path: Path) -> None:
    # in plan order the path climbs through 19 gains before any loss: the old peek said "real" (p 1.6e-4)
    # although Δ is 0 (19 gained, 20 lost); in time the gains and losses alternate and nothing is real
    timed = build_report(_see_saw(tmp_path / "timed", timed=True))
    assert timed.sequential is not None and timed.sequential.mode == "peek"
    look = timed.sequential.looks[-1].cells["C1"]
    assert (look.gained, look.lost) == (19, 20) and look.p_anytime > 0.5
    pooled = next(c for c in timed.comparisons if c.task is None and c.metric == "pitfall_free")
    assert not pooled.real
    # the same folder without finish times (recovered results) keeps plan order: the ordering is what changed
    untimed = build_report(_see_saw(tmp_path / "untimed", timed=False))
    assert untimed.sequential is not None and untimed.sequential.looks[-1].cells["C1"].p_anytime < 1e-3


def test_a_block_re_run_later_enters_the_path_when_it_completed(tmp_path: Path) -> None:
    def finished(task: str, cell: str, repeat: int) -> str:
        # repeat 0's C1 item failed and was re-run by a resume after repeat 2 finished
        return _at(100 if (repeat, cell) == (0, "C1") else 10 * repeat + (cell == "C1"))

    run = make_run(
        tmp_path / "run", cells={"C0": [], "C1": ["axioms"]}, tasks=["a", "b"], repeats=3,
        outcome=lambda task, cell, repeat: Outcome(pitfall=cell == "C1" and repeat == 0),
        finished=finished,
    )  # fmt: skip
    folder = RunFolder(run)
    xs, ys = paired_outcomes(read_manifest(folder), iter_results(folder), "C1", "C0")
    assert xs == [True, True, True, True, False, False]  # repeat 0's two blocks last, in task order
    assert ys == [True] * 6


def _one_sided(root: Path, losses: int) -> Path:
    """C1 loses ``losses`` of 20 blocks to the control and gains none; C2 is the control's twin."""
    return make_run(
        root, cells={"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"]}, tasks=["t0"], repeats=20,
        outcome=lambda task, cell, repeat: Outcome(pitfall=cell == "C1" and repeat < losses),
    )  # fmt: skip


def _adaptive(run: Path, alpha: float) -> float:
    """Record the run as an adaptive one decided at ``alpha``; C1's Holm-adjusted anytime p."""
    folder = RunFolder(run)
    opts = AdaptiveOptions(max_repeats=20, min_effect=0.2, alpha=alpha)
    cells = analyse(read_manifest(folder), iter_results(folder), opts, "C0")
    look = Look(round=20, at=_at(0), sessions=60, spend_usd=0.0, analysis_s=0.0, cells=cells)
    write_state(folder, AdaptiveState(options=opts, control="C0", looks=[look], stopped="max-repeats"))
    return cells["C1"].p_holm


def test_the_report_marks_real_at_the_runs_alpha_not_its_own(tmp_path: Path) -> None:
    strict = _one_sided(tmp_path / "strict", losses=12)
    p = _adaptive(strict, alpha=0.01)
    assert 0.01 < p < 0.05  # undecided at the run's α, "real" at the report's default
    report = build_report(strict, alpha=0.05)
    pooled = {c.cell: c for c in report.comparisons if c.task is None and c.metric == "pitfall_free"}
    assert not pooled["C1"].real and pooled["C1"].verdict == "draw"
    assert "run's own α 0.01" in next(c.text for c in report.caveats if c.id == "sequential")
    lax = _one_sided(tmp_path / "lax", losses=9)
    p = _adaptive(lax, alpha=0.2)
    assert 0.05 < p < 0.2  # the reverse: real at the run's α
    pooled = {
        c.cell: c for c in build_report(lax).comparisons if c.task is None and c.metric == "pitfall_free"
    }
    assert pooled["C1"].real and pooled["C1"].verdict == "helps"

"""The one-out confirmation stage of a screening piece run (`--confirm`, docs/PIECES.md#confirm) without the real
CLI: what is refused before anything is written, which cells and sessions the stage plans, and the report's
``removal`` rows rebuilt from seeded session results (the real CLI: test_piece_run_e2e)."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import orjson
import pytest

from ablate.core.fsutil import atomic_write_bytes
from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.result import iter_results
from ablate.report import write_report
from ablate.report.sections import build_report
from ablate.run.piece_confirm import reserve_refusal, stage_blocks
from ablate.setup.examples import ExampleSetup, materialise_example
from tests.conftest import built_once, isolate_env
from tests.helpers_cli import invoke
from tests.runner_support import write_fake_claude
from tests.test_cli_run import rig
from tests.test_piece_run import FOUR, NAMED, run

__all__ = ["rig"]

#: The screening design for four pieces: folded-over Plackett–Burman N=8, 16 rows.
ROWS = 16
#: The pair test's stage blocks: the fewest whose exact sign-flip p (2/2⁶) is under α = 0.05.
BLOCKS = 6


def test_the_stage_gets_the_screenings_sessions_within_max_sessions() -> None:
    # as many sessions as the screening ran, shared by the control and the confirmed cells: 48 // 3
    assert stage_blocks(2, tasks=1, screened=48, max_sessions=None) == 16
    assert stage_blocks(3, tasks=2, screened=10, max_sessions=None) == 1  # at least one block
    assert stage_blocks(1, tasks=1, screened=16, max_sessions=20) == 2  # what --max-sessions leaves
    assert stage_blocks(4, tasks=1, screened=16, max_sessions=20) == 0  # not even one block
    assert reserve_refusal("screening", 16, 1, 0, 10) is None  # no named piece: the design's own check


def test_a_named_piece_is_confirmed_in_blocks_of_its_own_after_the_screening(
    rig: tuple[ExampleSetup, Path],
) -> None:
    """The fake CLI answers every session alike, so the screening marks nothing real: the stage confirms the
    named piece alone, in what --max-sessions leaves (20 − 16 = 4 sessions: 2 blocks of the control and its
    cell), blocks that follow the screening's."""
    ex, tmp = rig
    code, out, err = run(
        ex, tmp / "runs", "--pieces", FOUR, "--confirm", NAMED, "--max-sessions", "20", "--repeats", "1",
        "--seed", "3", "--no-probe",
    )  # fmt: skip
    assert code == 0, err
    folder = Path(orjson.loads(out)["folder"])
    manifest = read_manifest(RunFolder(folder))
    design = manifest.design
    assert design is not None and design.confirm is not None
    stage = design.confirm
    assert (stage.named, stage.first_repeat, stage.max_sessions) == ([NAMED], 1, 20)
    # a one-out cell per piece, after the design's 16: the full setup without that piece; then a cell per pair
    # of pieces without both (their interaction, estimated when both are real at screening or --pairs names it)
    assert list(stage.cells) == [p.id for p in design.pieces]
    cells = {c.id: c for c in manifest.cells}
    assert len(manifest.cells) == ROWS + 4 + 6 and len(stage.pairs) == 6 and not stage.named_pairs
    ids = [p.id for p in design.pieces]
    assert cells[stage.pairs[f"{ids[0]}+{ids[1]}"]].pieces == ids[:2]
    assert all(cells[c].pieces == [p] and cells[c].dirname == f"c{ROWS + i:02d}" for i, (p, c) in
               enumerate(stage.cells.items()))  # fmt: skip
    assert manifest.items == ROWS  # the plan made up front is the design's; the stage is added to it
    plan = RunFolder(folder).read_plan()
    staged = [p for p in plan if p.repeat >= 1]
    assert len(plan) == ROWS + 4 and Counter(p.repeat for p in staged) == {1: 2, 2: 2}
    assert {p.cell for p in staged} == {"C0", stage.cells[NAMED]}
    assert min(p.order for p in staged) > max(p.order for p in plan if p.repeat == 0)
    assert (
        all(r.complete for r in iter_results(RunFolder(folder)))
        and len(iter_results(RunFolder(folder))) == 20
    )
    assert "confirmation: rules#python (named): 2 block(s) per task, 4 sessions" in err
    report = orjson.loads((folder / "report.json").read_bytes())
    rows = {r["id"]: r for r in report["pieces"]}
    assert report["piece_design"]["sessions"] == ROWS  # the screening's estimate reads its own blocks only
    assert rows[NAMED]["removal"]["blocks"] == 2
    assert all(rows[p].get("removal") is None for p in rows if p != NAMED)
    # a resume finds the stage planned already and runs nothing more
    res = invoke(["run", "--resume", str(folder), "--json", "--no-probe", "--report", "none"])  # read above
    assert res.exit_code == 0, res.stderr
    assert orjson.loads(res.stdout)["launched"] == 0 and len(RunFolder(folder).read_plan()) == ROWS + 4


def _seed_results(folder: Path, cell: str, *, cell_passes: bool) -> None:
    """Every stage session of ``cell`` passes (or fails) and the control's does the opposite."""
    rf = RunFolder(folder)
    for res in iter_results(rf):
        if res.repeat == 0 or res.cell not in (cell, "C0"):
            continue
        passes = cell_passes == (res.cell == cell)
        data = res.model_dump(mode="json") | {"pitfall_hits": {} if passes else {"planted": 1}}
        atomic_write_bytes(rf.result_path(res.item), orjson.dumps(data))


@pytest.fixture(scope="module")
def stage_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repeat of the design for FOUR and the stage confirming NAMED, run once (the fake CLI, as ``rig``) for
    the tests that each seed a copy of it their own way."""

    def build(tmp: Path) -> None:
        ex = materialise_example(tmp / "ex")
        with pytest.MonkeyPatch.context() as env:
            isolate_env(env, tmp_path_factory)
            env.setenv("HOME", str(ex.home))
            env.setenv("ABLATE_CLAUDE_BIN", str(write_fake_claude(tmp / "claude")))
            env.setenv("ABLATE_WORK_DIR", str(tmp / "envs"))
            env.setenv("ANTHROPIC_API_KEY", "sk-test")
            code, _out, err = run(
                ex, tmp / "runs", "--pieces", FOUR, "--confirm", NAMED, "--repeats", "1", "--seed", "3",
                "--no-probe", "--report", "none",
            )  # fmt: skip
        assert code == 0, err

    (folder,) = (built_once(tmp_path_factory, "piece-confirm-stage", build) / "runs").iterdir()
    return folder


@pytest.mark.parametrize(("cell_passes", "verdict"), [(False, "helps"), (True, "hurts")])
def test_the_removal_is_the_full_setup_minus_the_setup_without_the_piece(
    stage_run: Path, tmp_path: Path, cell_passes: bool, verdict: str
) -> None:
    """Seeded: in each of the stage's 8 blocks the control passes and the cell without the piece fails (the
    piece helps: removal +100 pts, the sign of a piece's effect), or the other way round."""
    folder = Path(shutil.copytree(stage_run, tmp_path / stage_run.name))
    manifest = read_manifest(RunFolder(folder))
    assert manifest.design is not None and manifest.design.confirm is not None
    cell = manifest.design.confirm.cells[NAMED]
    assert len(RunFolder(folder).read_plan()) == ROWS + 16  # 16 screening sessions: 8 blocks of 2
    _seed_results(folder, cell, cell_passes=cell_passes)
    report = build_report(folder)
    (row,) = [r for r in report.pieces if r.id == NAMED]
    assert row.removal is not None
    sign = -1.0 if cell_passes else 1.0
    assert row.removal.effect == pytest.approx(sign)
    assert row.removal.blocks == 8 and row.removal.verdict == verdict
    assert row.removal.ci_low is not None and row.removal.ci_high is not None
    assert (row.removal.ci_low > 0) if sign > 0 else (row.removal.ci_high < 0)
    assert row.removal.p_adjusted is not None and row.removal.p_adjusted <= 0.05
    assert row.verdict == "undecided"  # the screening's sessions are all alike: its own answer stays
    from ablate.report.pieces import headline
    from ablate.report.terminal import answer_text

    assert headline(row) == verdict
    text = "\n".join(answer_text(report))
    assert f"{verdict} (removal; screening: undecided)" in text and "removing it" in text


def test_bad_pairs_are_refused_before_anything_is_written(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    pieces = FOUR.split(",")
    for pairs, said in (
        (f"{pieces[0]}+rules#pyton", "did you mean 'rules#python'"),
        (f"{pieces[0]}+{pieces[0]}", "pairs a piece with itself"),
        (pieces[0], "is not a pair"),
        (f"{pieces[0]}+{pieces[1]}+{pieces[2]}", "is not a pair"),
        ("", "--pairs is empty"),
    ):
        code, _out, err = run(ex, tmp / "runs", "--pieces", FOUR, "--pairs", pairs, "--no-probe")
        assert code == 2 and said in err, (pairs, err)
    # one repeat of the design (16) and one stage block of the control, 2 one-out cells and 1 pair cell: 20
    code, _out, err = run(
        ex, tmp / "runs", "--pieces", FOUR, "--pairs", f"{pieces[0]}+{pieces[1]}", "--max-sessions", "19",
    )  # fmt: skip
    assert code == 2 and "is 20 sessions" in " ".join(err.split()) and "at least 20" in err, err
    code, _out, err = run(ex, tmp / "runs", "--pieces", FOUR, "--pairs", f"{pieces[0]}+{pieces[1]}",
                          "--design", "one-out")  # fmt: skip
    assert code == 2 and "removal effects already" in err, err
    assert not (tmp / "runs").exists() or not any((tmp / "runs").iterdir())  # nothing written, nothing spent


def test_a_named_pairs_interaction_is_reported_from_its_four_cells(rig: tuple[ExampleSetup, Path]) -> None:
    """Seeded: in each stage block the full setup passes and every cell without A, B or both fails — A and B
    help only together: interaction +100 pts, removing either loses 100 pts, either alone adds nothing. The
    stage gets the 6 blocks --max-sessions leaves (32 // 4 = 8 without it): the fewest whose exact p is under α."""
    ex, tmp = rig
    a, b = FOUR.split(",")[:2]
    code, out, err = run(
        ex, tmp / "runs", "--pieces", FOUR, "--pairs", f"{a}+{b}", "--repeats", "2", "--seed", "3",
        "--max-sessions", str(2 * ROWS + 4 * BLOCKS), "--no-probe", "--report", "none",
    )  # fmt: skip
    assert code == 0, err
    folder = Path(orjson.loads(out)["folder"])
    manifest = read_manifest(RunFolder(folder))
    assert manifest.design is not None and manifest.design.confirm is not None
    stage = manifest.design.confirm
    assert stage.named_pairs == [f"{a}+{b}"] and stage.named == []
    staged = [p for p in RunFolder(folder).read_plan() if p.repeat >= 2]
    ran = {stage.cells[a], stage.cells[b], stage.pairs[f"{a}+{b}"], "C0"}
    assert {p.cell for p in staged} == ran and len(staged) == 4 * BLOCKS  # blocks of the four cells
    assert f"interactions of {a}+{b}" in err
    rf = RunFolder(folder)
    for res in iter_results(rf):
        if res.repeat >= 2:
            passes = res.cell == "C0"
            data = res.model_dump(mode="json") | {"pitfall_hits": {} if passes else {"planted": 1}}
            atomic_write_bytes(rf.result_path(res.item), orjson.dumps(data))
    report = build_report(folder)
    (pair,) = (report.model_extra or {})["interactions"]
    assert pair["pieces"] == [a, b] and pair["blocks"] == BLOCKS and pair["verdict"] == "synergy"
    assert pair["effect"] == pytest.approx(1.0) and pair["together"] == pytest.approx(1.0)
    assert pair["alone"] == {a: 0.0, b: 0.0} and pair["removing"] == {a: 1.0, b: 1.0}
    assert pair["p_adjusted"] == pytest.approx(2 / 2**BLOCKS)  # exact sign-flip: every block +1
    assert pair["sentence"].startswith(f"{a} and {b} help only together: removing {a} loses +100 pts")
    write_report(folder, formats=["md"])
    md = (folder / "report.md").read_text()
    assert "## Interactions: pieces that work together" in md and f"| {a} + {b} | +100 pts |" in md

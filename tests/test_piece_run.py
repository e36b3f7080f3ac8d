"""`ablate run --pieces` without the real CLI: refusals before anything is written, the design in the manifest,
the report's per-piece rows rebuilt from the folder, a resume (fake claude; the real one: test_piece_run_e2e)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from ablate.folder.adaptive import control_of
from ablate.folder.design import DesignPiece, DesignRow, PieceDesignRecord
from ablate.folder.layout import RunFolder, read_manifest, write_manifest
from ablate.report.pieces import cost_per_point, measured
from ablate.report.sections import build_report
from ablate.setup.examples import ExampleSetup
from ablate.stats.proportions import paired_binary
from ablate.stats.screening import draw_columns, screening_design
from ablate.stats.screening_inference import Outcome, analyse
from ablate.stats.types import Interval
from tests.helpers_cli import invoke
from tests.run_folder import items_said
from tests.test_cli_run import TASK, rig

__all__ = ["rig"]  # the fake-CLI fixture of test_cli_run: an example setup, HOME, a fake claude, a work dir

THREE = "skills#bug-triage,rules#python,hooks#sessionstart-session-start"
FOUR = THREE + ",agents#doc-summarizer"
#: The piece the confirmation tests name with --confirm (test_piece_confirm).
NAMED = "rules#python"


def run(ex: ExampleSetup, out: Path, *extra: str) -> tuple[int, str, str]:
    args = ["run", "--tasks", TASK, "--out", str(out), "--config-dir", str(ex.config_dir)]
    res = invoke([*args, "--repo", str(ex.repo), "--json", "--report", "now", *extra])
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            ["--pieces", "skills#bug-triag"],
            "unknown piece id 'skills#bug-triag' (did you mean 'skills#bug-triage'?)",
        ),
        (["--pieces", "rules#python"], "1 piece(s) (rules#python); a piece design needs at least 2"),
        (["--pieces", ""], "--pieces is empty"),
        (
            ["--pieces", "all", "--max-sessions", "23"],
            "the screening design for 19 pieces has 40 cells, so one repeat of 1 task(s) is 40 sessions; "
            "raise --max-sessions to at least 40",
        ),
        (["--pieces", THREE, "--max-sessions", "8", "--repeats", "3"], "pass --repeats 2 or fewer"),
        (
            ["--pieces", "all", "--design", "bogus"],
            "unknown design 'bogus'; choose one of screening, one-out",
        ),
        (["--design", "one-out", "--max-sessions", "9"], "--design and --max-sessions go with --pieces"),
        (
            ["--pieces", "all", "--cells", "binary"],
            "--pieces and --cells: a piece run's cells are its design's rows",
        ),
        (["--pieces", "all", "--aa"], "--pieces and --aa"),
        (["--pieces", THREE, "--adaptive", "--repeats", "2"], "--repeats and --adaptive"),
        (
            ["--pieces", FOUR, "--confirm", "rules#pyton"],
            "--confirm rules#pyton: unknown piece id 'rules#pyton' (did you mean 'rules#python'?)",
        ),
        (["--pieces", FOUR, "--confirm", ","], "--confirm is empty"),
        (["--confirm", NAMED], "--confirm goes with --pieces"),
        (
            ["--pieces", FOUR, "--design", "one-out", "--confirm", NAMED],
            "with the one-out design: its effects are removal effects already",
        ),
        (
            # one repeat of 16 cells and one block of the control and 2 named cells: 19 sessions
            ["--pieces", FOUR, "--confirm", f"{NAMED},skills#bug-triage", "--max-sessions", "18"],
            "--max-sessions 18: one repeat of the screening design (16 cells) and one confirmation block of "
            "the 2 piece(s) --confirm names (the control and 2 cells), on 1 task(s), is 19 sessions",
        ),
        (
            ["--pieces", FOUR, "--confirm", NAMED, "--max-sessions", "20", "--repeats", "2"],
            "raise --max-sessions to 34",
        ),
    ],
)
def test_bad_piece_runs_are_refused_before_anything_is_written(
    rig: tuple[ExampleSetup, Path], extra: list[str], said: str
) -> None:
    ex, tmp = rig
    code, _, err = run(ex, tmp / "runs", *extra)
    assert code == 2, err
    assert said in " ".join(err.split()), err
    assert "Traceback" not in err
    assert not (tmp / "runs").exists() or not any((tmp / "runs").iterdir())  # nothing written, nothing spent


def test_ab_refuses_pieces(rig: tuple[ExampleSetup, Path]) -> None:
    _ex, tmp = rig
    res = invoke(["ab", "--tasks", TASK, "--pieces", "all", "--out", str(tmp / "runs")])
    assert res.exit_code == 2 and "use `ablate run --pieces`" in res.stderr


def test_a_piece_run_records_its_design_and_the_report_rebuilds_each_piece(
    rig: tuple[ExampleSetup, Path],
) -> None:
    ex, tmp = rig
    # one-out over three pieces: 4 cells; --max-sessions 9 without --repeats plans the 2 whole repeats that fit
    code, out, err = run(ex, tmp / "runs", "--pieces", THREE, "--design", "one-out", "--max-sessions", "9")
    assert code == 0, err
    folder = Path(orjson.loads(out)["folder"])
    manifest = orjson.loads((folder / "manifest.json").read_bytes())
    assert (manifest["repeats"], manifest["items"]) == (2, 8)
    design = manifest["design"]
    assert design["kind"] == "one-out"
    ids = [p["id"] for p in design["pieces"]]
    assert ids == [
        "skills#bug-triage",
        "hooks#sessionstart-session-start",
        "rules#python",
    ]  # the setup's order
    assert [r["cell"] for r in design["rows"]] == ["C0", "P01", "P02", "P03"]
    assert design["rows"][0]["keeps"] == [True, True, True]
    assert design["rows"][2]["keeps"] == [True, False, True]
    cells = {c["id"]: c for c in manifest["cells"]}
    assert "pieces" not in cells["C0"] and cells["P02"]["pieces"] == ["hooks#sessionstart-session-start"]
    assert all(not c["stripped"] for c in manifest["cells"])
    report = orjson.loads((folder / "report.json").read_bytes())
    assert report["run"]["control"] == "C0"
    assert [r["id"] for r in report["pieces"]] == ids
    keys = {
        "id",
        "kind",
        "tokens",
        "effect",
        "ci_low",
        "ci_high",
        "p_adjusted",
        "verdict",
        "tokens_per_point",
    }
    assert all(keys <= set(r) for r in report["pieces"])
    assert report["pieces"][0]["kind"] == "skill" and report["pieces"][0]["tokens"] > 0
    # the fake CLI answers every session alike: no spread, so no test — said, never a verdict
    assert {r["verdict"] for r in report["pieces"]} == {"undecided"}
    assert all(r["reason"] for r in report["pieces"])
    assert report["piece_design"]["sessions"] == 8 and report["piece_design"]["blocks"] == 2
    assert any(c["id"] == "pieces" and "Leave-one-out" in c["text"] for c in report["caveats"])
    md = (folder / "report.md").read_text()
    assert "## Pieces: which piece earns its keep" in md and "| skills#bug-triage | skill |" in md
    # the design's rows are not ranked against the control as if each were a layer: the pieces answer
    assert "## Ranking" not in md and "## Marginal contribution" not in md
    assert not (folder / "plots" / "forest.svg").exists()
    # a design row says the pieces it cuts, and strips no layer
    rows = [c for c in report["cells"] if c["cell"] != "C0"]
    assert rows and all(c["pieces"] and c["layers"] == [] for c in rows), rows
    assert "pieces" not in next(c for c in report["cells"] if c["cell"] == "C0")
    html = (folder / "report.html").read_text()
    assert '<table id="pieces">' in html and '<figure id="pieces-plot"><svg' in html
    assert html.count('<figure id="forest-plot">') <= 1  # each figure its own id
    res = invoke(["report", str(folder)])  # the terminal summary shows the pieces too
    assert res.exit_code == 0, res.stderr
    assert "tokens per percentage point" in res.stdout and "hooks#sessionstart-session-start" in res.stdout
    # a resume rebuilds the cells from the manifest (there is no cell-set file) and runs nothing more
    res = invoke(["run", "--resume", str(folder), "--json", "--no-probe"])
    assert res.exit_code == 0, res.stderr
    assert orjson.loads(res.stdout)["launched"] == 0
    res = invoke(["run", "--resume", str(folder), "--pieces", "all"])
    assert res.exit_code == 2 and "--pieces cannot change a planned run" in res.stderr
    # the control is the first cell that strips no layer and cuts no piece, wherever it stands
    rf = RunFolder(folder)
    m = read_manifest(rf)
    write_manifest(rf, m.model_copy(update={"cells": [*m.cells[1:], m.cells[0]]}))
    assert build_report(folder).run.control == "C0" and control_of(read_manifest(rf)) == "C0"


def test_a_layer_run_has_no_design_and_no_piece_rows(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    code, out, err = run(ex, tmp / "runs", "--cells", "binary", "--no-probe")
    assert code == 0, err
    folder = Path(orjson.loads(out)["folder"])
    manifest = orjson.loads((folder / "manifest.json").read_bytes())
    assert "design" not in manifest and all("pieces" not in c for c in manifest["cells"])
    report = orjson.loads((folder / "report.json").read_bytes())
    assert "pieces" not in report and "piece_design" not in report
    assert "## Pieces" not in (folder / "report.md").read_text()


def test_the_design_record_refuses_rows_that_do_not_match_its_pieces() -> None:
    pieces = [DesignPiece(id="a"), DesignPiece(id="b")]
    with pytest.raises(ValidationError, match="1 keeps for 2 pieces"):
        PieceDesignRecord(kind="one-out", pieces=pieces, rows=[DesignRow(cell="C0", keeps=[True])])
    with pytest.raises(ValidationError, match="a cell runs two rows"):
        PieceDesignRecord(
            kind="one-out",
            pieces=pieces,
            rows=[DesignRow(cell="C0", keeps=[True, True]), DesignRow(cell="C0", keeps=[False, True])],
        )


def test_cost_per_point_is_tokens_per_point_of_effect_for_a_piece_that_helps() -> None:
    assert cost_per_point(300, 0.25, "helps", binary=True) == pytest.approx(12.0)  # 300 tokens / 25 points
    assert cost_per_point(300, -1.5, "helps", binary=False) == pytest.approx(200.0)  # fewer turns helps
    assert cost_per_point(300, -0.25, "hurts", binary=True) is None
    assert cost_per_point(300, 0.01, "draw", binary=True) is None


def test_the_e2e_plant_is_found_and_confirmed_with_margin() -> None:
    """The e2e test's plant (the pitfall exactly when "hurts" is kept and "helps" cut, seven pieces, 16 rows × 3
    repeats, the columns drawn three times from its --seed 11) is deterministic, so its figures are these:
    helps and hurts at Holm-adjusted p ≈ 0.003 (α = 0.05), no null piece marked; removing "helps" from the
    full setup fails all 7 stage blocks: exact p = 2/2⁷, under α even after Holm over the three confirmed
    pieces (6 blocks would not be)."""
    design = draw_columns(screening_design([f"p{i}" for i in range(7)]), 11, draws=3)
    outcomes = [
        Outcome(i, "t", r, float(not (design.rows[i][1] and not design.rows[i][0])))
        for r in range(3)
        for i in design.rows_of(r)
    ]
    got = analyse(design, outcomes, binary=True)
    effects = got.pieces
    assert got.method == "drawn-columns-conditional-randomization-test" and len(outcomes) == 48
    assert [e.verdict for e in effects[:2]] == ["helps", "hurts"]
    assert all(e.p_adjusted is not None and e.p_adjusted <= 0.05 / 3 for e in effects[:2]), effects[:2]
    assert all(e.verdict not in ("helps", "hurts") for e in effects[2:]), effects[2:]
    removal = paired_binary([False] * 7, [True] * 7)  # the "no helps" cell against the full setup
    p = removal.p_value
    assert p is not None and p == pytest.approx(2 / 2**7) and 3 * p <= 0.05 < 3 * 2 / 2**6
    assert isinstance(removal.interval, Interval) and removal.interval.high < 0  # cell − control: a loss


def test_the_e2e_pair_plant_is_found_with_margin() -> None:
    """The pair e2e test's plant (the pitfall unless both of the first two pieces are kept, seven pieces, 16
    rows × 2 repeats, --seed 11): both marked at Holm-adjusted p < 0.01, none of the five null pieces (the
    nearest at p > 0.15); its 7 stage blocks give each removal and the interaction exact p = 2/2⁷ (6 would
    leave the removals over α after Holm over the two)."""
    design = draw_columns(screening_design([f"p{i}" for i in range(7)]), 11, draws=2)
    outcomes = [
        Outcome(i, "t", r, float(design.rows[i][0] and design.rows[i][1]))
        for r in range(2)
        for i in design.rows_of(r)
    ]
    effects = analyse(design, outcomes, binary=True).pieces
    assert len(outcomes) == 32 and [e.verdict for e in effects[:2]] == ["helps", "helps"]
    assert all(e.p_adjusted is not None and e.p_adjusted < 0.01 for e in effects[:2]), effects[:2]
    assert all(e.verdict not in ("helps", "hurts") and (e.p_adjusted or 1) > 0.15 for e in effects[2:])
    p = paired_binary([False] * 7, [True] * 7).p_value
    assert p is not None and p == pytest.approx(2 / 2**7) and 2 * p <= 0.05 < 2 * 2 / 2**6


def test_the_probe_refuses_a_piece_run_before_any_session(
    rig: tuple[ExampleSetup, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe runs first, as in every run; a cell it cannot prove refuses the run and nothing is spent
    (the fake CLI cannot be probed: every cell is an error)."""
    ex, tmp = rig
    monkeypatch.setenv("ABLATE_PROBE", "1")
    code, _, err = run(ex, tmp / "runs", "--pieces", THREE)
    assert code == 1, err
    assert "the probe refused this run before any paid session" in err
    assert (
        f"`ablate probe --pieces {'skills#bug-triage,hooks#sessionstart-session-start,rules#python'}`" in err
    )
    (folder,) = (tmp / "runs").iterdir()
    assert not (folder / "results").exists() or not any((folder / "results").iterdir())
    # what a failing e2e test prints of such a run: the refusal and each cell the probe could not prove
    said = items_said(tmp / "runs").splitlines()
    assert said[0] == f"{folder / 'probe.json'}: refused", said
    assert any(line.startswith("  C0 error: ") for line in said), said


def test_an_adaptive_piece_run_keeps_to_max_sessions(rig: tuple[ExampleSetup, Path]) -> None:
    """--max-sessions caps the rounds of an adaptive piece run: one-out over three pieces is 4 sessions a
    round on one task, so 9 sessions allow 2 rounds whatever --max-repeats says (the fake CLI's sessions are
    all alike: no piece is ever decided, so the run goes to its last round)."""
    ex, tmp = rig
    code, out, err = run(
        ex, tmp / "runs", "--pieces", THREE, "--design", "one-out", "--adaptive", "--max-repeats", "20",
        "--max-sessions", "9", "--no-probe",
    )  # fmt: skip
    assert code == 0, err
    data = orjson.loads(out)
    assert (data["adaptive"]["stopped"], data["adaptive"]["rounds"], data["adaptive"]["sessions"]) == (
        "max-repeats",
        2,
        8,
    )
    assert set(data["adaptive"]["decisions"]) == set(THREE.split(","))  # decided per piece, not per cell
    folder = Path(data["folder"])
    state = orjson.loads((folder / "adaptive.json").read_bytes())
    assert state["options"]["max_repeats"] == 2 and state["looks"][-1]["cells"] == {}


def test_a_planned_piece_run_runs_in_shards_and_merges_with_its_design(
    rig: tuple[ExampleSetup, Path],
) -> None:
    ex, tmp = rig
    setup = ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo)]
    plan = [
        "plan",
        "--tasks",
        TASK,
        "--pieces",
        THREE,
        "--design",
        "one-out",
        "--repeats",
        "2",
        "--seed",
        "5",
    ]
    res = invoke([*plan, "--out", str(tmp / "plans"), "--json", *setup])
    assert res.exit_code == 0, res.stderr
    planned = Path(orjson.loads(res.stdout)["folder"])
    assert read_manifest(RunFolder(planned)).design is not None
    shards = []
    for k in (1, 2):
        args = ["run", "--plan", str(planned), "--shard", f"{k}/2", "--out", str(tmp / "shards"), "--json"]
        res = invoke([*args, "--no-probe"])
        assert res.exit_code == 0, res.stderr
        shards.append(orjson.loads(res.stdout)["folder"])
    res = invoke(["merge", *shards, "--out", str(tmp / "merged"), "--json"])
    assert res.exit_code == 0, res.stderr
    report = build_report(tmp / "merged")
    setup_order = ["skills#bug-triage", "hooks#sessionstart-session-start", "rules#python"]
    assert [r.id for r in report.pieces] == setup_order
    assert report.piece_design is not None and report.piece_design.sessions == 8
    res = invoke(["plan", "--tasks", TASK, "--pieces", THREE, "--cells", "binary", *setup])
    assert res.exit_code == 2 and "--pieces and --cells" in res.stderr


def test_a_piece_runs_probe_measures_each_pieces_tokens_by_least_squares() -> None:
    """Each faithful cell removed the characters of the pieces it cuts: solved over the cells, a piece's own
    characters (4 a token), ``measured``; a probe whose cells cannot tell the pieces apart changes nothing."""
    pieces = [DesignPiece(id=i, tokens=1) for i in ("a", "b", "c")]
    record = PieceDesignRecord(kind="screening", pieces=pieces, rows=[DesignRow(cell="C0", keeps=[True] * 3)])
    chars = {"a": 400, "b": 40, "c": 0}

    def cell(cut: list[str], verdict: str = "faithful", extra: int = 0) -> dict[str, object]:
        removed = sum(chars[p] for p in cut) + extra
        return {"verdict": verdict, "cut_pieces": cut, "pieces": {"removed_chars": removed}}

    probe = {
        "cells": [{"verdict": "faithful", "id": "C0"}, cell(["a", "b"]), cell(["b", "c"]), cell(["a", "c"])]
    }
    got = measured(record, probe).pieces
    assert [(p.tokens, p.tokens_source) for p in got] == [
        (100, "measured"),
        (10, "measured"),
        (0, "measured"),
    ]
    # a cell the probe did not prove counts for nothing (its removal is not the pieces'), and without it
    # the two cells left cannot tell three pieces apart: the estimates stay
    probe["cells"][3] = cell(["a", "c"], verdict="leak", extra=999)
    assert measured(record, probe) == record and measured(record, None) == record

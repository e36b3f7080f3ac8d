"""Models as a factor (issue 40 item 3), part by part: the plan, the pinned line, the manifest's identity, the
bad inputs, the model × cell interaction, report.json's shape and `ablate gate --model`. The end-to-end run
against the sim is tests/test_models_e2e.py."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import orjson
import pytest

from ablate.core.errors import UsageError
from ablate.folder.layout import item_id
from ablate.report import write_report
from ablate.report.sections import build_report
from ablate.run.create import compatibility_problems
from ablate.run.estimate import dearest
from ablate.run.plan import block_order, make_plan, plan_sha256
from ablate.run.prepare import RunRequest, prepare_run
from ablate.run.session import pinned_argv, render_argv
from ablate.setup.examples import ExampleSetup
from ablate.stats.multiplicity import holm
from ablate.stats.resampling import paired_mean
from tests.helpers_cli import invoke
from tests.report_support import Outcome, make_run
from tests.run_folder import CLAUDE, new_manifest
from tests.test_cli_run import TASK, rig

__all__ = ["rig"]  # the fake-CLI fixture of test_cli_run (its fake answers as the --model it is given)

HAIKU, SONNET, OPUS = "claude-haiku-4-5", "claude-sonnet-4-6", "claude-opus-4-5"
CELLS = {"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"]}
TASKS = ["greet", "deploy"]


def test_every_block_runs_every_cell_on_every_model_in_one_shuffled_sweep_fixed_by_the_seed() -> None:
    cells, models = ["C0", "C1", "C2"], [HAIKU, SONNET]
    plan = make_plan(TASKS, cells, repeats=4, seed=11, models=models)
    blocks: dict[tuple[int, str], list[tuple[int, str, str | None]]] = {}
    for it in plan:
        assert it.item == item_id(it.task, it.cell, it.repeat, it.model) and f"__{it.model}__r" in it.item
        blocks.setdefault((it.repeat, it.task), []).append((it.order, it.cell, it.model))
    assert len(blocks) == 8
    sweeps = set()
    for block in blocks.values():
        orders = sorted(o for o, _c, _m in block)
        assert orders == list(range(orders[0], orders[0] + 6))  # one sweep: nothing of another block between
        assert sorted((c, m) for _o, c, m in block) == sorted(itertools.product(cells, models))
        sweeps.add(tuple((c, m) for _o, c, m in sorted(block)))
    assert len(sweeps) > 1  # shuffled: neither a cell nor a model holds one place in every block
    assert plan == make_plan(TASKS, cells, repeats=4, seed=11, models=models)
    assert plan_sha256(plan) != plan_sha256(make_plan(TASKS, cells, repeats=4, seed=12, models=models))


def test_a_plan_too_big_counts_its_models() -> None:
    with pytest.raises(
        UsageError, match=r"\(1 tasks × 100 cells × 600 repeats × 2 models\), more than the 100000"
    ):
        make_plan(["t"], [f"C{i}" for i in range(100)], repeats=600, seed=1, models=[HAIKU, SONNET])


def test_a_plan_of_one_model_is_todays_plan() -> None:
    plan = make_plan(TASKS, ["C0", "C1", "C2"], repeats=2, seed=5)
    today = [
        item_id(t, c, r) for r in range(2) for t in TASKS for c in block_order(["C0", "C1", "C2"], seed=5, task=t, repeat=r)
    ]  # fmt: skip
    assert [p.item for p in plan] == today and all(p.model is None for p in plan)
    assert "model" not in plan[0].model_dump(mode="json")  # plan.jsonl lines as before


def test_each_session_is_pinned_to_its_items_model() -> None:
    template = pinned_argv(Path("/opt/claude"), "{model}")
    argv = render_argv(template, max_turns=3, session_id="s", prompt="hi", model=HAIKU)
    assert argv[argv.index("--model") + 1] == HAIKU and "{model}" not in argv
    one = pinned_argv(Path("/opt/claude"), SONNET)
    assert render_argv(one, max_turns=3, session_id="s", prompt="hi") == render_argv(
        one, max_turns=3, session_id="s", prompt="hi", model=None
    )


def test_the_estimate_of_a_run_of_several_models_prices_the_dearest() -> None:
    assert dearest([HAIKU, OPUS, SONNET]) == OPUS and dearest([SONNET]) == SONNET


def test_the_models_are_part_of_the_experiments_identity() -> None:
    one = new_manifest(cells=[], tasks=[], repeats=1, items=0)
    two = new_manifest(cells=[], tasks=[], repeats=1, items=0, model=HAIKU, models=[HAIKU, SONNET])
    assert "models" not in one.identity() and two.identity()["models"] == [HAIKU, SONNET]
    assert compatibility_problems(two, CLAUDE, None, (HAIKU, SONNET)) == []
    assert compatibility_problems(two, CLAUDE, None, (HAIKU, OPUS)) == [
        f"models {HAIKU}, {OPUS} differ from the run's {HAIKU}, {SONNET}"
    ]
    assert compatibility_problems(two, CLAUDE, HAIKU) == [
        f"model {HAIKU} differs from the run's {HAIKU}, {SONNET}"
    ]
    assert compatibility_problems(one, CLAUDE, None, (HAIKU, SONNET)) != []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--models", f"{HAIKU},sonnet"], "'sonnet' is not a model ablate can pin"),
        (["--models", f"{HAIKU},claude-sonet-4-6"], "nearest known: claude-sonnet-4-6"),
        (["--models", "haiku"], f"nearest known: {HAIKU}"),
        (["--models", f"{HAIKU},{SONNET},{HAIKU}"], f"{HAIKU} is given twice"),
        (["--models", f"{HAIKU},{SONNET}", "--model", SONNET], "--models and --model"),
        (["--models", " , "], "--models is empty"),
    ],
)
@pytest.mark.parametrize("command", ["run", "ab", "plan"])
def test_bad_models_are_refused_before_anything_is_written(
    tmp_path: Path, command: str, args: list[str], said: str
) -> None:
    out = tmp_path / "runs"
    code, text = invoke([command, "--tasks", str(tmp_path / "t.toml"), "--out", str(out), *args]).shown
    assert code == 2 and said in text and "error:" in text, text
    assert not out.exists()


def test_compare_refuses_models_but_for_a_fixed_claude_code_comparison(tmp_path: Path) -> None:
    arm = tmp_path / "a.md"
    arm.write_text("# A\n")
    base = ["compare", str(arm), str(arm), "--tasks", str(tmp_path), "--out", str(tmp_path / "runs"), "--yes"]
    code, text = invoke([*base, "--executor", "sim", "--models", f"{HAIKU},{SONNET}"]).shown
    assert code == 2 and "--models with --executor sim" in text, text
    code, text = invoke([*base, "--models", f"{HAIKU},nope"]).shown
    assert code == 2 and "'nope' is not a model ablate can pin" in text, text


def test_models_with_adaptive_are_refused_before_the_folder_is_written(tmp_path: Path) -> None:
    req = RunRequest(
        tasks=[], cells="binary", repeats=3, model=SONNET, max_turns=2, timeout_s=60, out=tmp_path / "runs",
        config_dir=tmp_path, repo=tmp_path, models=(HAIKU, SONNET), adaptive=True,
    )  # fmt: skip
    with pytest.raises(UsageError, match="--models with --adaptive"):
        prepare_run(req, CLAUDE)
    assert not (tmp_path / "runs").exists()


def _planted(root: Path, models: tuple[str, ...], repeats: int = 4) -> Path:
    """C1 strips CLAUDE.md: on haiku stripping it causes the pitfall; on sonnet C0 and C1 hit it alike, every
    third block; on opus nothing does."""

    def outcome(task: str, cell: str, repeat: int, model: str) -> Outcome:
        if model == HAIKU:
            return Outcome(pitfall=cell == "C1", model=model)
        if model == SONNET:
            return Outcome(pitfall=(repeat + TASKS.index(task)) % 3 == 0 and cell != "C2", model=model)
        return Outcome(pitfall=False, model=model)

    return make_run(root, cells=CELLS, tasks=TASKS, repeats=repeats, outcome=outcome, models=models)


def test_the_interaction_is_the_paired_difference_of_each_models_effect_holm_over_every_cell_and_pair(
    tmp_path: Path,
) -> None:
    models = (HAIKU, SONNET, OPUS)
    report = build_report(_planted(tmp_path / "run", models)).model_dump(mode="json")
    rows = report["model_interactions"]
    assert [(r["cell"], r["models"]) for r in rows] == [
        (c, [HAIKU, m]) for c in ("C1", "C2") for m in (SONNET, OPUS)
    ]  # each cell, each other model against the first

    def pitfall_free(task: str, cell: str, repeat: int, model: str) -> float:
        if model == HAIKU:
            return float(cell != "C1")
        if model == SONNET:
            return float(not ((repeat + TASKS.index(task)) % 3 == 0 and cell != "C2"))
        return 1.0

    blocks = [(t, r) for t in TASKS for r in range(4)]
    diffs = [
        [
            (pitfall_free(t, cell, r, HAIKU) - pitfall_free(t, "C0", r, HAIKU))
            - (pitfall_free(t, cell, r, other) - pitfall_free(t, "C0", r, other))
            for t, r in blocks
        ]
        for cell in ("C1", "C2")
        for other in (SONNET, OPUS)
    ]
    ps = [paired_mean(d, [0.0] * len(d), level=0.95, seed=report["run"]["seed"]).p_value for d in diffs]
    assert ps[3] is None  # C2 on opus against haiku: no block differs, nothing to test
    adjusted = [*holm([p for p in ps if p is not None]), None]  # Holm over every testable cell and pair
    for row, d, p in zip(rows, diffs, adjusted, strict=True):
        assert row["blocks"] == 8 and row["delta_difference"] == pytest.approx(float(np.mean(d)))
        assert row["p_adjusted"] == (None if p is None else pytest.approx(p))
    c1_sonnet, c1_opus, c2_sonnet, c2_opus = rows
    assert c1_opus["delta_difference"] == -1.0 and c1_opus["real"]  # haiku loses everything, opus nothing
    assert c1_sonnet["delta_difference"] == -1.0 and c1_sonnet["real"]  # sonnet: C1 and C0 fail alike
    assert c2_sonnet["delta_difference"] == pytest.approx(-3 / 8) and not c2_sonnet["real"]
    assert c2_opus["delta_difference"] == 0.0 and not c2_opus["real"]
    assert "the difference between the two (-100 pts) is real" in c1_opus["sentence"]
    assert f"it helps on {HAIKU} by 100 pts pitfall-free rate" in c1_opus["sentence"]


def test_report_json_gives_each_model_the_top_levels_rows_and_a_run_of_one_model_none(tmp_path: Path) -> None:
    report = build_report(_planted(tmp_path / "two", (HAIKU, SONNET))).model_dump(mode="json")
    assert [m["model"] for m in report["models"]] == [HAIKU, SONNET]
    first = report["models"][0]
    for part in report["models"]:
        assert {"model", "comparisons", "ranking", "cells"} <= set(part)
        assert {tuple(sorted(c)) for c in part["comparisons"]} == {
            tuple(sorted(c)) for c in report["comparisons"]
        }
        assert [c["cell"] for c in part["cells"]] == [c["cell"] for c in report["cells"]]
        assert part["model_verified"] and part["n"]["items"] == len(CELLS) * len(TASKS) * 4
    assert (first["comparisons"], first["ranking"]) == (report["comparisons"], report["ranking"])
    assert report["run"]["model"] == HAIKU and report["n"]["items"] == first["n"]["items"]
    verdict = {m["model"]: {e["cell"]: e["verdict"] for e in m["ranking"]} for m in report["models"]}
    assert verdict[HAIKU]["C1"] == "helps" and verdict[SONNET]["C1"] == "draw"
    assert set(report["model_interactions"][0]) >= {
        "cell", "models", "delta_difference", "ci_low", "ci_high", "p_adjusted", "real"
    }  # fmt: skip
    one = make_run(tmp_path / "one", cells=CELLS, tasks=TASKS, repeats=2, outcome=lambda *_: Outcome())
    alone = build_report(one).model_dump(mode="json")
    assert "models" not in alone and "model_interactions" not in alone


def test_a_models_sessions_answering_as_another_are_not_verified(tmp_path: Path) -> None:
    def outcome(task: str, cell: str, repeat: int, model: str) -> Outcome:
        return Outcome(model=HAIKU)  # every session's transcript names haiku, sonnet's too

    run = make_run(
        tmp_path / "run", cells=CELLS, tasks=TASKS, repeats=2, outcome=outcome, models=(HAIKU, SONNET)
    )
    report = build_report(run).model_dump(mode="json")
    assert {m["model"]: m["model_verified"] for m in report["models"]} == {HAIKU: True, SONNET: False}
    caveat = next(c["text"] for c in report["caveats"] if c["id"] == "model")
    assert f"NOT verified on {SONNET}" in caveat


def test_gate_takes_the_model_it_gates_on(tmp_path: Path) -> None:
    run = _planted(tmp_path / "run", (HAIKU, SONNET), repeats=8)
    write_report(run, formats=["json", "md"])
    code, said = invoke(["gate", str(run)]).shown
    assert code == 2 and "holds 2 models" in said and "--model" in said, said
    code, said = invoke(["gate", str(run), "--model", OPUS]).shown
    assert code == 2 and f"--model {OPUS}: not a model of this report" in said and SONNET in said, said
    code, said = invoke(["gate", str(run), "--model", HAIKU, "--detect", "60pts"]).shown
    assert code == 0 and "C1 (helps for real)" in said, said
    code, said = invoke(["gate", str(run), "--model", SONNET]).shown  # no real difference, too small to say
    assert code == 4 and "INCONCLUSIVE" in said, said
    md = (run / "report.md").read_text()
    assert "## Ranking: which layer earns its keep on claude-haiku-4-5" in md
    assert f"### On {SONNET}" in md and "## Does the model change the answer?" in md
    single = make_run(tmp_path / "one", cells=CELLS, tasks=TASKS, repeats=2, outcome=lambda *_: Outcome())
    code, said = invoke(["gate", str(single), "--model", HAIKU]).shown
    assert code == 2 and "not a model of this report" in said, said


def test_a_piece_run_of_several_models_gives_each_its_per_piece_table(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    pieces = "skills#bug-triage,rules#python,hooks#sessionstart-session-start"
    args = ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--config-dir", str(ex.config_dir), "--repo"]
    args += [str(ex.repo), "--pieces", pieces, "--design", "one-out", "--models", f"{HAIKU},{SONNET}"]
    res = invoke([*args, "--max-sessions", "16", "--json", "--report", "now"])  # 4 rows × 2 models a block
    assert res.exit_code == 0, res.stderr
    (run,) = (tmp / "runs").iterdir()
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    assert (manifest["repeats"], manifest["items"], manifest["models"]) == (2, 16, [HAIKU, SONNET])
    assert "{model}" in manifest["argv"]
    plan = [orjson.loads(line) for line in (run / "plan.jsonl").read_bytes().splitlines()]
    for r in range(2):
        block = [(p["cell"], p["model"]) for p in plan if p["repeat"] == r]
        assert sorted(block) == sorted(itertools.product(["C0", "P01", "P02", "P03"], [HAIKU, SONNET]))
    report = orjson.loads((run / "report.json").read_bytes())
    parts = {m["model"]: m for m in report["models"]}
    assert all(m["model_verified"] for m in parts.values())  # each session answered as its own model
    assert {m: [r["id"] for r in p["pieces"]] for m, p in parts.items()} == {
        m: [r["id"] for r in report["pieces"]] for m in (HAIKU, SONNET)
    }
    assert [r["cell"] for r in report["model_interactions"]] == ["P01", "P02", "P03"]
    assert not any(r["real"] for r in report["model_interactions"])  # the fake answers every session alike
    md = (run / "report.md").read_text()
    assert f"## Pieces: which piece earns its keep on {HAIKU}" in md and f"### On {SONNET}" in md


def test_show_opens_each_models_sessions(tmp_path: Path) -> None:
    """``ablate show`` of a run of several models: the first model's flips by default (a note says so and how
    to see another's), ``--model`` another's, each flip's command naming its model; a model the run has not is
    exit 2."""
    run = _planted(tmp_path / "run", (HAIKU, SONNET))
    code, out, err = invoke(["show", str(run), "--json"])
    assert code == 0, err
    data = orjson.loads(out)
    assert data["model"] == HAIKU
    assert f"a run of {HAIKU}, {SONNET}: {HAIKU}'s sessions shown; pass --model for another's" in err
    flips = {c["cell"]: len(c["flipped"]) for c in data["cells"]}
    assert flips == {"C1": 8, "C2": 0}  # on haiku stripping CLAUDE.md fails every block

    code, out, err = invoke(["show", str(run), "--model", SONNET, "--json"])
    assert code == 0 and "pass --model" not in err, err
    data = orjson.loads(out)
    flips = {c["cell"]: len(c["flipped"]) for c in data["cells"]}
    assert data["model"] == SONNET and flips == {"C1": 0, "C2": 3}  # C0 and C1 alike; C2 never fails
    code, text, _ = invoke(["show", str(run), "--model", SONNET])
    assert f"--cell C2 --task greet --repeat 0 --model {SONNET}" in text, text
    code, said = invoke(["show", str(run), "--model", SONNET, "--cell", "C2", "--task", "greet"]).shown
    assert code == 0 and "C2" in said, said

    code, said = invoke(["show", str(run), "--model", OPUS]).shown
    assert code == 2 and f"--model {OPUS}: not a model of this run" in said and SONNET in said, said

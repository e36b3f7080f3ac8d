"""ablate report on synthetic run folders: the JSON contract, the ranking, guards, golden Markdown, the CLI."""

from __future__ import annotations

import os
import random
from pathlib import Path

import orjson
import pytest

from ablate.report import write_report
from ablate.report.markdown import render_markdown
from ablate.report.sections import build_document, build_report
from tests.conftest import DATA
from tests.helpers_cli import invoke
from tests.report_support import Outcome, make_run

CELLS = {
    "C0": [],
    "C1": ["user-claude-md"],
    "C2": ["axioms"],
    "C8": ["decisions"],
    "C12": ["output-styles"],
}
TASKS = ["greet", "validate"]


def planted(task: str, cell: str, repeat: int) -> Outcome:
    """C1 ruins greet and C8 ruins validate (pitfall 0.9 against 0.1); C2 does nothing."""
    rng = random.Random(f"{task}/{cell}/{repeat}")
    hurt = (cell == "C1" and task == "greet") or (cell == "C8" and task == "validate")
    pitfall = rng.random() < (0.9 if hurt else 0.1)
    turns = 3 if pitfall else 5
    return Outcome(pitfall=pitfall, turns=turns, tool_calls=turns - 1, cost=0.02 * turns)


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(
        tmp_path_factory.mktemp("run") / "run", cells=CELLS, tasks=TASKS, repeats=16, outcome=planted
    )


def test_report_json_has_the_contract_fields(planted_run: Path) -> None:
    written = write_report(planted_run, formats=["json"])
    data = orjson.loads((planted_run / "report.json").read_bytes())
    assert data["schema_version"] == 1
    assert set(data["run"]) >= {"id", "claude_version", "model", "model_verified", "cell_set", "isolation"}
    assert data["run"]["model_verified"] is True
    assert data["n"] == {"tasks": 2, "repeats": 16, "items": 160, "complete": 160, "excluded": 0}
    fields = {"cell", "control", "layers", "task", "metric", "cell_value", "control_value", "delta", "ci_low",
              "ci_high", "p", "p_adjusted", "real", "n_pairs"}  # fmt: skip
    for c in data["comparisons"]:
        assert set(c) >= fields
        if c["p"] is not None:
            assert c["p_adjusted"] >= c["p"]
    # every tested cell x metric x (pooled + 2 tasks); the no-op cell is not tested
    assert len(data["comparisons"]) == 3 * 4 * 3
    assert {c["cell"] for c in data["comparisons"]} == {"C1", "C2", "C8"}
    assert {c["task"] for c in data["comparisons"]} == {None, "greet", "validate"}
    assert set(data["ranking"][0]) >= {"rank", "cell", "layers", "tie_group"}
    assert [c["cell"] for c in data["no_op_cells"]] == ["C12"]
    assert {c["id"] for c in data["caveats"]} >= {
        "sample-size", "task-selection", "known-answer-bias", "isolation", "turns-proxy", "model", "variance",
        "prompt-cache", "version",
    }  # fmt: skip
    assert data["excluded_items"] == []
    assert written.paths == {"json": planted_run / "report.json"}


def test_planted_layers_are_real_and_the_null_layer_is_a_draw(planted_run: Path) -> None:
    report = build_report(planted_run)
    ranks = {e.cell: e for e in report.ranking}
    for cell in ("C1", "C8"):
        # stripping the layer ruins a task (a real primary loss): it helps, on primary evidence, whatever the
        # secondary metrics say (a pitfall ends the session early: fewer turns without it, its trade-off
        # when that is real pooled)
        assert ranks[cell].tie_group != "draw" and ranks[cell].verdict == "helps", ranks[cell]
        assert ranks[cell].evidence == "primary"
        pooled_turns = next(
            c for c in report.comparisons if c.cell == cell and c.metric == "turns" and c.task is None
        )
        assert ("costs" in " ".join(ranks[cell].tradeoffs)) == (
            pooled_turns.real and pooled_turns.verdict == "hurts"
        )
        assert ranks[cell].real_metrics[0] == "pitfall_free"
        delta = ranks[cell].delta_pitfall_free
        assert delta is not None and delta < 0
    assert ranks["C2"].tie_group == "draw" and ranks["C2"].rank == 3
    assert "C12" not in ranks
    per_task = {(c.cell, c.task): c for c in report.comparisons if c.metric == "pitfall_free"}
    assert per_task[("C1", "greet")].real and not per_task[("C1", "validate")].real
    assert per_task[("C8", "validate")].real and not per_task[("C8", "greet")].real
    # the layered per-task table holds every cell, the no-op included and labelled
    assert {t.cell for t in report.task_table} == set(CELLS)
    assert next(c for c in report.cells if c.cell == "C12").no_op


def test_one_repeat_says_only_pooled_comparisons_can_be_real(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", cells=CELLS, tasks=TASKS, repeats=1, outcome=planted)
    report = build_report(run)
    assert not any(c.real for c in report.comparisons)
    assert {e.tie_group for e in report.ranking} == {"draw"}
    caveat = next(c for c in report.caveats if c.id == "one-repeat")
    assert "pooled comparisons pair the 2 tasks as blocks and are valid tests" in caveat.text
    assert "pitfall-free rate:" in caveat.text and "repeats" in caveat.text
    md = render_markdown(build_document(report))
    assert "**This run has one repeat per (task, cell): per-task comparisons show nothing" in md
    per_task = [c for c in report.comparisons if c.task is not None]
    assert per_task and all(c.p is None and c.not_computable for c in per_task)


def test_all_pass_run_reports_not_computable_with_the_reason(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "run",
        cells={"C0": [], "C2": ["axioms"]},
        tasks=["greet"],
        repeats=4,
        outcome=lambda *_: Outcome(),
    )
    report = build_report(run)
    pf = next(c for c in report.comparisons if c.metric == "pitfall_free")
    assert pf.p is None and pf.p_adjusted is None and not pf.real
    assert pf.not_computable and "no discordant blocks" in pf.not_computable
    turns = next(c for c in report.comparisons if c.metric == "turns")
    assert turns.not_computable and "no block differs" in turns.not_computable
    # a single task: the per-task comparison would repeat the pooled one, so only the pooled one exists
    assert {c.task for c in report.comparisons} == {None}


def test_failed_and_flagged_items_are_excluded_and_counted(tmp_path: Path) -> None:
    def outcome(task: str, cell: str, repeat: int) -> Outcome:
        if (cell, repeat) == ("C1", 0):
            return Outcome(status="api_error")
        if (cell, repeat) == ("C1", 1):
            return Outcome(flags=("read-stripped-via-git",))
        if (cell, repeat) == ("C0", 2):
            return Outcome(model="claude-opus-4-5")
        return Outcome()

    run = make_run(
        tmp_path / "run",
        cells={"C0": [], "C1": ["user-claude-md"]},
        tasks=["greet"],
        repeats=4,
        outcome=outcome,
    )
    report = build_report(run)
    reasons = {e.item: e.reason for e in report.excluded_items}
    assert reasons == {
        "greet__C1__r00": "failed: api_error (API error 500)",
        "greet__C1__r01": "provenance: read-stripped-via-git",
    }
    assert report.n.excluded == 2 and report.n.complete == 7
    assert next(c for c in report.comparisons if c.metric == "turns").n_pairs == 2
    assert not report.run.model_verified and report.run.models_seen == {
        "claude-sonnet-4-6": 5,
        "claude-opus-4-5": 1,
    }
    texts = {c.id: c.text for c in report.caveats}
    assert "NOT verified" in texts["model"]
    assert "1 session(s) flagged by provenance" in texts["isolation"]
    assert "C1 1" in texts["failed-items"]


def _golden_outcome(task: str, cell: str, repeat: int) -> Outcome:
    if cell == "C1" and task == "greet":
        return Outcome(pitfall=repeat != 1, turns=3 + repeat % 2, tool_calls=2, cost=0.03)
    return Outcome(
        pitfall=(repeat == 2 and task == "validate"), turns=5 - repeat % 2, tool_calls=4, cost=0.05
    )


def test_markdown_matches_the_golden_file(tmp_path: Path) -> None:
    """The Markdown of a fixed run folder, byte for byte (regenerate: UPDATE_GOLDEN=1 pytest ...)."""
    run = make_run(
        tmp_path / "run",
        cells={"C0": [], "C1": ["user-claude-md"], "C12": ["output-styles"]},
        tasks=TASKS,
        repeats=3,
        outcome=_golden_outcome,
    )
    write_report(run, formats=["md"])
    actual = (run / "report.md").read_text()
    golden = DATA / "report" / "golden.md"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual)
    assert actual == golden.read_text()
    assert (run / "plots" / "forest.png").stat().st_size > 1000


def test_binary_run_has_the_clean_normal_tables(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "run",
        cells={"C0": [], "C11": ["user-claude-md", "axioms", "decisions"]},
        tasks=TASKS,
        repeats=3,
        outcome=_golden_outcome,
        cell_set="binary",
    )
    report = build_report(run)
    md = render_markdown(build_document(report))
    assert report.run.binary
    assert "## Setup off (Clean) against setup on (Normal)" in md
    assert "| task | turns (Clean / Normal) | tool calls | cost | pitfall avoided | skills invoked |" in md
    assert "| metric (per session) | Clean | Normal | Δ (Clean − Normal) | interval | Holm p | real? |" in md
    assert "binary run: the setup-off cell keeps the repository's ordinary files" in md


def test_cli_report_writes_every_format_and_maps_bad_input_to_exit_2(
    planted_run: Path, tmp_path: Path
) -> None:
    res = invoke(["report", str(planted_run)])
    assert res.exit_code == 0, res.output
    assert "report.html" in res.output and "C2" in res.output
    for name in ("report.md", "report.json", "report.html", "plots/forest.svg", "plots/forest.png"):
        assert (planted_run / name).exists(), name
    res = invoke(["report", str(planted_run), "--json", "--format", "json"])
    assert res.exit_code == 0
    assert orjson.loads(res.stdout)["report"]["schema_version"] == 1
    for args in (
        [str(tmp_path / "missing")],
        [str(planted_run), "--format", "pdf"],
        [str(planted_run), "--alpha", "1.5"],
        [str(planted_run), "--control", "C99"],
        [str(planted_run), "--primary", "vibes"],
        [str(planted_run), "--primary", "judge"],  # no judge verdicts in this run
    ):
        res = invoke(["report", *args])
        assert res.exit_code == 2, (args, res.output)
        assert "Traceback" not in res.output
    res = invoke(["report", str(tmp_path)])
    assert res.exit_code == 2 and "no manifest.json" in res.output  # not a run folder: a bad input


def test_report_leaves_the_users_home_untouched(planted_run: Path, tmp_path: Path) -> None:
    """matplotlib writes a font cache and config under the home on first import: never into the user's."""
    import os
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
    }
    env["HOME"] = str(home)
    proc = subprocess.run(
        [sys.executable, "-m", "ablate", "report", str(planted_run), "--format", "html"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (planted_run / "plots" / "forest.png").exists()
    assert list(home.rglob("*")) == []

"""The report's inference on planted run folders, through the run folder and ``build_report``.

Each test is one scenario an audit found the report getting wrong: a consistent effect under a large Holm
family, layers whose only real effect is on a secondary metric or one task, zero-width intervals beside large
p-values, the dev/holdout check, and the backend named in words.
"""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from ablate.folder.layout import IsolationInfo, RunFolder, read_manifest, write_manifest
from ablate.report import write_report
from ablate.report.model import Report
from ablate.report.sections import build_report
from tests.helpers_cli import invoke
from tests.report_support import Outcome, make_run

LAYERS12 = [f"layer-{i:02d}" for i in range(1, 12)]
CELLS12: dict[str, list[str]] = {"C0": []} | {f"C{i}": [lid] for i, lid in enumerate(LAYERS12, start=1)}
TASKS5 = [f"t{i}" for i in range(5)]


def _no_zero_width_interval_beside_a_large_p(report: Report) -> None:
    for c in report.comparisons:
        if c.ci_low is not None and c.ci_low == c.ci_high:
            assert c.p is not None and c.p <= report.alpha, c


def _every_block_turns(task: str, cell: str, repeat: int) -> Outcome:
    """C5 adds 10–12 turns (mean 10.8) in every block; every other cell is noise around the control."""
    rng = random.Random(f"{task}/{cell}/{repeat}")
    turns = 4 + TASKS5.index(task) + rng.randint(0, 3)
    if cell == "C5":
        turns += (10, 11, 11, 12, 10)[(repeat + TASKS5.index(task)) % 5]
    return Outcome(pitfall=rng.random() < 0.2, turns=turns, tool_calls=rng.randint(1, 4), cost=0.01)


@pytest.fixture(scope="module")
def turns_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("turns") / "run"
    return make_run(root, cells=CELLS12, tasks=TASKS5, repeats=3, outcome=_every_block_turns, layers=LAYERS12)


def test_an_every_block_turns_effect_is_real_with_12_cells_and_5_tasks(turns_run: Path) -> None:
    report = build_report(turns_run)
    fams = {f.name: f for f in report.families}
    assert (fams["primary"].m, fams["secondary"].m) == (11, 11 * (3 + 4 * 5))
    [c] = [x for x in report.comparisons if (x.cell, x.task, x.metric) == ("C5", None, "turns")]
    assert c.family == "secondary" and c.n_pairs == 15
    # 15 blocks all one way: the exact sign-flip p is 2 / 2^15, below Holm's first threshold 0.05 / 253
    assert c.p == pytest.approx(2 / 2**15)
    assert c.p_adjusted is not None and c.p_adjusted <= 0.05 and c.real and c.verdict == "helps"
    assert c.ci_low is not None and c.ci_high is not None and c.ci_low > 9 and c.ci_high < 13
    top = report.ranking[0]
    assert (top.cell, top.verdict, top.evidence) == ("C5", "helps", "secondary")
    assert top.real_on == ["turns: pooled helps"] or top.real_on[0].startswith("turns: pooled helps")
    # the power rows describe the test used: 15 blocks at alpha/m of the secondary family
    row = next(p for p in report.power if (p.metric, p.cell) == ("turns", "C5"))
    assert row.blocks_per_cell == 15 and row.alpha_each == pytest.approx(0.05 / 253)
    assert row.detectable is not None and row.sd_diff is not None
    _no_zero_width_interval_beside_a_large_p(report)


def test_turns_as_the_primary_metric_makes_it_the_primary_family(turns_run: Path) -> None:
    report = build_report(turns_run, primary="turns")
    assert report.primary_metric == "turns"
    [c] = [x for x in report.comparisons if x.family == "primary" and x.cell == "C5"]
    assert (c.metric, c.task, c.real) == ("turns", None, True)
    assert report.ranking[0].cell == "C5" and report.ranking[0].evidence == "primary"
    assert all(x.family == "primary" for x in report.comparisons if x.task is None and x.metric == "turns")


def _tool_calls_only(task: str, cell: str, repeat: int) -> Outcome:
    """C1's layer saves 3 tool calls in every block, C2's layer costs 2; C3 is the control's twin."""
    rng = random.Random(f"{task}/{repeat}")  # the same for every cell: only tool calls differ
    calls = 3 + rng.randint(0, 4)
    calls += {"C1": 3, "C2": -2}.get(cell, 0)
    return Outcome(pitfall=rng.random() < 0.3, turns=2 + rng.randint(0, 5), tool_calls=calls, cost=0.02)


def test_a_tool_calls_only_layer_is_ranked_and_labelled_by_its_direction(tmp_path: Path) -> None:
    cells = {"C0": [], "C1": ["axioms"], "C2": ["decisions"], "C3": ["user-claude-md"]}
    run = make_run(tmp_path / "run", cells=cells, tasks=["a", "b", "c"], repeats=6, outcome=_tool_calls_only)
    report = build_report(run)
    by = {e.cell: e for e in report.ranking}
    assert (by["C1"].verdict, by["C1"].evidence, by["C1"].rank) == ("helps", "secondary", 1)
    assert (by["C3"].verdict, by["C3"].rank) == ("draw", 2)
    # stripping C2's layer lowers tool calls: the layer costs them, so it hurts and ranks below the draws
    assert (by["C2"].verdict, by["C2"].evidence, by["C2"].rank) == ("hurts", "secondary", 3)
    assert by["C1"].real_metrics == ["tool_calls"] and by["C2"].real_metrics == ["tool_calls"]
    assert [r.cell for r in report.regressions if r.task is None] == ["C2"]
    assert all(r.real and r.verdict == "hurts" for r in report.regressions)


def _one_task(task: str, cell: str, repeat: int) -> Outcome:
    """Stripping C1's layer ruins t0 (12 of 12 blocks lost); elsewhere it gains 13 blocks by chance-sized
    margins, so the pooled Δ is slightly positive and not real; C2 is the control's twin."""
    if cell != "C1":
        ok = task == "t0" or repeat < 6
    elif task == "t0":
        ok = False
    else:
        ok = repeat < (10 if task == "t1" else 9)
    return Outcome(pitfall=not ok)


def test_a_layer_that_only_matters_on_one_task_is_labelled_by_that_task(tmp_path: Path) -> None:
    cells = {"C0": [], "C1": ["axioms"], "C2": ["decisions"]}
    run = make_run(tmp_path / "run", cells=cells, tasks=TASKS5, repeats=12, outcome=_one_task)
    report = build_report(run)
    pf = {x.task: x for x in report.comparisons if x.cell == "C1" and x.metric == "pitfall_free"}
    assert pf[None].delta == pytest.approx(1 / 60) and not pf[None].real
    assert pf["t0"].real and pf["t0"].verdict == "helps" and pf["t0"].p == pytest.approx(2 / 2**12)
    e = next(e for e in report.ranking if e.cell == "C1")
    # the sign comes from the real per-task comparison, not from the pooled Δ (which points the other way)
    assert (e.verdict, e.evidence, e.rank) == ("helps", "secondary", 1)
    assert e.real_on == ["pitfall_free: t0 helps"]
    assert report.regressions == [] and report.regressions_not_real == 4
    md = (write_report(run, formats=["md"]).paths["md"]).read_text()
    assert "None real: no stripped layer made a result really better." in md
    assert "4 per-task change(s) in that direction are not real" in md


def test_no_zero_width_interval_beside_a_large_p(tmp_path: Path) -> None:
    def same_gap(task: str, cell: str, repeat: int) -> Outcome:
        return Outcome(cost=0.02 if cell == "C1" else 0.01, turns=3 + repeat)

    cells = {"C0": [], "C1": ["axioms"]}
    two = build_report(make_run(tmp_path / "two", cells=cells, tasks=["a"], repeats=2, outcome=same_gap))
    [cost] = [x for x in two.comparisons if x.metric == "cost_usd"]
    assert cost.p == pytest.approx(0.5) and (cost.ci_low, cost.ci_high) == (None, None)
    assert cost.not_computable is not None and "at least 6" in cost.not_computable
    eight = build_report(make_run(tmp_path / "eight", cells=cells, tasks=["a"], repeats=8, outcome=same_gap))
    [cost] = [x for x in eight.comparisons if x.metric == "cost_usd"]
    assert cost.p == pytest.approx(2 / 2**8) and cost.ci_low is None
    assert cost.not_computable is not None and "same difference" in cost.not_computable
    for report in (two, eight):
        _no_zero_width_interval_beside_a_large_p(report)


def test_the_plot_draws_a_missing_interval_as_a_marked_cross(tmp_path: Path) -> None:
    def gap(task: str, cell: str, repeat: int) -> Outcome:
        return Outcome(cost=0.02 if cell == "C1" else 0.01, turns=3 + (cell == "C1"))

    run = make_run(tmp_path / "run", cells={"C0": [], "C1": ["axioms"]}, tasks=["a"], repeats=3, outcome=gap)
    written = write_report(run, formats=["md"])
    svg = written.paths["svg"].read_text()
    assert "no interval" in svg and "interval not computable" in svg


def test_overfitting_on_dev_tasks_is_checked_by_the_report(tmp_path: Path) -> None:
    tasks = ["d1", "d2", "d3", "h1", "h2", "h3"]

    def dev_only(task: str, cell: str, repeat: int) -> Outcome:
        dev = task.startswith("d")
        ok = dev if cell == "C1" else not dev
        return Outcome(pitfall=not ok)

    run = make_run(
        tmp_path / "run",
        cells={"C0": [], "C1": ["axioms"]},
        tasks=tasks,
        repeats=3,
        outcome=dev_only,
        splits={t: "dev" if t.startswith("d") else "holdout" for t in tasks},
    )
    report = build_report(run)
    [f] = report.holdout
    assert (f.cell, f.kind, f.n_dev_tasks, f.n_holdout_tasks) == ("C1", "overfitting", 3, 3)
    assert f.p == pytest.approx(1 / 20)
    caveat = next(c for c in report.caveats if c.id == "overfitting")
    assert "WARNING overfitting? C1 pitfall_free" in caveat.text


def test_the_backend_is_named_in_words_in_every_format(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "run", cells={"C0": [], "C1": ["axioms"]}, tasks=["a", "b"], repeats=2, outcome=_one_task
    )
    folder = RunFolder(run)
    manifest = read_manifest(folder)
    manifest.isolation = IsolationInfo(backend="namespace", reason="unprivileged user namespaces work here")
    write_manifest(folder, manifest)
    written = write_report(run)
    for fmt in ("md", "html"):
        text = written.paths[fmt].read_text()
        assert "namespace — unprivileged user namespaces work here" in text
        assert "{'backend'" not in text and "&#x27;backend&#x27;" not in text and "{&#39;" not in text
    data = orjson.loads(written.paths["json"].read_bytes())
    assert data["run"]["isolation"] == "namespace — unprivileged user namespaces work here"


def test_cli_report_primary_option(turns_run: Path) -> None:
    res = invoke(["report", str(turns_run), "--primary", "turns", "--json", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = orjson.loads(res.stdout)["report"]
    assert data["primary_metric"] == "turns"
    assert [f["name"] for f in data["families"]] == ["primary", "secondary"]
    assert data["ranking"][0]["cell"] == "C5" and data["ranking"][0]["evidence"] == "primary"

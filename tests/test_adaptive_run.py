"""The adaptive round driver against a planted executor: rounds, stopping, the control, state, resume.

The executor is the driver's whole interface to sessions (``RunItems``): it gets plan items and writes one
result per item, here with outcomes drawn from planted per-cell pitfall-free rates.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest

from ablate.core.claude import ClaudeBinary
from ablate.core.errors import UsageError
from ablate.folder.adaptive import AdaptiveOptions, read_state
from ablate.folder.layout import PlanItem, RunFolder, RunManifest
from ablate.folder.result import ItemResult, iter_results, write_result
from ablate.run.adaptive import run_adaptive
from ablate.run.create import create_run
from ablate.setup.cells import load_cell_set
from ablate.setup.layers import load_catalog
from tests.helpers_cli import invoke
from tests.run_folder import pitfall_tasks


def _planned(
    tmp: Path, tasks: int = 4, repeats: int = 30, cells: int | None = None
) -> tuple[RunFolder, RunManifest]:
    """A run of the layered cells (the first ``cells`` of them: the control and the next ones)."""
    loaded = pitfall_tasks(tmp / "tasks", tasks)
    cs = load_cell_set("layered", load_catalog())
    exe = tmp / "claude"
    exe.write_text("")
    return create_run(
        tmp / "runs",
        tasks=loaded,
        cell_set=cs.name,
        cells=list(cs.cells)[:cells],
        repeats=repeats,
        seed=3,
        model="claude-sonnet-4-6",
        max_turns=5,
        claude=ClaudeBinary(path=exe, version="2.1.332", sha256="0" * 64),
    )


class Planted:
    """Writes a result for every item it is given; pitfall-free with the cell's planted rate."""

    def __init__(
        self, folder: RunFolder, rates: dict[str, float], seed: int = 0, stop_after: int | None = None
    ):
        self.folder, self.rates, self.rng = folder, rates, random.Random(seed)
        self.calls: list[list[str]] = []
        self.stop_after = stop_after  # items, then "interrupted" (a kill mid-round)

    def __call__(self, items: Sequence[PlanItem]) -> str:
        self.calls.append([i.item for i in items])
        for n, it in enumerate(items):
            if self.stop_after is not None and n >= self.stop_after:
                self.stop_after = None
                return "interrupted"
            free = self.rng.random() < self.rates[it.cell]
            write_result(
                self.folder,
                ItemResult(
                    item=it.item, task=it.task, cell=it.cell, repeat=it.repeat, order=it.order, attempt=1,
                    session_id=f"s-{it.item}", status="completed", cost_usd=0.01,
                    pitfall_hits={} if free else {"p": 1}, turns=self.rng.randint(1, 5),
                ),
            )  # fmt: skip
        return "finished"


OPTS = AdaptiveOptions(max_repeats=30, min_effect=0.25, alpha=0.05)


def _rates(manifest: RunManifest, planted: dict[str, float], base: float = 0.3) -> dict[str, float]:
    return {c.id: planted.get(c.id, base) for c in manifest.cells}


def test_a_strong_layer_is_real_early_and_the_control_runs_while_any_cell_needs_it(tmp_path: Path) -> None:
    folder, manifest = _planned(tmp_path)
    control = next(c.id for c in manifest.cells if not c.stripped)
    strong = next(c.id for c in manifest.cells if c.id != control)
    executor = Planted(folder, _rates(manifest, {strong: 0.95}))
    summary = run_adaptive(folder, manifest, executor, OPTS)
    state = read_state(folder)
    assert state is not None and state.stopped == summary.state.stopped
    decisions = state.decisions()
    assert decisions[strong].decision == "real"
    assert all(v.decision != "real" for c, v in decisions.items() if c != strong)
    turns = decisions[strong]  # the secondary outcome, turns: drawn alike for every cell
    assert (
        turns.turns_blocks == turns.blocks
        and turns.turns_cs_low is not None
        and turns.turns_cs_high is not None
    )
    assert turns.turns_cs_low <= 0 <= turns.turns_cs_high and turns.turns_cs_high - turns.turns_cs_low < 5
    plan = folder.read_plan()
    ids = [p.item for p in plan]
    assert len(ids) == len(set(ids))  # no item scheduled twice
    runs = Counter(p.cell for p in plan)
    assert runs[strong] < runs[control]  # the strong cell stopped; the control kept going
    assert runs[control] == max(runs.values())
    # the looks record the round, the sessions so far and each cell's statistic
    assert [lk.round for lk in state.looks] == list(range(1, len(state.looks) + 1))
    assert state.looks[-1].sessions == len(iter_results(folder))
    for round_ in {p.repeat for p in plan}:  # every block of a round has the control and the round's cells
        in_round = [p for p in plan if p.repeat == round_]
        per_task = Counter(p.task for p in in_round)
        assert len(set(per_task.values())) == 1 and sum(1 for p in in_round if p.cell == control) == 4


def test_all_null_claims_nothing_and_stops_at_max_repeats_or_a_draw(tmp_path: Path) -> None:
    folder, manifest = _planned(tmp_path, repeats=12)
    executor = Planted(folder, _rates(manifest, {}), seed=5)
    summary = run_adaptive(folder, manifest, executor, OPTS.model_copy(update={"max_repeats": 12}))
    decisions = summary.state.decisions()
    assert all(v.decision != "real" for v in decisions.values())
    assert summary.state.stopped in ("max-repeats", "decided")
    assert len(summary.state.looks) <= 12


def test_kill_mid_round_then_resume_continues_with_no_item_run_twice(tmp_path: Path) -> None:
    folder, manifest = _planned(tmp_path)
    rates = _rates(manifest, {manifest.cells[1].id: 0.95})
    killed = Planted(folder, rates, seed=1, stop_after=7)
    first = run_adaptive(folder, manifest, killed, OPTS)
    assert first.state.stopped == "interrupted" and not first.state.looks
    resumed = Planted(folder, rates, seed=2)
    second = run_adaptive(folder, manifest, resumed, None)  # a resume brings no options: the saved ones hold
    assert second.state.options == OPTS and second.finished
    ran = [i for call in killed.calls + resumed.calls for i in call]
    written = [i for call in killed.calls for i in call[:7]] + [i for call in resumed.calls for i in call]
    assert len(written) == len(set(written))  # no block run twice
    assert resumed.calls[0] == killed.calls[0][7:]  # the resume finishes the interrupted round first
    assert set(ran) == {p.item for p in folder.read_plan()}


def test_a_fixed_run_with_results_cannot_turn_adaptive(tmp_path: Path) -> None:
    folder, manifest = _planned(tmp_path, repeats=2)
    Planted(folder, _rates(manifest, {}))(folder.read_plan()[:3])
    with pytest.raises(UsageError, match="fixed run"):
        run_adaptive(folder, manifest, Planted(folder, {}), OPTS)
    with pytest.raises(UsageError, match="not an adaptive run"):
        run_adaptive(folder, manifest, Planted(folder, {}), None)


def test_the_report_says_how_the_run_stopped_and_a_complete_fixed_run_gets_no_such_section(
    tmp_path: Path,
) -> None:
    from ablate.report import write_report

    folder, manifest = _planned(tmp_path / "a", repeats=10, cells=4)  # the report's sections, not its size
    run_adaptive(folder, manifest, Planted(folder, _rates(manifest, {manifest.cells[2].id: 0.95})), OPTS)
    written = write_report(folder.root)
    data = orjson.loads(written.paths["json"].read_bytes())
    seq = data["sequential"]
    assert seq["mode"] == "adaptive" and seq["decisions"][manifest.cells[2].id]["decision"] == "real"
    assert [lk["round"] for lk in seq["looks"]] == list(range(1, len(seq["looks"]) + 1))
    assert any("The design was sequential" in c for c in seq["caveats"])
    md = written.paths["md"].read_text()
    assert "## How the run stopped" in md and "plots/sequence.png" in md
    assert (folder.root / "plots" / "sequence.svg").exists()

    fixed, fm = _planned(tmp_path / "f", repeats=2, cells=4)
    Planted(fixed, _rates(fm, {}))(fixed.read_plan())
    data = orjson.loads(write_report(fixed.root).paths["json"].read_bytes())
    assert "sequential" not in data
    assert "How the run stopped" not in (fixed.root / "report.md").read_text()


def test_a_fixed_run_read_early_gets_anytime_valid_figures(tmp_path: Path) -> None:
    from ablate.report import write_report

    fixed, fm = _planned(tmp_path, repeats=6)
    plan = fixed.read_plan()
    Planted(fixed, _rates(fm, {}))(plan[: len(plan) // 2])
    data = orjson.loads(write_report(fixed.root).paths["json"].read_bytes())
    assert data["sequential"]["mode"] == "peek"
    assert "## Anytime-valid figures so far" in (fixed.root / "report.md").read_text()


def test_the_budget_stops_the_run_between_rounds_with_cells_undecided(tmp_path: Path) -> None:
    folder, manifest = _planned(tmp_path, repeats=10)
    opts = OPTS.model_copy(update={"budget_usd": 0.5})  # 12 cells x 4 tasks x $0.01 = $0.48 a round
    summary = run_adaptive(folder, manifest, Planted(folder, _rates(manifest, {})), opts)
    assert summary.state.stopped == "budget"
    assert [lk.round for lk in summary.state.looks] == [1, 2]  # $0.48 after round 1, $0.96 after round 2
    assert summary.state.looks[-1].spend_usd == pytest.approx(0.96)
    assert all(v.decision == "undecided" for v in summary.state.decisions().values())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--repeats", "3"], "--repeats and --adaptive"),
        (["--plan", "somewhere"], "--adaptive schedules its own rounds"),
    ],
)
def test_adaptive_cli_refuses_options_that_fix_the_design(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], message: str
) -> None:

    from tests.runner_support import write_fake_claude

    monkeypatch.setenv("ABLATE_CLAUDE_BIN", str(write_fake_claude(tmp_path / "claude")))
    (tmp_path / "cfg").mkdir()
    res = invoke(
        ["run", "--adaptive", *extra, "--config-dir", str(tmp_path / "cfg"), "--repo", str(tmp_path)]
    )
    assert res.exit_code == 2, res.output
    assert message in res.stderr


def test_an_adaptive_report_marks_real_only_what_the_sequential_analysis_decided(tmp_path: Path) -> None:
    from ablate.report import write_report

    folder, manifest = _planned(tmp_path, repeats=10, cells=5)
    strong = manifest.cells[2].id
    run_adaptive(folder, manifest, Planted(folder, _rates(manifest, {strong: 0.95})), OPTS)
    state = read_state(folder)
    assert state is not None
    last = state.looks[-1].cells
    report = write_report(folder.root).report
    pooled = {c.cell: c for c in report.comparisons if c.task is None and c.metric == "pitfall_free"}
    # the pooled primary comparison is the anytime-valid test: its p, Holm p and interval are the look's
    assert pooled[strong].real and pooled[strong].verdict == "hurts"  # stripping it raised pitfall-free
    assert pooled[strong].p_adjusted == last[strong].p_holm and pooled[strong].ci_low == last[strong].cs_low
    assert pooled[strong].method.startswith("anytime-valid")
    for cell, c in pooled.items():
        assert c.real == (last[cell].decision == "real"), cell
    # nothing else is real, whatever its fixed-n p-value says (the stopping time depends on the data)
    others = [c for c in report.comparisons if not (c.task is None and c.metric == "pitfall_free")]
    assert others and not any(c.real for c in others)
    assert all("descriptive" in c.method for c in others)
    entry = next(e for e in report.ranking if e.cell == strong)
    assert entry.evidence == "primary" and entry.verdict == "hurts" and entry.rank == len(report.ranking)
    assert "sequential design" in report.families[0].rule
    caveat = next(c for c in report.caveats if c.id == "sequential")
    assert "descriptive here and marks nothing real" in caveat.text
    md = (folder.root / "report.md").read_text()
    assert "**real** (anytime)" in md and "descr." in md and "Holm-adjusted anytime-valid p" in md


def test_a_fixed_run_read_early_loses_the_fixed_n_real_marks_it_had_when_complete(tmp_path: Path) -> None:
    from ablate.report.sections import build_report
    from tests.report_support import Outcome, make_run

    def outcome(task: str, cell: str, repeat: int) -> Outcome:
        # C1 ruins t0 in half the repeats: per task the fixed-n test calls it real at 16 repeats
        return Outcome(pitfall=cell == "C1" and task == "t0" and repeat % 2 == 0)

    run = make_run(
        tmp_path / "run", cells={"C0": [], "C1": ["user-claude-md"]}, tasks=["t0", "t1"], repeats=16,
        outcome=outcome,
    )  # fmt: skip
    complete = build_report(run)
    assert complete.sequential is None
    assert any(c.real and c.task == "t0" for c in complete.comparisons)  # the fixed-n marks
    RunFolder(run).result_path("t1__C1__r15").unlink()  # one item not run yet: a peek
    peek = build_report(run)
    assert peek.sequential is not None and peek.sequential.mode == "peek"
    look = peek.sequential.looks[-1].cells["C1"]
    pooled = next(c for c in peek.comparisons if c.task is None and c.metric == "pitfall_free")
    assert pooled.p_adjusted == look.p_holm and pooled.real == (look.p_holm <= 0.05)
    assert not any(c.real for c in peek.comparisons if c is not pooled)
    assert any(c.id == "sequential" for c in peek.caveats)

"""Dev/holdout: planted scenarios give an overfitting warning, a reassuring line, or nothing."""

from __future__ import annotations

from pathlib import Path

from ablate.grade.checks import ChecksGrade
from ablate.grade.record import record_checks
from ablate.grade.splits import block_deltas, holdout_finding, holdout_findings
from tests.grade_support import Item, make_run


def test_a_dev_gain_that_reverses_significantly_on_holdout_is_an_overfitting_warning() -> None:
    f = holdout_finding("C3", "checks_passed", [1.0] * 8, [-1.0] * 6 + [0.0] * 2)
    assert f is not None and f.kind == "overfitting"
    assert f.p is not None and f.p < 0.001
    assert (f.dev_delta, f.holdout_delta) == (1.0, -0.75)
    assert f.message.startswith("WARNING overfitting? C3 checks_passed: +1.00 on dev, -0.75 on holdout")


def test_a_reversal_within_noise_gets_one_reassuring_line() -> None:
    f = holdout_finding("C3", "pitfall_free", [1.0, 0.0, 1.0, 0.0], [0.0, -1.0, 0.0, 0.0])
    assert f is not None and f.kind == "within-noise"
    assert f.p is not None and f.p >= 0.05
    assert "within noise" in f.message and "no evidence of overfitting" in f.message


def test_nothing_when_holdout_agrees_or_dev_gained_nothing() -> None:
    assert holdout_finding("C3", "m", [1.0, 1.0, 0.0], [1.0, 0.0, 0.0]) is None
    assert holdout_finding("C3", "m", [0.0, -1.0], [-1.0, -1.0]) is None
    assert holdout_finding("C3", "m", [], [-1.0]) is None


def test_lower_is_better_metrics_flip_the_direction() -> None:
    # turns: the cell needs 3 fewer turns on dev and 3 more on holdout, every block
    f = holdout_finding("C1", "turns", [-3.0] * 6, [3.0] * 6, higher_is_better=False)
    assert f is not None and f.kind == "overfitting"


def test_too_few_blocks_to_test_says_so() -> None:
    f = holdout_finding("C3", "m", [1.0], [-1.0])
    assert f is not None and (f.kind, f.p) == ("untested", None)


def test_block_deltas_and_findings_from_a_run_folder(tmp_path: Path) -> None:
    # planted: C2 passes its checks on every dev block where C0 fails, and fails on every holdout block
    items = []
    for task in ("dev-a", "dev-b", "hold-a", "hold-b"):
        for repeat in range(3):
            for cell in ("C0", "C2"):
                items.append(Item(task, cell, repeat, "answer"))
    folder = make_run(tmp_path / "run", items, splits={"hold-a": "holdout", "hold-b": "holdout"})
    for it in items:
        passed = (it.cell == "C2") == it.task.startswith("dev")
        record_checks(
            folder,
            f"{it.task}__{it.cell}__r{it.repeat:02d}",
            ChecksGrade(attempt=1, source="checkout", passed=passed, n_passed=int(passed), n_checks=1),
        )
    deltas = block_deltas(folder.root, "C2", metric="checks_passed")
    assert deltas == {"dev": [1.0] * 6, "holdout": [-1.0] * 6}
    [finding] = holdout_findings(folder.root, ["C0", "C2"], metric="checks_passed")
    assert (finding.cell, finding.kind) == ("C2", "overfitting")

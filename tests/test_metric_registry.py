"""The metric registry (ablate.folder.metrics): one declaration per metric, read by every consumer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ablate.ci import verdicts
from ablate.core.errors import UsageError
from ablate.folder import metrics as reg
from ablate.folder.result import ItemResult
from ablate.folder.session import SessionMetrics, ThreadSummary
from ablate.report import context, model
from ablate.report.context import primary_metric

ROOT = Path(__file__).resolve().parent.parent / "ablate"

#: The ``--primary`` spellings before the registry (ablate 8421e0e): the registry must keep every one (a new
#: metric adds its own).
PRIMARY_NAMES_BEFORE = {
    "pitfall-free": "pitfall_free",
    "pitfall_free": "pitfall_free",
    "checks": "checks_passed",
    "checks_passed": "checks_passed",
    "score": "checks_score",
    "grader-score": "checks_score",
    "checks_score": "checks_score",
    "judge": "judge_pass",
    "judge_pass": "judge_pass",
    "turns": "turns",
    "tool-calls": "tool_calls",
    "tool_calls": "tool_calls",
    "cost": "cost_usd",
    "cost_usd": "cost_usd",
}


def test_the_registry_declares_each_metric_once_with_its_properties() -> None:
    names = [m.name for m in reg.METRICS]
    assert len(names) == len(set(names))
    assert PRIMARY_NAMES_BEFORE.items() <= reg.PRIMARY_NAMES.items()
    before = {
        "pitfall_free",
        "turns",
        "tool_calls",
        "cost_usd",
        "checks_passed",
        "checks_score",
        "judge_pass",
    }
    assert reg.BINARY_METRICS & before == {"pitfall_free", "checks_passed", "judge_pass"}
    assert reg.HIGHER_IS_BETTER & before == {"pitfall_free", "checks_passed", "checks_score", "judge_pass"}
    assert context.BASE_METRICS[:4] == ("pitfall_free", "turns", "tool_calls", "cost_usd")  # report order
    assert context.GRADED_METRICS == ("checks_passed", "checks_score", "judge_pass")


def test_checks_score_reaches_every_consumer_from_its_one_entry() -> None:
    """checks_score was once added by hand to five lists; now each consumer reads its one registry entry."""
    score = reg.metric_named("checks_score")
    assert (score.label, score.unit, score.binary, score.higher_is_better, score.graded) == (
        "grader score",
        "score",
        False,
        True,
        True,
    )
    assert model.METRIC_LABELS["checks_score"] == "grader score"
    assert "checks_score" in model.HIGHER_IS_BETTER and "checks_score" not in model.BINARY_METRICS
    assert "checks_score" in verdicts.RATE_METRICS
    assert "checks_score" in context.GRADED_METRICS
    assert primary_metric("score") == primary_metric("grader-score") == "checks_score"
    assert score.fmt_value(0.625) == "0.62" and score.fmt_delta(-0.25) == "-0.25"


def test_an_unknown_metric_is_a_located_usage_error() -> None:
    with pytest.raises(UsageError, match="no_such_metric: not a metric"):
        reg.metric_named("no_such_metric")
    with pytest.raises(UsageError) as e:
        primary_metric("speed")
    assert e.value.hint is not None and e.value.hint.startswith("use pitfall-free, turns, tool-calls, cost, ")
    assert all(f" {m.primary_names[0] if m.primary_names else m.name}" in e.value.hint for m in reg.METRICS)


@pytest.mark.parametrize(
    ("name", "value", "delta", "shown_value", "shown_delta"),
    [
        ("pitfall_free", 0.25, -0.5, "25%", "-50 pts"),
        ("turns", 3.5, 1.25, "3.50", "+1.25"),
        ("cost_usd", 0.0123, -0.002, "$0.0123", "−$0.0020"),
        ("not_registered", 2.0, 1.0, "2.00", "+1.00"),
    ],
)
def test_values_and_changes_are_written_in_the_metric_unit(
    name: str, value: float, delta: float, shown_value: str, shown_delta: str
) -> None:
    assert reg.fmt_value(name, value) == shown_value
    assert reg.fmt_delta(name, delta) == shown_delta
    assert reg.fmt_value(name, None) == reg.fmt_delta(name, None) == "–"


def _result(**kw: object) -> ItemResult:
    base: dict[str, object] = dict(
        item="t__C0__r0",
        task="t",
        cell="C0",
        repeat=0,
        order=0,
        attempt=1,
        session_id="s",
        status="completed",
    )
    return ItemResult.model_validate(base | kw)


def test_mined_metrics_are_read_from_the_result_and_missing_ones_stay_missing() -> None:
    session = SessionMetrics(transcript="t.jsonl", status="completed", total=ThreadSummary(tool_calls=4))
    full = _result(turns=6, cost_usd=0.02, pitfall_hits={"p": 1}, session=session)
    mined = ("pitfall_free", "turns", "tool_calls", "cost_usd")
    values = {n: v(full) for n in mined if (v := reg.metric_named(n).value) is not None}
    assert values == {"pitfall_free": 0.0, "turns": 6.0, "tool_calls": 4.0, "cost_usd": 0.02}
    bare = _result(pitfall_hits={"p": 0})
    values = {n: v(bare) for n in mined if (v := reg.metric_named(n).value) is not None}
    assert values == {"pitfall_free": 1.0, "turns": None, "tool_calls": None, "cost_usd": None}
    assert all(m.value is None for m in reg.METRICS if m.graded)


def _metric_literals(path: Path, names: set[str]) -> list[list[str]]:
    """Set literals naming two or more metrics, dict literals keyed by three or more (a direction, a kind, a
    label table): the hand-written lists a new metric used to be added to."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        elts, least = (node.elts, 2) if isinstance(node, ast.Set) else (getattr(node, "keys", []), 3)
        strs = {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if isinstance(node, ast.Set | ast.Dict) and len(strs & names) >= least:
            out.append(sorted(strs & names))
    return out


def test_no_module_lists_the_metrics_again_outside_the_registry() -> None:
    names = {m.name for m in reg.METRICS}
    offenders = [
        f"{path.relative_to(ROOT)}: {found}"
        for path in ROOT.rglob("*.py")
        if path != ROOT / "folder" / "metrics.py"
        for found in _metric_literals(path, names)
    ]
    assert offenders == []


def test_the_literal_finder_finds_a_planted_direction_set(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text(
        'HIB = frozenset({"pitfall_free", "judge_pass"})\nL = {"turns": "t", "cost_usd": "c"}\n'
    )
    assert _metric_literals(planted, {m.name for m in reg.METRICS}) == [["judge_pass", "pitfall_free"]]

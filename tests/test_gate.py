"""`ablate gate`: planted regressions fail, planted improvements and nulls pass, rules and bad input."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ablate.ci.gate import decide
from ablate.ci.rules import parse_effect, parse_rule
from ablate.ci.summary import forest_text
from ablate.ci.verdicts import load_evidence
from ablate.compare.model import CompareReport
from ablate.core.errors import UsageError
from ablate.report import write_report
from tests.helpers_cli import invoke
from tests.report_support import Outcome, make_run
from tests.run_folder import edit_manifest

CELLS = {"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"]}
#: The fixtures are small runs; a pass needs the change they can detect stated (the default, 20pts, is
#: inconclusive for them: test_a_run_too_small_to_see_the_threshold_is_inconclusive).
SMALL = ["--detect", "60pts"]
TASKS = ["greet", "deploy"]


def _run(root: Path, c1_pitfall: bool | None, *, repeats: int = 8, **kw: object) -> Path:
    """C1 strips CLAUDE.md: ``c1_pitfall`` True plants "the layer helps" (stripping it causes the pitfall
    every time), False plants "the layer hurts" (the control hits it, C1 never), None a null."""

    def outcome(task: str, cell: str, repeat: int) -> Outcome:
        if c1_pitfall is None:
            return Outcome(pitfall=repeat % 2 == 0)  # the same in every cell: no effect
        if c1_pitfall:
            return Outcome(pitfall=cell == "C1")
        return Outcome(pitfall=cell != "C1")

    run = make_run(root, cells=CELLS, tasks=TASKS, repeats=repeats, outcome=outcome, **kw)  # type: ignore[arg-type]
    write_report(run, formats=["json"])
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("gate")
    return {
        "regression": _run(base / "regression", False),
        "improvement": _run(base / "improvement", True),
        "null": _run(base / "null", None, repeats=30),
    }


def test_a_planted_regression_fails_and_the_summary_says_so(runs: dict[str, Path], tmp_path: Path) -> None:
    summary = tmp_path / "gate.md"
    code, out = invoke(["gate", str(runs["regression"]), "--summary", str(summary)]).shown
    assert code == 1, out
    assert out.startswith("FAIL — regressed: C1")
    md = summary.read_text()
    assert "ablate gate: FAIL — regressed" in md
    assert "| C1 |" in md and "hurts" in md
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len({line.count(" | ") for line in table if "---" not in line}) == 1  # one column count
    assert table[1].count("---") == table[0].count(" | ") + 1
    assert "```text" in md and "●" in md  # the text forest plot
    assert "data:" not in md and "<svg" not in md and "http" not in md


def test_a_planted_improvement_passes_as_better(runs: dict[str, Path], tmp_path: Path) -> None:
    summary = tmp_path / "gate.md"
    code, out = invoke(
        ["gate", str(runs["improvement"]), "--summary", str(summary), "--require", "C1 helps", *SMALL]
    ).shown
    assert code == 0, out
    assert out.startswith("PASS — better: C1")
    md = summary.read_text()
    assert "ablate gate: PASS — better" in md and "`C1 helps`" in md
    invoke(
        ["gate", str(runs["improvement"]), "--summary", str(summary), *SMALL]
    )  # a step summary collects every step
    assert summary.read_text().count("## ✅ ablate gate") == 2
    code, out = invoke(
        ["gate", str(runs["improvement"]), "--summary", str(tmp_path / "no" / "such" / "gate.md")]
    ).shown
    assert code == 2 and "cannot write" in out


def test_a_null_passes_as_no_real_difference_with_the_detectable_effect(runs: dict[str, Path]) -> None:
    code, out = invoke(["gate", str(runs["null"]), "--json", "--detect", "30pts"]).shown
    assert code == 0, out
    data = orjson.loads(out)
    assert data["outcome"] == "no real difference" and data["passed"]
    assert data["detectable"] is not None and 0 < data["detectable"] <= 1
    assert "detects a pooled change of pitfall_free of about" in data["headline"]
    assert "in either direction" in data["headline"] and "exact discordant-block test" in data["headline"]
    assert {f["verdict"] for f in data["findings"]} == {"draw"}


def test_a_required_gain_that_is_not_there_fails(runs: dict[str, Path]) -> None:
    code, out = invoke(["gate", str(runs["null"]), "--require", "C1 helps"]).shown
    assert code == 1 and "rule 'C1 helps' failed" in out
    code, out = invoke(["gate", str(runs["improvement"]), "--require", "C1 helps by 150pts"]).shown
    assert code == 1 and "below the required" in out
    code, out = invoke(
        ["gate", str(runs["improvement"]), "--require", "any helps", "--min-effect", "50%", *SMALL]
    ).shown
    assert code == 0, out
    code, out = invoke(["gate", str(runs["improvement"]), "--require", "all helps"]).shown
    assert code == 1  # C2 is a draw


def test_too_many_excluded_items_make_the_run_untrustworthy(tmp_path: Path) -> None:
    def outcome(task: str, cell: str, repeat: int) -> Outcome:
        return Outcome(status="api_error" if repeat < 4 else "completed")

    run = make_run(tmp_path / "run", cells=CELLS, tasks=TASKS, repeats=12, outcome=outcome)
    write_report(run, formats=["json"])
    code, out = invoke(["gate", str(run)]).shown
    assert code == 1 and "not trustworthy" in out and "excluded" in out
    code, out = invoke(["gate", str(run), "--max-excluded", "0.5", "--detect", "off"]).shown
    assert code == 0, out


def test_an_unfaithful_recorded_probe_fails(runs: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(runs["null"], run)
    probe = {"ok": False, "cells": [{"id": "C1", "verdict": "leak"}, {"id": "C0", "verdict": "faithful"}]}
    (run / "probe.json").write_bytes(orjson.dumps(probe))
    write_report(run, formats=["json"])
    code, out = invoke(["gate", str(run)]).shown
    assert code == 1 and "probe is not faithful (C1: leak)" in out


def _compare_report(delta: float, real: bool, better: bool) -> CompareReport:
    """A complete compare.json of two arms, ``new`` against the baseline ``old`` over 2 tasks × 10 repeats, its
    pooled pitfall-free contrast ``delta`` (real or not) and compare's own verdict ``better``."""
    arm = {"source": "CLAUDE.md", "source_sha256": "0" * 64, "op": "original", "bytes": 10}
    rates = {"n": 20, "passed": 10, "rate": 0.5}
    contrast = {"metric": "pitfall_free", "n": 20, "improved": 8, "regressed": 0, "p": 0.001}
    return CompareReport.model_validate(
        {
            "compare_id": "c1",
            "ablate_version": "0",
            "started_at": "2026-01-01T00:00:00+00:00",
            "finished_at": "2026-01-01T01:00:00+00:00",
            "executor": "claude-code",
            "model": "claude-haiku-4-5",
            "tier": "smoke",
            "repeats": 10,
            "seed": 1,
            "tasks": [{"id": t, "split": "dev", "sha256": "0" * 64} for t in ("t1", "t2")],
            "task_set_sha256": "0" * 64,
            "arms": [{**arm, "name": n, "fingerprint": n, "spec": n} for n in ("old", "new")],
            "baseline": "old",
            "items": 40,
            "estimate": {"sessions": 40, "calls": 400, "usd": 4.0, "basis": "assumed"},
            "spent_usd": 4.0,
            "arm_rates": [{**rates, "arm": "old"}, {**rates, "arm": "new"}],
            "contrasts": [
                {
                    **contrast,
                    "a": "old",
                    "b": "new",
                    "delta": delta,
                    "ci_low": delta - 0.1,
                    "ci_high": delta + 0.1,
                    "p_adjusted": 0.002 if real else 0.6,
                    "real": real,
                }
            ],
            "verdicts": [
                {
                    "arm": "new",
                    "baseline": "old",
                    "better": better,
                    "failed": [] if better else ["significant gain"],
                    "line": "new: better" if better else "new: not better",
                }
            ],
            "claims": {"can": [], "cannot": ["speak for tasks beyond these"]},
            "looks": {"statement": "first look"},
        }
    )


def _compare_json(path: Path, delta: float, real: bool, better: bool) -> Path:
    path.write_bytes(orjson.dumps(_compare_report(delta, real, better).to_json()))
    return path


def test_compare_json_gates_on_the_new_arm(tmp_path: Path) -> None:
    worse = _compare_json(tmp_path / "worse.json", -0.4, True, False)
    better = _compare_json(tmp_path / "better.json", 0.4, True, True)
    null = _compare_json(tmp_path / "null.json", 0.05, False, False)
    assert invoke(["gate", str(worse)]).shown[0] == 1
    assert invoke(["gate", str(better), "--require", "new better", "--detect", "off"]).shown[0] == 0
    assert invoke(["gate", str(better), "--min-effect", "0.5"]).shown[0] == 1  # 40 points < 50
    code, out = invoke(["gate", str(null), "--detect", "off"]).shown
    assert code == 0 and "no real difference" in out
    code, out = invoke(["gate", str(null)]).shown  # 20 blocks cannot see a change of 20 points
    assert code == 4 and out.startswith("INCONCLUSIVE") and "new (detects" in out
    assert invoke(["gate", str(null), "--require", "new better"]).shown[0] == 1


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("C1", "expected a subject and a claim"),
        ("C1 hepls", "unknown claim 'hepls'"),
        ("C1 not good", "expected 'worse' or 'hurts' after 'not'"),
        ("C1 helps by lots", "'lots' is not an effect"),
        ("C1 helps at 5", "unexpected 'at'"),
        ("C1 not worse by 5", "'by' goes with helps/better"),
    ],
)
def test_bad_rules_are_located_usage_errors(runs: dict[str, Path], rule: str, message: str) -> None:
    code, out = invoke(["gate", str(runs["null"]), "--require", rule]).shown
    assert code == 2 and message in out and "^" in out


def test_bad_input_exits_2(runs: dict[str, Path], tmp_path: Path) -> None:
    code, out = invoke(["gate", str(runs["null"]), "--require", "C9 helps"]).shown
    assert code == 2 and "no cell 'C9'" in out and "C1, C2" in out
    assert invoke(["gate", str(tmp_path / "missing")]).shown[0] == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, out = invoke(["gate", str(bad)]).shown
    assert code == 2 and "not valid JSON" in out
    (tmp_path / "other.json").write_text('{"x": 1}')
    assert invoke(["gate", str(tmp_path / "other.json")]).shown[0] == 2
    broken = tmp_path / "report.json"
    broken.write_text('{"schema_version": 1, "comparisons": [], "alpha": "x"}')
    code, out = invoke(["gate", str(broken)]).shown
    assert code == 2 and "report.json: alpha" in out
    assert invoke(["gate", str(runs["null"]), "--min-effect", "ten"]).shown[0] == 2
    assert (
        invoke(["gate", str(runs["null"]), "--min-effect", "0.1"]).shown[0] == 2
    )  # names no subject for a run


def test_rule_grammar_and_effects() -> None:
    assert parse_effect("10pts", "x") == pytest.approx(0.1)
    assert parse_effect("10%", "x") == pytest.approx(0.1)
    assert parse_effect("0.25", "x") == 0.25
    r = parse_rule("New Better by 5pts")
    assert (r.subject, r.claim) == ("New", "better") and r.min_effect == pytest.approx(0.05)
    assert parse_rule("all not hurts").claim == "not-worse"
    assert parse_rule("C1 helps", 0.2).min_effect == 0.2
    with pytest.raises(UsageError):
        parse_effect("-1", "x")


def test_the_text_forest_plot_never_draws_a_missing_interval_as_a_point(runs: dict[str, Path]) -> None:
    ev = load_evidence(runs["improvement"])
    rows = forest_text(ev)
    c1 = next(r for r in rows if r.startswith("C1"))
    assert "├" in c1 and "●" in c1 and "─" in c1
    one = make_run(
        runs["null"].parent / "one", cells=CELLS, tasks=["greet"], repeats=1, outcome=lambda *_: Outcome()
    )
    ev1 = load_evidence(one)  # no report.json: built in memory
    assert all("●" not in r for r in forest_text(ev1) if "not computable" in r)
    result = decide(ev1, [])  # one block: it sees nothing, and says so
    assert not result.passed and result.outcome == "inconclusive"
    assert "too few blocks to state what it detects" in result.headline
    assert decide(ev1, [], detect=None).outcome == "no real difference"


def test_real_compare_json_from_the_sim_executor(tmp_path: Path) -> None:
    """compare.json as `ablate compare` writes it: the planted layout effect (repetition helps) passes as
    better; the same pair the other way round (the better file as baseline) fails as a regression."""
    from tests.test_compare import CLAUDE_MD, write_tasks

    md = tmp_path / "CLAUDE.md"
    md.write_text(CLAUDE_MD)
    tasks = write_tasks(tmp_path)
    verdicts = {}
    for name, arms in (("up", [f"plain={md}", f"twice={md}@duplicate:Tools"]),
                       ("down", [f"twice={md}@duplicate:Tools", f"plain={md}"])):  # fmt: skip
        out = tmp_path / name
        args = ["compare", *arms, "--tasks", str(tasks), "--executor", "sim", "--tier", "rigorous"]
        res = invoke([*args, "--seed", "3", "--out", str(out)])
        assert res.exit_code == 0, res.output
        (folder,) = [p for p in out.iterdir() if p.is_dir()]
        verdicts[name] = invoke(["gate", str(folder), "--json"]).shown
    code, text = verdicts["up"]
    assert code == 0 and orjson.loads(text)["outcome"] == "better", text
    code, text = verdicts["down"]
    assert code == 1 and orjson.loads(text)["outcome"] == "regressed", text


def test_a_real_gain_compare_does_not_confirm_passes_but_says_so(tmp_path: Path) -> None:
    path = _compare_json(tmp_path / "c.json", 0.4, True, False)
    code, out = invoke(["gate", str(path)]).shown
    assert code == 0 and "not confirmed by compare's verdict (new: failed significant gain)" in out
    assert invoke(["gate", str(path), "--require", "new better"]).shown[0] == 1


def test_leaks_and_an_unverified_model_make_the_run_untrustworthy(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    run = tmp_path / "leaky"
    shutil.copytree(runs["null"], run)
    edit_manifest(
        run,
        lambda m: m["cells"][1].update(leaks=["managed settings: /etc/claude-code/managed-settings.json"]),
    )
    code, out = invoke(["gate", str(run)]).shown
    assert code == 1 and "1 leak(s) the builder could not remove (C1: managed settings" in out

    def outcome(task: str, cell: str, repeat: int) -> Outcome:
        return Outcome(model="claude-haiku-4-5" if repeat == 0 else "claude-sonnet-4-6")

    other = make_run(tmp_path / "model", cells=CELLS, tasks=TASKS, repeats=8, outcome=outcome)
    code, out = invoke(["gate", str(other)]).shown
    assert code == 1 and "the model is not verified" in out and "claude-haiku-4-5" in out


def test_an_unsealed_run_passes_only_with_allow_unsealed(runs: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "unsealed"
    shutil.copytree(runs["null"], run)
    edit_manifest(run, lambda m: m.update(isolation={"backend": "links", "network": "unsealed"}))
    write_report(run, formats=["json"])
    code, out = invoke(["gate", str(run), "--detect", "off"]).shown
    assert code == 1, out
    assert out.startswith("FAIL — not trustworthy: the sessions were not sealed (--unsealed")
    assert "pass --allow-unsealed to accept that" in out
    code, out = invoke(["gate", str(run), "--detect", "off", "--allow-unsealed"]).shown
    assert code == 0 and out.startswith("PASS — no real difference"), out
    assert "note: the sessions were not sealed (--unsealed: the host's network and sockets), accepted" in out
    # the same run sealed (the control of this test): it passes without the option
    assert invoke(["gate", str(runs["null"]), "--detect", "off"]).shown[0] == 0


def test_an_unsealed_compare_passes_only_with_allow_unsealed(tmp_path: Path) -> None:
    path = _compare_json(tmp_path / "better.json", 0.4, True, True)
    data = orjson.loads(path.read_bytes())
    path.write_bytes(orjson.dumps({**data, "execution": {"network": "unsealed"}}))
    args = ["gate", str(path), "--require", "new better", "--detect", "off"]
    code, out = invoke(args).shown
    assert code == 1 and "not trustworthy: the sessions were not sealed" in out, out
    assert invoke([*args, "--allow-unsealed"]).shown[0] == 0
    path.write_bytes(orjson.dumps({**data, "execution": {"network": "sealed"}}))
    assert invoke(args).shown[0] == 0


def test_a_compare_json_that_does_not_validate_is_a_located_error(tmp_path: Path) -> None:
    data = _compare_report(0.4, True, True).to_json()
    data["contrasts"][0]["delta"] = "big"
    del data["estimate"]
    path = tmp_path / "compare.json"
    path.write_bytes(orjson.dumps(data))
    code, out = invoke(["gate", str(path)]).shown
    assert code == 2, out
    assert f"{path}: contrasts.0.delta: Input should be a valid number" in out, out
    assert f"{path}: estimate: Field required" in out and "`ablate compare`" in out, out

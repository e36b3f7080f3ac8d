"""Issue 30: the report and the gate say only what the run's own analysis supports.

Constructed run folders (``tests.report_support.make_run``), no CLI sessions: the anytime-valid path is the
path in time; the report marks "real" at the run's own α; the gate rebuilds a stale report.json, states the
power of the test that decides in its weaker direction, fails a real regression of pitfall-free whatever the
report's --primary, and calls a run that cannot see the threshold change inconclusive (exit 4).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import get_args

import numpy as np
import orjson

from ablate.folder.adaptive import AdaptiveOptions, AdaptiveState, Look, write_state
from ablate.folder.layout import RunFolder, item_id, read_manifest
from ablate.folder.result import iter_results
from ablate.report import write_report
from ablate.report.sections import build_report
from ablate.stats.adaptive import analyse, paired_outcomes
from ablate.stats.power import detectable_binary, power_binary
from ablate.stats.sequential import anytime_p, detectable_anytime, discordant_path, power_anytime, prior_for
from tests.helpers_cli import invoke
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


def _one_sided(root: Path, losses: int, *, hurts: bool = False) -> Path:
    """C1 loses ``losses`` of 20 blocks to the control and gains none (``hurts``: gains them, so the layer
    it strips hurts); C2 is the control's twin."""

    def outcome(task: str, cell: str, repeat: int) -> Outcome:
        return Outcome(pitfall=repeat < losses and (cell == "C1") != (hurts and cell != "C2"))

    return make_run(
        root, cells={"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"]}, tasks=["t0"], repeats=20,
        outcome=outcome,
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


def test_the_gate_rebuilds_a_report_json_its_results_no_longer_match(tmp_path: Path) -> None:
    run = _one_sided(tmp_path / "run", losses=10, hurts=True)
    folder = RunFolder(run)
    held = {i: folder.result_path(item_id("t0", "C1", i)).read_bytes() for i in range(10)}
    for i in held:
        folder.result_path(item_id("t0", "C1", i)).unlink()
    write_report(run, formats=["json"])  # written at a peek: C1's losing blocks not run yet
    for i, data in held.items():
        folder.result_path(item_id("t0", "C1", i)).write_bytes(data)  # then the run completed
    code, out = invoke(["gate", str(run), "--detect", "off"]).shown
    assert code == 1 and out.startswith("FAIL — regressed: C1"), out  # the stale file said nothing real
    assert "is stale: the run folder changed" in out
    write_report(run, formats=["json"])
    code, out = invoke(["gate", str(run), "--detect", "off"]).shown
    assert code == 1 and "stale" not in out  # a current report is read as written
    data = orjson.loads((run / "report.json").read_bytes())
    del data["inputs_sha256"]
    (run / "report.json").write_bytes(orjson.dumps(data))
    assert "has no digest of its results" in invoke(["gate", str(run), "--detect", "off"]).shown[1]
    alone = tmp_path / "report.json"
    alone.write_bytes((run / "report.json").read_bytes())
    code, out = invoke(["gate", str(alone), "--detect", "off"]).shown
    assert "not verified against its results" in out


def test_detectable_effects_hold_in_the_weaker_direction() -> None:
    for n, base, alpha in ((60, 0.7, 0.025), (40, 0.5, 0.05), (120, 0.2, 0.01)):
        d = detectable_binary(n, base, alpha)
        assert isinstance(d, float)
        sides = [base + s * d for s in (1, -1) if 0 <= base + s * d <= 1]
        assert all(power_binary(n, base, p, alpha) >= 0.8 for p in sides), (n, base, d)
        smaller = [base + s * (d - 0.005) for s in (1, -1) if 0 <= base + s * (d - 0.005) <= 1]
        assert min(power_binary(n, base, p, alpha) for p in smaller) < 0.8
    # the anytime-valid test's power is exact: it agrees with a simulation of the very code a run uses
    a = prior_for(0.2)
    rng = np.random.default_rng(3)
    for base, cell in ((0.5, 0.8), (0.3, 0.6)):
        x, y = rng.random((4000, 40)) < cell, rng.random((4000, 40)) < base
        simulated = float((anytime_p(discordant_path(x, y, a))[:, -1] <= 0.05).mean())
        assert abs(simulated - float(power_anytime(40, base, [cell], 0.05, a)[0])) < 0.025
    d2 = detectable_anytime(80, 0.7, 0.025, a)
    fixed = detectable_binary(80, 0.7, 0.025)
    assert (
        d2 is not None and isinstance(fixed, float) and d2 > fixed
    )  # the sequential test pays for its looks
    assert all(p >= 0.8 for p in power_anytime(80, 0.7, [0.7 + d2, 0.7 - d2], 0.025, a) if 0 <= p <= 1)


def test_an_adaptive_reports_power_is_the_anytime_tests(tmp_path: Path) -> None:
    run = _one_sided(tmp_path / "run", losses=12)
    _adaptive(run, alpha=0.05)
    row = next(p for p in build_report(run).power if p.metric == "pitfall_free" and p.cell == "C2")
    assert row.test.startswith("anytime-valid e-process")
    assert row.detectable == detectable_anytime(20, 1.0, 0.025, prior_for(0.2))


def test_a_run_too_small_to_see_the_threshold_is_inconclusive(tmp_path: Path) -> None:
    # a +100-point regression in 4 blocks: exact p 0.125, nothing real — never "PASS — no real difference"
    run = make_run(
        tmp_path / "run", cells={"C0": [], "C1": ["user-claude-md"]}, tasks=["a", "b"], repeats=2,
        outcome=lambda task, cell, repeat: Outcome(pitfall=cell == "C0"),
    )  # fmt: skip
    code, out = invoke(["gate", str(run)]).shown
    assert code == 4 and out.startswith("INCONCLUSIVE — this run cannot detect a change of 20 pts"), out
    code, out = invoke(["gate", str(run), "--json"]).shown
    assert code == 4 and orjson.loads(out)["outcome"] == "inconclusive"
    assert invoke(["gate", str(run), "--detect", "off"]).shown[0] == 0


def test_a_real_pitfall_free_regression_fails_whatever_the_reports_primary(tmp_path: Path) -> None:
    run = _one_sided(tmp_path / "run", losses=15, hurts=True)
    _adaptive(run, alpha=0.05)
    write_report(run, formats=["json"], primary="turns")
    code, out = invoke(["gate", str(run), "--detect", "off"]).shown
    assert code == 1, out
    assert "regressed: C1: pitfall_free (the run's primary outcome)" in out


def test_the_ci_templates_fail_an_inconclusive_gate_unless_configured(tmp_path: Path) -> None:
    import os
    import subprocess

    from ablate.ci.github import GithubOptions, _gate_lines
    from ablate.ci.k8s import K8sOptions, merge_command

    fake = tmp_path / "bin" / "ablate"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 4\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}", "RUNNER_TEMP": str(tmp_path)}
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    script = _gate_lines("runs/x", GithubOptions())

    def step(**extra: str) -> int:
        return subprocess.run(["bash", "-c", script], env={**env, **extra}, capture_output=True).returncode

    assert step() == 4
    assert step(ABLATE_GATE_INCONCLUSIVE="") == 4  # the repository variable unset
    assert step(ABLATE_GATE_INCONCLUSIVE="pass") == 0
    assert "ABLATE_GATE_INCONCLUSIVE" in merge_command(
        K8sOptions()
    ) and "exec ablate gate" not in merge_command(K8sOptions())


def _state(looks: list[tuple[int, int, int]], *, decision: str = "undecided") -> AdaptiveState:
    """An adaptive state whose C1 had (blocks, gained, lost) at each look (the other figures neutral)."""
    from ablate.folder.adaptive import CellLook

    def cell(blocks: int, gained: int, lost: int) -> CellLook:
        return CellLook(
            blocks=blocks, gained=gained, lost=lost, delta=(gained - lost) / blocks, e_value=1.0,
            p_anytime=1.0, p_holm=1.0, cs_low=-1.0, cs_high=1.0, decision=decision, reason="-",
        )  # fmt: skip

    return AdaptiveState(
        options=AdaptiveOptions(max_repeats=20, min_effect=0.2, alpha=0.05),
        control="C0",
        looks=[
            Look(round=i + 1, at=_at(i), sessions=0, spend_usd=0.0, analysis_s=0.0, cells={"C1": cell(*lk)})
            for i, lk in enumerate(looks)
        ],
        stopped="max-repeats",
    )


def test_the_caveats_say_what_the_sequential_guarantees_are_and_check_for_drift() -> None:
    from ablate.report.sequential import _caveats
    from ablate.stats.sequential import betting_cs

    # a constant-effect assumption broken: 16 blocks of no effect, then 24 of +1 — the CS misses the mean
    _, high = betting_cs(np.array([0.0] * 16 + [1.0] * 24), -1.0, 1.0, 0.05)
    assert high[-1] < 0.6
    drifting = _state([(4 * r, max(0, 4 * r - 16), 0) for r in range(1, 11)])
    text = " ".join(_caveats(drifting, "adaptive"))
    assert "assume one effect throughout the run" in text
    assert "Drift check: C1's mean paired difference was +0.20 over its first 20 blocks and +1.00" in text
    steady = " ".join(_caveats(_state([(4 * r, r, r) for r in range(1, 11)]), "adaptive"))
    assert "no drift found" in steady
    # per cell, not jointly; Holm's multiplier can move a stopped cell; undecided is not a draw
    assert "per cell, not jointly" in steady and "a 'real' never reverts" in steady
    assert "Stopped at the max-repeats: C1 undecided" in steady


def test_compare_claims_state_the_draw_rule_it_uses() -> None:
    from ablate.compare.sequential import claims
    from ablate.report.sequential import _from_state

    seq = _from_state(_state([(4, 1, 1)]), mode="adaptive")
    can = " ".join(claims(seq)["can"])
    assert "futility e-processes" in can and "confidence sequence excludes" not in can
    assert "often ends undecided" in can


def test_min_effect_help_states_the_measured_figures() -> None:
    from ablate.cli.common import MinEffect
    from benchmarks.bench_min_effect import ends

    help_text = str(get_args(MinEffect)[1].help)
    assert "Δ 0 ends a draw 50% and undecided 50%" in help_text
    assert "Δ 0.1 a draw 25%, undecided 70%, real 5%" in help_text
    rng = np.random.default_rng(0)
    null, small = ends(0.0, 600, rng), ends(0.1, 600, rng)  # 2,400 cells each: s.e. about 0.01
    assert abs(null["draw"] - 0.50) < 0.05 and abs(null["undecided"] - 0.50) < 0.05
    assert abs(small["draw"] - 0.25) < 0.05 and abs(small["undecided"] - 0.70) < 0.05
    assert abs(small["real"] - 0.05) < 0.03


def test_an_undecided_cell_is_not_shown_as_a_draw(tmp_path: Path) -> None:
    run = _one_sided(tmp_path / "run", losses=12)
    _adaptive(run, alpha=0.01)  # C1 undecided (p 0.027), C2 decided nothing either
    written = write_report(run, formats=["md"])
    md = (run / "report.md").read_text()
    assert "| undecided |" in md and "not a draw" in md
    assert written.report.sequential is not None


def test_the_report_says_what_the_sign_flip_test_tests(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "run", cells={"C0": [], "C1": ["user-claude-md"]}, tasks=["a", "b"], repeats=10,
        outcome=lambda task, cell, repeat: Outcome(turns=5 + repeat % 3 if cell == "C1" else 3),
    )  # fmt: skip
    caveat = next(c for c in build_report(run).caveats if c.id == "sign-flip-estimand")
    assert (
        "exchangeable within a block" in caveat.text and "not only that their means are equal" in caveat.text
    )
    assert "real here: C1 turns" in caveat.text


def _pair(root: Path, *, c1_helps_in_b: bool, tasks: tuple[str, ...] = ("a", "b")) -> tuple[Path, Path]:
    """Run A: stripping C1's layer causes the pitfall half the time (the layer helps); run B: the same, or
    no effect at all (the help was lost). C2 is a null cell in both."""

    def outcome(helps: bool) -> Callable[[str, str, int], Outcome]:
        return lambda task, cell, repeat: Outcome(pitfall=helps and cell == "C1" and repeat % 4 != 0)

    cells = {"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"]}
    a = make_run(root / "a", cells=cells, tasks=list(tasks), repeats=12, outcome=outcome(True))
    b = make_run(root / "b", cells=cells, tasks=["a", "b"], repeats=12, outcome=outcome(c1_helps_in_b))
    return a, b


def test_diff_names_a_changed_effect_by_its_test_and_the_gate_fails_a_lost_help(tmp_path: Path) -> None:
    from ablate.report.rundiff import diff_runs

    a, b = _pair(tmp_path / "lost", c1_helps_in_b=False)
    d = diff_runs(a, b)
    c1, c2 = (next(c for c in d.cells if c.cell == x) for x in ("C1", "C2"))
    assert (c1.effect_a, c1.effect_b, c1.change) == (-0.75, 0.0, 0.75)
    assert c1.changed and c1.p_adjusted is not None and c1.p_adjusted < 0.01
    assert c1.ci_low is not None and c1.ci_high is not None and c1.ci_low < 0.75 < c1.ci_high
    assert not c2.changed and c2.p is None  # no block differs in either run: nothing to test
    assert d.helped_a == ["C1"] and [(c.cell, c.verdict_a, c.verdict_b) for c in d.verdicts_changed] == [
        ("C1", "helps", "draw")
    ]
    res = invoke(["diff", str(a), str(b), "--json"])
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.output)["verdicts_changed"] == [{"cell": "C1", "from": "helps", "to": "draw"}]
    res = invoke(["diff", str(a), str(b)])
    assert "verdicts changed: C1 helps → draw" in res.output and "changed" in res.output
    code, out = invoke(["gate", str(b), "--baseline", str(a), "--detect", "off"]).shown
    assert code == 1 and "regressed against the baseline: C1 (user-claude-md) helped" in out, out
    same_a, same_b = _pair(tmp_path / "kept", c1_helps_in_b=True)
    assert not any(c.changed for c in diff_runs(same_a, same_b).cells)
    code, out = invoke(["gate", str(same_b), "--baseline", str(same_a), "--detect", "off"]).shown
    assert code == 0, out


def test_diff_refuses_runs_of_other_tasks(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, c1_helps_in_b=True, tasks=("a", "z"))
    res = invoke(["diff", str(a), str(b)])
    assert res.exit_code == 2 and "do not run the same tasks" in res.output
    res = invoke(["diff", str(a), str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "not a run folder" in res.output


def test_aa_adds_a_second_control_built_and_planned_as_a_cell_of_its_own(tmp_path: Path) -> None:
    from ablate.core.claude import ClaudeBinary
    from ablate.run.create import create_run
    from ablate.setup.cells import load_cell_set, with_aa
    from ablate.setup.layers import load_catalog
    from ablate.setup.tasks import load_task

    cs = with_aa(load_cell_set("binary", load_catalog()))
    aa = cs.cells[-1]
    assert (aa.id, aa.aa_of, aa.stripped, aa.empty_config) == ("C0b", "C0", (), False)
    assert len({c.dirname for c in cs.cells}) == len(cs.cells)  # its own environments
    assert with_aa(cs) is cs
    (tmp_path / "t.toml").write_text('id = "t"\nprompt = "do"\n[[pitfalls]]\nid = "p"\npattern = "x"\n')
    exe = tmp_path / "claude"
    exe.write_text("")
    folder, manifest = create_run(
        tmp_path / "runs", tasks=[load_task(tmp_path / "t.toml")], cell_set=cs.name, cells=list(cs.cells),
        repeats=2, seed=1, model="claude-sonnet-4-6", max_turns=5, claude=ClaudeBinary(path=exe, version="2.1.332", sha256="0" * 64),
    )  # fmt: skip
    assert [c.aa_of for c in manifest.cells] == [None, None, "C0"]
    assert sum(1 for p in folder.read_plan() if p.cell == "C0b") == 2  # its own sessions
    res = invoke(["run", "--help"])
    assert "--aa" in res.output


def _aa_run(root: Path, *, aa_differs: bool) -> Path:
    from ablate.folder.layout import write_manifest

    run = make_run(
        root, cells={"C0": [], "C1": ["user-claude-md"], "C0b": []}, tasks=["a", "b"], repeats=10,
        outcome=lambda task, cell, repeat: Outcome(
            pitfall=(cell == "C0b" and aa_differs) or (repeat % 3 == 0 and not aa_differs),
            turns=3 + ((repeat % 4 == 0) - (repeat % 4 == 2) if cell == "C0b" else 0),
        ),
    )  # fmt: skip
    folder = RunFolder(run)
    m = read_manifest(folder)
    write_manifest(
        folder,
        m.model_copy(
            update={
                "cells": [c.model_copy(update={"aa_of": "C0" if c.id == "C0b" else None}) for c in m.cells]
            }
        ),
    )
    return run


def test_the_report_shows_the_aa_noise_floor_and_a_real_aa_difference_fails_the_gate(tmp_path: Path) -> None:
    quiet = _aa_run(tmp_path / "quiet", aa_differs=False)
    report = build_report(quiet)
    assert [e.cell for e in report.ranking] == ["C1"]  # the A/A cell is a noise floor, not a layer
    rows = {r.metric: r for r in report.noise_floor}
    assert rows["pitfall_free"].flip_rate == 0.0 and rows["pitfall_free"].blocks == 20
    assert rows["turns"].spread is not None and rows["turns"].spread > 0 and rows["turns"].flip_rate is None
    assert any(c.id == "aa-noise-floor" for c in report.caveats)
    assert "Noise floor (A/A)" in write_report(quiet, formats=["md"]).paths["md"].read_text()
    code, out = invoke(["gate", str(quiet), "--detect", "off"]).shown
    assert code == 0 and "A/A" not in out, out
    loud = _aa_run(tmp_path / "loud", aa_differs=True)
    report = build_report(loud)
    assert any(r.real for r in report.noise_floor)
    assert "UNTRUSTWORTHY" in next(c.text for c in report.caveats if c.id == "aa-untrustworthy")
    code, out = invoke(["gate", str(loud), "--detect", "off"]).shown
    assert code == 1 and "not trustworthy: the A/A control differs from the control for real" in out, out

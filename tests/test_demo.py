"""`ablate demo` and its planted truth: the real CLI against the probabilistic simulated model."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import orjson
import pytest

from ablate.core.errors import UsageError
from ablate.core.resources import data_dir
from ablate.report.model import Report
from ablate.report.sections import build_report
from ablate.run.demo import (
    AA_CELL,
    AA_RATES,
    AB_CONTROL,
    AB_RATES,
    DEMO_ALPHA,
    MARKER,
    PLANTED_WITH,
    PLANTED_WITHOUT,
    demo_design,
    noise_floor_lines,
    planted_facts,
    prepare_demo_folder,
    recovery_probability,
)
from ablate.setup.examples import materialise_example
from ablate.sim import Script, SimServer, script_from_data
from ablate.stats.power import power_binary
from tests.folder_totals import cell_totals, grade_totals


def test_demo_folder_is_only_reused_when_ablate_made_it(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="not an ablate demo folder"):
        prepare_demo_folder(theirs)
    assert (theirs / "keep.txt").read_text() == "mine"
    ours = prepare_demo_folder(tmp_path / "ours")
    (ours / "old-run").mkdir()
    again = prepare_demo_folder(tmp_path / "ours")
    assert (again / MARKER).exists() and not (again / "old-run").exists()


def test_demo_design_recovers_its_planted_truth_with_99_percent() -> None:
    design = demo_design()
    assert design.comparisons == 3  # the primary family: one pooled comparison per tested cell
    # the whole truth: both planted layers real and the null layer not, at the demo's alpha
    assert design.recovery.everything >= 0.99
    assert recovery_probability(design.repeats - 1).everything < 0.99  # the fewest repeats that do
    # Holm keeps the null layer's false mark below alpha: "everything" loses at most that much
    assert design.recovery.effects - DEMO_ALPHA <= design.recovery.everything <= design.recovery.effects
    # at 0.05 the null layer's false marks alone keep the whole truth under 99%, whatever the repeats
    assert recovery_probability(design.repeats * 2, alpha=0.05).everything < 0.99
    # the computed figure does not depend on when it is computed
    assert recovery_probability(design.repeats) == design.recovery


def test_recovery_simulation_agrees_with_the_exact_power_of_one_comparison() -> None:
    """One tested cell on one task: the simulated recovery is the exact binomial power (within Monte Carlo
    error), so the simulation computes what the report would."""
    n = 10
    sim = recovery_probability(n, {"C1": {"t": PLANTED_WITHOUT}}, helps=("C1",), control={"t": PLANTED_WITH})
    assert abs(sim.effects - power_binary(n, PLANTED_WITH, PLANTED_WITHOUT, DEMO_ALPHA)) < 0.01


def test_the_aa_control_counts_in_the_demo_design() -> None:
    """The A/A cell is one more null comparison in the primary family: the repeats that keep 99% grow."""
    plain, aa = demo_design(), demo_design(AA_RATES)
    assert aa.comparisons == plain.comparisons + 1 == 4
    assert aa.recovery.everything >= 0.99 and aa.repeats > plain.repeats
    assert recovery_probability(plain.repeats, AA_RATES).everything < 0.99  # Holm over four needs more


def test_the_aa_fact_and_the_noise_floor_are_read_from_the_report() -> None:
    rows = [
        {"metric": "pitfall_free", "cell": AA_CELL, "blocks": 50, "flip_rate": 0.16, "spread": 0.4,
         "delta": 0.04, "p_adjusted": 1.0, "real": False},
        {"metric": "turns", "cell": AA_CELL, "blocks": 50, "flip_rate": None, "spread": 0.9,
         "delta": -0.1, "p_adjusted": 0.7, "real": False},
    ]  # fmt: skip
    report = {**_report({"C1": "helps", "C8": "helps", "C2": "draw"}, c2_real=False), "noise_floor": rows}
    assert planted_facts(report)[-1].claim == "C12 is a no-op"  # without --aa: no A/A fact
    fact = planted_facts(report, aa=True)[-1]
    assert (fact.claim, fact.recovered, fact.found) == (
        "C0b (the A/A control) makes no real difference to pitfall_free",
        True,
        "not real (Holm p 1.000)",
    )
    assert noise_floor_lines(report) == [
        "pitfall_free: flips in 16% of 50 blocks, spread (sd of Δ) 0.4, Δ +4 pts, adjusted p 1",
        "turns: spread (sd of Δ) 0.9, Δ -0.10, adjusted p 0.7",
    ]
    # a real A/A difference on another metric is shown, marked; the fact is the primary metric's, as the
    # design's recovery figure is (the null layer's fact is too)
    rows[1]["real"] = True
    assert noise_floor_lines(report)[1].endswith(" — REAL")
    assert planted_facts(report, aa=True)[-1].recovered
    rows[0]["real"] = True
    assert (planted_facts(report, aa=True)[-1].recovered, planted_facts(report, aa=True)[-1].found) == (
        False,
        "real",
    )
    ranked = {**report, "ranking": [{"cell": AA_CELL, "verdict": "draw"}]}
    assert planted_facts(ranked, aa=True)[-1].found == "ranked as a layer"
    assert not planted_facts({**report, "noise_floor": []}, aa=True)[-1].recovered


def test_the_ab_design_finds_the_whole_setup_helps() -> None:
    ab = demo_design(AB_RATES, helps=("C11",), control=AB_CONTROL)
    assert ab.recovery.everything >= 0.99 and ab.repeats >= 2


def _report(verdicts: dict[str, str], c2_real: bool, no_op: bool = True) -> dict[str, object]:
    return {
        "primary_metric": "pitfall_free",
        "ranking": [{"cell": c, "verdict": v} for c, v in verdicts.items()],
        "comparisons": [
            {"cell": "C2", "task": None, "metric": "pitfall_free", "real": c2_real, "p_adjusted": 0.4},
            {"cell": "C2", "task": "greet-exclaim", "metric": "pitfall_free", "real": True},
        ],
        "no_op_cells": [{"cell": "C12"}] if no_op else [],
    }


def test_planted_facts_are_read_from_the_report() -> None:
    facts = planted_facts(_report({"C1": "helps", "C8": "helps", "C2": "draw"}, c2_real=False))
    assert [(f.claim, f.recovered) for f in facts] == [
        ("C1 helps", True),
        ("C8 helps", True),
        ("C2 makes no real difference to pitfall_free", True),
        ("C12 is a no-op", True),
    ]
    assert facts[2].found == "not real (Holm p 0.400)"
    missed = planted_facts(_report({"C1": "helps", "C8": "mixed"}, c2_real=True, no_op=False))
    assert [f.recovered for f in missed] == [True, False, False, False]
    assert missed[1].found == "verdict mixed"


def test_a_missed_fact_fails_the_demo_at_the_designs_repeats_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo exits 1 (AblateError) when its report misses a planted fact at the design's repeats; with
    fewer repeats a miss is expected and only said."""
    from ablate.cli.demo import _say_truth
    from ablate.core.errors import AblateError

    design = demo_design()
    report = _report({"C1": "helps", "C8": "draw", "C2": "draw"}, c2_real=False)
    with pytest.raises(AblateError, match=r"did not recover 1 planted fact\(s\): C8 helps"):
        _say_truth(report, tmp_path, design.repeats, design, aa=False)
    assert "MISSED: C8 helps (verdict draw)" in capsys.readouterr().out
    _say_truth(report, tmp_path, design.repeats - 1, design, aa=False)
    assert "misses are expected, not checked" in capsys.readouterr().out
    _say_truth(
        _report({"C1": "helps", "C8": "helps", "C2": "draw"}, c2_real=False), tmp_path, 99, design, aa=False
    )


def _env(claude: Path, home: Path, *, probe: bool = True) -> dict[str, str]:
    """The environment of an `ablate` run as a user has it; ``probe=False``: no probe-first step (the one-repeat
    demo test asserts it; elsewhere it would cost a CLI start per cell and prove nothing new)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env.update(ABLATE_CLAUDE_BIN=str(claude), HOME=str(home))
    if not probe:
        env["ABLATE_PROBE"] = "0"
    return env


@pytest.mark.e2e
def test_demo_with_one_repeat_runs_end_to_end_and_says_nothing_is_significant(
    claude: Path, tmp_path: Path
) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "ablate", "demo", "--out", str(out), "--jobs", "3", "--repeats", "1"],
        env=_env(claude, tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # `run` probed every cell of the demo set first and found them faithful; the report reads the proof
    probed = "probe: OK: 6 cells (5 faithful, 1 no-op), shadow fidelity equal"  # C0b: the A/A control
    assert probed in proc.stderr, proc.stderr[-3000:]
    (run_dir,) = [p for p in (out / "runs").iterdir() if p.is_dir()]
    assert f"report: {run_dir / 'report.html'}" in proc.stdout
    assert "one repeat: only the pooled comparisons can be real" in proc.stdout
    # the last lines: the planted facts as report.json reads them (one repeat finds no effect: not checked),
    # then the noise floor the A/A control measured
    lines = proc.stdout.rstrip().splitlines()
    last = lines[lines.index("The planted truth (shadow/sim/demo.toml), as report.json reads:") :]
    assert last[1].startswith("  MISSED: C1 helps (verdict draw)")
    assert "recovered: C12 is a no-op (labelled no-op)" in last[4]
    assert last[5].startswith(
        "  recovered: C0b (the A/A control) makes no real difference to pitfall_free (not real"
    ), last[5]
    # the report is written by `ablate report` at the alpha the demo's design is computed for
    assert f"$ ablate report {run_dir} --alpha 0.01" in proc.stdout
    assert orjson.loads((run_dir / "report.json").read_bytes())["alpha"] == 0.01
    assert "fewer than the design's" in last[6]
    assert last[7] == "The measured noise floor (C0b against C0, the same setup built and run twice):"
    assert last[8].startswith("  pitfall_free: flips in ") and " of 2 blocks, spread (sd of Δ) " in last[8]
    assert len(last) == 13  # one line per metric: pitfall-free, turns, tool calls, cost, checks passed
    report = orjson.loads((run_dir / "report.json").read_bytes())
    assert not any(c["real"] for c in report["comparisons"])
    assert "one-repeat" in {c["id"] for c in report["caveats"]}
    assert report["probe"]["ok"] is True and (run_dir / "probe.json").is_file()
    assert "No probe.json" not in (run_dir / "report.md").read_text()
    # every dollar figure is marked: the endpoint was ablate.sim
    assert report["run"]["simulated"] is True
    assert (
        "(simulated)" in proc.stderr
        and "simulated (nothing was billed)" in (run_dir / "report.md").read_text()
    )
    assert [c["cell"] for c in report["no_op_cells"]] == ["C12"]
    # the A/A control ran through the real path: its own sessions, measured, never ranked, nothing real
    floor = {r["metric"]: r for r in report["noise_floor"]}
    assert {r["cell"] for r in floor.values()} == {"C0b"} and floor["pitfall_free"]["blocks"] == 2
    assert not any(r["real"] for r in floor.values())
    assert "C0b" not in {e["cell"] for e in report["ranking"]}
    assert "## Noise floor (A/A)" in (run_dir / "report.md").read_text()
    # per-cell provenance from the wire: one system prompt, tool list and context per cell; the cells that
    # strip instructions (C1, C2) sent another context than the control, C8 (repo docs read on demand) the same
    carried = {c["cell"]: c for c in report["carried"]}
    assert {
        c: (v["sessions"], v["system"], v["tools"], v["context"], v["same_as"]) for c, v in carried.items()
    } == {c: (2, 1, 1, 1, []) for c in ("C0", "C1", "C2", "C8", "C12", "C0b")}
    assert "carried-identical" not in {c["id"] for c in report["caveats"]}
    # a namespace run's sessions carried exactly the context its free probe captured for their cell
    namespace = orjson.loads((run_dir / "manifest.json").read_bytes())["isolation"]["backend"] == "namespace"
    assert {v["unlike_probe"] for v in carried.values()} == ({0} if namespace else {None})
    contexts = {
        cell: {
            orjson.loads(line)["context_sha256"]
            for line in (run_dir / "wire" / f"greet-exclaim__{cell}__r00.jsonl").read_bytes().splitlines()
        }
        for cell in ("C0", "C1", "C2", "C8", "C0b")
    }
    assert all(len(c) == 1 and None not in c for c in contexts.values()), contexts
    assert len({*contexts["C0"], *contexts["C1"], *contexts["C2"]}) == 3 and contexts["C8"] == contexts["C0"]
    assert contexts["C0b"] == contexts["C0"]  # the A/A control: the same setup, built again
    assert (run_dir / "report.md").exists() and (run_dir / "plots" / "forest.svg").exists()
    # the example setup the demo read is untouched by the run (its hook log only has the seed line)
    log = out / "setup" / "home" / ".claude" / "data" / "sessions.log"
    assert log.read_text().count("session start") == 1


#: The demo script's planted greet-exclaim effect made certain (the rule that reads MEMORY.md fires always with
#: the user CLAUDE.md, never without): the pitfall-free rates of C0 and C1 are 1 and 0, so every pair is
#: discordant and the exact paired test finds the loss with the fewest blocks that can reach alpha.
CERTAIN_WITH, CERTAIN_WITHOUT = 1.0, 0.0
#: Repeats for the planted-truth test: the planted effect is found with >= 99% power; the primary family is
#: the one tested cell's pooled pitfall-free comparison, so Holm tests it at alpha itself.
TRUTH_REPEATS = 6


def _certain_demo_script(without: float = CERTAIN_WITHOUT) -> Script:
    """shadow/sim/demo.toml with greet-exclaim's draws made certain: with the user CLAUDE.md the model reads
    MEMORY.md (and keeps "Hello") always, without it with probability ``without`` (0: never)."""
    data = tomllib.loads((data_dir("shadow") / "sim" / "demo.toml").read_text())
    rules = {r["name"]: r for r in data["rules"]}
    rules["greet-read-memory"]["probability"] = CERTAIN_WITH
    if without > 0:
        rules["greet-read-memory-unprompted"]["probability"] = without
    else:
        data["rules"].remove(rules["greet-read-memory-unprompted"])
    return script_from_data(data, "demo.toml, greet-exclaim made certain")


@pytest.mark.e2e
def test_demo_recovers_its_planted_truth_at_small_scale(claude: Path, tmp_path: Path) -> None:
    """One task (greet-exclaim) and the cells it needs: the demo script's planted C1 effect, made certain,
    found real and harmful. (A null layer's draw is checked on the report's own data in tests/test_report.py,
    and the one-repeat demo above marks nothing real with the real CLI: a null cell here would cost more
    sessions and halve alpha. The demo's own rates, 0.9 and 0.1, need 14 repeats for 99%: the design's
    arithmetic is checked above, the statistics that turn sessions into the verdict here.)"""
    assert power_binary(TRUTH_REPEATS, CERTAIN_WITH, CERTAIN_WITHOUT, 0.05) >= 0.99
    assert power_binary(TRUTH_REPEATS - 1, CERTAIN_WITH, CERTAIN_WITHOUT, 0.05) < 0.99  # the fewest that do
    example = materialise_example(tmp_path / "setup")
    args = ["--cells", str(_two_cells(tmp_path)), "--repeats", str(TRUTH_REPEATS), "--seed", "11"]
    args += ["--model", "claude-sonnet-4-6", "--max-turns", "8", "--report", "now"]
    args += ["--config-dir", str(example.config_dir), "--repo", str(example.repo)]
    run_dir, proc = _small_run(claude, tmp_path, example.home, args, jobs=3, script=_certain_demo_script())
    assert (run_dir / "report.html").exists()  # `ablate run` wrote the report at the end: read, not rebuilt
    report = Report.model_validate_json((run_dir / "report.json").read_bytes())
    ranks = {e.cell: e for e in report.ranking}
    # the real pooled primary loss decides: "helps", whatever a secondary metric says (its trade-offs)
    assert ranks["C1"].tie_group != "draw" and ranks["C1"].verdict == "helps", ranks["C1"]
    assert ranks["C1"].evidence == "primary"
    # the ranking table report.md opens with, on the terminal
    assert any(line.split()[:4] == ["rank", "cell", "strips", "verdict"] for line in proc.stdout.splitlines())
    pf = next(c for c in report.comparisons if c.cell == "C1" and c.metric == "pitfall_free")
    assert pf.real and pf.delta is not None and pf.delta < 0
    primary = [c for c in report.comparisons if c.family == "primary"]
    assert len(primary) == 1  # one comparison in the primary family: Holm tests it at alpha, not alpha/2
    assert report.run.model_verified  # (no-op labelling with the real CLI: the one-repeat demo test above)


def _two_cells(tmp: Path) -> Path:
    """C0 and C1 (no user CLAUDE.md, what greet-exclaim needs)."""
    cells = tmp / "cells.toml"
    cells.write_text(
        'schema_version = 1\nname = "two"\ncontrol = "C0"\n'
        '[[cell]]\nid = "C0"\nstrip = []\n[[cell]]\nid = "C1"\nstrip = ["user-claude-md"]\n'
    )
    return cells


def _small_run(
    claude: Path, tmp: Path, example_home: Path, args: list[str], jobs: int, script: Script | None = None
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """An `ablate run` of greet-exclaim against the demo's simulated model (or ``script``): its run folder
    and process."""
    env = _env(claude, example_home, probe=False)
    with SimServer(script or data_dir("shadow") / "sim" / "demo.toml") as sim:
        env.update(ANTHROPIC_BASE_URL=sim.base_url, ANTHROPIC_API_KEY="sk-ablate-test")
        proc = subprocess.run(
            [
                *(
                    sys.executable,
                    "-m",
                    "ablate",
                    "run",
                    "--tasks",
                    str(data_dir("tasks") / "greet-exclaim.toml"),
                ),
                *(*args, "--jobs", str(jobs), "--out", str(tmp / "runs"), "--work-dir", str(tmp / "envs")),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = [p for p in (tmp / "runs").iterdir() if p.is_dir()]
    return run_dir, proc


@pytest.mark.e2e
def test_same_seed_same_numbers_whatever_the_scheduling(claude: Path, tmp_path: Path) -> None:
    """Two runs with seed 5, one session at a time and two at once: the same session ids, so the simulated
    model's draws (keyed by session: task, cell, repeat) and every number of the report are the same. Two
    repeats: the second repeat's draws differ from the first's, so an order-dependent seed would show."""
    example = materialise_example(tmp_path / "setup")
    cells = _two_cells(tmp_path)
    args = ["--cells", str(cells), "--repeats", "2", "--model", "claude-sonnet-4-6", "--max-turns", "8"]
    args += ["--seed", "5", "--report", "none"]  # the report is built here, without the plot's cost
    args += ["--config-dir", str(example.config_dir), "--repo", str(example.repo)]
    runs = [_small_run(claude, tmp_path / f"r{jobs}", example.home, args, jobs)[0] for jobs in (1, 2)]

    def numbers(run_dir: Path) -> tuple[object, ...]:
        results = sorted(
            (orjson.loads(p.read_bytes()) for p in (run_dir / "results").glob("*.json")),
            key=lambda r: r["item"],
        )
        report = build_report(run_dir).model_dump(mode="json")
        per_item = [
            (r["item"], r["session_id"], r["turns"], r["cost_usd"], r["pitfall_hits"]) for r in results
        ]
        return per_item, report["comparisons"], report["cells"], report["ranking"], report["run"]["spend_usd"]

    assert numbers(runs[0]) == numbers(runs[1])
    assert build_report(runs[0]).run.simulated is True


#: The demo script's deterministic tasks (the other two are probabilistic and covered above).
DETERMINISTIC_TASKS = ("deploy-command", "typed-farewell", "release-notes", "deterministic-tests")
#: The layered cells whose ground truth the test checks: every cell with a planted pitfall or check failure,
#: the control, and C3, which changes the turns but not the outcome (C1 does so too, on deploy-command alone: a
#: second such cell would add sessions, not evidence; the other six strip docs these tasks never read).
TRUTH_CELLS = ("C0", "C3", "C4", "C5", "C11")


def _layered_subset(path: Path, keep: tuple[str, ...]) -> Path:
    """The layered cell set (cells/layered.toml, byte for byte per cell) cut to the cells ``keep`` names."""
    head, *blocks = (data_dir("cells") / "layered.toml").read_text().split("[[cell]]\n")
    kept = [b for b in blocks if b.split("\n", 1)[0].split('"')[1] in keep]
    assert len(kept) == len(keep)
    path.write_text(head + "".join("[[cell]]\n" + b for b in kept))
    return path


@pytest.mark.e2e
def test_demo_script_deterministic_tasks_recover_their_ground_truth(claude: Path, tmp_path: Path) -> None:
    """The layered cells that carry the planted truth on the four deterministic tasks, with the sim as the
    blind judge."""
    example = materialise_example(tmp_path / "setup")
    env = _env(claude, example.home, probe=False)
    tasks = [a for t in DETERMINISTIC_TASKS for a in ("--tasks", str(data_dir("tasks") / f"{t}.toml"))]
    with SimServer(data_dir("shadow") / "sim" / "demo.toml") as sim:
        env.update(ANTHROPIC_BASE_URL=sim.base_url, ANTHROPIC_API_KEY="sk-ablate-test")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ablate",
                "run",
                *tasks,
                "--cells",
                str(_layered_subset(tmp_path / "cells.toml", TRUTH_CELLS)),
                "--repeats",
                "1",
                "--model",
                "claude-sonnet-4-6",
                "--max-turns",
                "8",
                "--jobs",
                "3",
                "--seed",
                "7",
                "--judge-model",
                "claude-haiku-4-5",
                "--out",
                str(tmp_path / "runs"),
                "--work-dir",
                str(tmp_path / "envs"),
                "--report",
                "now",  # the default (tests/conftest.py sets ABLATE_REPORT=none)
                "--config-dir",
                str(example.config_dir),
                "--repo",
                str(example.repo),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    cells = {s.cell: s for s in cell_totals(run_dir)}
    assert all(s.complete == s.items == 4 for s in cells.values())
    hits = {cid: s.pitfall_hits for cid, s in cells.items()}
    # shadow/sim/demo.toml's ground truth, recovered from the transcripts
    assert hits["C4"] == {"bumps-version": 3}
    assert hits["C5"] == {"plugin-instead-of-seed": 2}
    assert hits["C11"] == {
        "bumps-version": 3,
        "plugin-instead-of-seed": 2,
        "untyped-def": 1,
        "wrong-region": 1,
    }
    assert set(hits) == set(TRUTH_CELLS)
    for cid in ("C0", "C3"):
        assert hits[cid] == {}, cid
    # checks on the checkouts the sessions left (release-notes, typed-farewell), and the judge's verdicts
    graded = {g.cell: g for g in grade_totals(run_dir)}
    passed = {cid: (g.checks_passed, g.checked, g.judge_pass, g.judged) for cid, g in graded.items()}
    assert passed["C0"] == passed["C3"] == (2, 2, 4, 4)
    assert passed["C4"] == (1, 2, 3, 4)
    assert passed["C5"] == (2, 2, 3, 4)
    assert passed["C11"] == (0, 2, 0, 4)
    assert cells["C3"].mean_turns is not None and cells["C0"].mean_turns is not None
    assert cells["C3"].mean_turns > cells["C0"].mean_turns  # no lessons: deploy needs the runbook
    # the graded metrics reach the report
    report = orjson.loads((run_dir / "report.json").read_bytes())
    assert {"checks_passed", "judge_pass"} <= {c["metric"] for c in report["comparisons"]}

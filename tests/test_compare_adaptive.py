"""`ablate compare --adaptive`: the arms run in rounds and stop once the anytime-valid analysis decides them.

End to end with the real CLI against ablate.sim: three arms replace the example setup's user CLAUDE.md on five
copies of one task; the sim follows the rule only when it reaches the model twice, so the duplicated arm
(`two`) gains every block (planted) and `three`, byte-identical to the control `one`, gains none (null).
Round 1 (15 sessions, 5 blocks): `three` is "no effect of interest" at min effect 0.5 and stops; round 2 (the
control and `two`, 10 sessions): `two` is real (10 of 10 blocks gained; Holm over two arms at 0.05). A
--resume of the finished folder continues the same analysis: nothing runs again and the looks stay.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.compare.sequential import sequential_stats
from ablate.folder.adaptive import CellLook, Look
from ablate.report.model import SequentialReport
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import ABLATE, invoke

COPIES = 5
MAX_REPEATS = 6

RULES = """# Rules for this machine

Be brief.

## Tools

- RULE-UV: use uv for Python dependencies, never pip.
"""

SCRIPT = {
    "usage": {"input_tokens": 1000, "output_tokens": 10},
    "default": {"text": "Run `pip install requests`."},
    "rules": [
        {"name": "rule-twice", "where": "request", "regex": "RULE-UV.*RULE-UV",
         "text": "Run `uv add requests`, as the rules say."},
    ],
}  # fmt: skip


def _tasks(root: Path) -> list[str]:
    root.mkdir()
    args = []
    for i in range(COPIES):
        path = root / f"dep-{i}.toml"
        path.write_text(
            f'schema_version = 1\nid = "dep-{i}"\nprompt = "Add the requests library."\n'
            '[[pitfalls]]\nid = "pip"\npattern = "pip install"\n'
        )
        args += ["--tasks", str(path)]
    return args


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_adaptive_compare_stops_the_null_arm_early_and_finds_the_planted_one(
    claude: Path, tmp_path: Path
) -> None:
    example = materialise_example(tmp_path / "example")
    md = tmp_path / "rules.md"
    md.write_text(RULES)
    out = tmp_path / "runs"
    common = [
        "--config-dir", str(example.config_dir), "--repo", str(example.repo), "--claude-bin", str(claude),
        "--work-dir", str(tmp_path / "envs"), "--jobs", "2", "--yes", "--json",
    ]  # fmt: skip
    args = [
        ABLATE, "compare", f"one={md}", f"two={md}@duplicate:Tools", f"three={md}", *_tasks(tmp_path / "t"),
        "--adaptive", "--max-repeats", str(MAX_REPEATS), "--min-effect", "0.5", "--max-turns", "2",
        "--seed", "4", "--out", str(out), *common,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env.update({"HOME": str(example.home), "ANTHROPIC_API_KEY": "sk-test"})
    env["ABLATE_PROBE"] = "0"  # no probe-first step: tests/test_compare_e2e.py covers compare's probe
    with SimServer(script_from_data(SCRIPT)) as sim:
        env["ANTHROPIC_BASE_URL"] = sim.base_url
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc = orjson.loads(proc.stdout)
        folder = out / doc["compare_id"]
        resumed = subprocess.run(
            [ABLATE, "compare", f"one={md}", f"two={md}@duplicate:Tools", f"three={md}", *_tasks(tmp_path / "u"),
             "--max-turns", "2", "--resume", str(folder), *common],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    seq = doc["sequential"]
    assert doc["tier"] == "adaptive" and doc["repeats"] == MAX_REPEATS and doc["excluded"]["count"] == 0
    assert seq["stopped"] == "decided" and [lk["round"] for lk in seq["looks"]] == [1, 2]
    decisions = {arm: d["decision"] for arm, d in seq["decisions"].items()}
    assert decisions == {"two": "real", "three": "no-effect"}
    # five concordant blocks cannot rule out an effect of 0.5 at draw error 0.05: the capped bets do not reach
    # 1/0.05 = 20 in five blocks (only staking everything on each would, 2**5 = 32); ten do, at the second look
    assert [lk["cells"]["three"]["decision"] for lk in seq["looks"]] == ["undecided", "no-effect"]
    assert seq["looks"][-1]["sessions"] == 3 * COPIES * 2
    pooled = {c["b"]: c for c in doc["contrasts"] if c["task"] is None and c["metric"] == "pitfall_free"}
    assert pooled["two"]["real"] and not pooled["three"]["real"]
    assert pooled["two"]["p_adjusted"] == seq["looks"][-1]["cells"]["two"]["p_holm"]  # the anytime figure
    assert not any(c["real"] for c in doc["contrasts"] if c["task"] is not None)  # fixed-n: descriptive
    assert {v["arm"]: v["better"] for v in doc["verdicts"]} == {"two": True, "three": False}
    rates = {r["arm"]: (r["passed"], r["n"]) for r in doc["arm_rates"] if r["task"] is None}
    assert rates == {"one": (0, 2 * COPIES), "two": (2 * COPIES, 2 * COPIES), "three": (0, 2 * COPIES)}
    # the compare folder plans the largest design; the run folder holds only the rounds that ran, once each
    planned = (folder / "plan.jsonl").read_bytes().splitlines()
    run = folder / doc["execution"]["run_folder"]
    ran = [orjson.loads(line) for line in (run / "plan.jsonl").read_bytes().splitlines()]
    assert len(planned) == 3 * COPIES * MAX_REPEATS and len(ran) == len({p["item"] for p in ran}) == 30
    assert doc["execution"]["adaptive"]["stopped"] == "decided" and doc["execution"]["cell_check"]["verified"]
    assert doc["execution"]["envs_built"] == 2  # --jobs 2: two built for round 1, kept for round 2
    md_text = (folder / "compare.md").read_text()
    assert "How the comparison stopped" in md_text and "sequential design" in md_text
    assert "descriptive" in md_text and (folder / "plots" / "sequence.svg").is_file()
    # --resume of the finished comparison: the same analysis, nothing run again
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    again = orjson.loads(resumed.stdout)
    assert again["sequential"]["looks"] == seq["looks"] and again["compare_id"] == doc["compare_id"]
    assert len((run / "plan.jsonl").read_bytes().splitlines()) == 30


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--repeats", "5"], "--repeats and --adaptive"),
        (["--tier", "rigorous"], "--tier and --adaptive"),
        (["--executor", "sim"], "only the claude-code executor runs in rounds"),
    ],
)
def test_adaptive_refuses_what_cannot_apply_before_anything_is_written(
    tmp_path: Path, extra: list[str], said: str
) -> None:
    md = tmp_path / "a.md"
    md.write_text("# A\n")
    task = tmp_path / "t.toml"
    task.write_text('schema_version = 1\nid = "t"\nprompt = "p"\n')
    out = tmp_path / "runs"
    res = invoke(["compare", str(md), str(md), "--tasks", str(task), "--adaptive", "--out", str(out), *extra])
    assert res.exit_code == 2, res.output
    assert said in res.output and not out.exists()


def _look(decision: str, delta: float, p_holm: float) -> CellLook:
    return CellLook(
        blocks=10, gained=int(10 * max(delta, 0)), lost=int(10 * max(-delta, 0)), delta=delta, e_value=1 / p_holm,
        p_anytime=p_holm / 2, p_holm=p_holm, cs_low=delta - 0.3, cs_high=delta + 0.3, draw_low=delta - 0.2,
        draw_high=delta + 0.2, decision=decision, reason=f"{decision}: because",
    )  # fmt: skip


def test_sequential_stats_put_the_anytime_figures_in_place_of_the_fixed_n_tests() -> None:
    cells = {"two": _look("real", 1.0, 0.02), "three": _look("no-effect", 0.0, 1.0)}
    look = Look(round=2, at="2026-12-01T00:00:00Z", sessions=25, spend_usd=0.0, analysis_s=0.0, cells=cells)
    seq = SequentialReport(
        mode="adaptive", primary="pitfall_free", control="one", alpha=0.05, min_effect=0.5, draw_beta=0.2,
        max_repeats=6, stopped="decided", looks=[look],
        decisions={a: {"decision": c.decision, "reason": c.reason, "round": 1, "blocks": 10} for a, c in cells.items()},
        caveats=["sequential"],
    )  # fmt: skip

    def contrast(b: str, task: str | None, metric: str = "pitfall_free") -> dict[str, Any]:
        return {"a": "one", "b": b, "metric": metric, "task": task, "n": 10, "delta": 0.5, "ci_low": 0.1,
                "ci_high": 0.9, "p": 0.001, "improved": 5, "regressed": 0, "p_adjusted": 0.003, "real": True,
                "scope": "all", "method": "exact", "notes": []}  # fmt: skip

    fixed = {
        "contrasts": [contrast("two", None), contrast("three", None), contrast("two", "t"),
                      contrast("two", None, "turns"), {**contrast("three", None), "a": "two"}],
        "holdout_contrasts": [contrast("two", None)], "regressions": [contrast("two", "t")],
        "decomposition": {"total": {"a": "one", "b": "two", "delta": 0.5, "real": True}},
        "verdicts": [], "claims": {"can": [], "cannot": []}, "arm_rates": [],
    }  # fmt: skip
    out = sequential_stats(fixed, seq, "one")
    two, three, per_task, turns, between = out["contrasts"]
    assert (two["real"], two["p_adjusted"], two["ci_low"], two["ci_high"]) == (True, 0.02, 0.7, 1.3)
    assert not three["real"] and three["p_adjusted"] == 1.0 and three["p"] == 0.5
    for c in (per_task, turns, between, *out["holdout_contrasts"], *out["regressions"]):
        assert not c["real"]
    assert per_task["p_adjusted"] == 0.003 and "descriptive" in per_task["method"]  # kept, as description
    assert not out["decomposition"]["total"]["real"]
    assert {v["arm"]: v["better"] for v in out["verdicts"]} == {"two": True, "three": False}
    assert out["sequential"]["stopped"] == "decided" and out["sequential"]["looks"][0]["round"] == 2
    assert any("description only" in c for c in out["claims"]["cannot"])

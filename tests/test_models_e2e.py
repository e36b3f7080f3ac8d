"""End to end, the real CLI against the sim: models as a factor (issue 40 item 3).

``ablate ab --models claude-haiku-4-5,claude-sonnet-4-6`` on the example setup, with a sim that plants an effect
on one model only: on claude-haiku-4-5 a session without the setup (C11: the user CLAUDE.md does not reach the
model) hits the task's pitfall, with it (C0) it does not; claude-sonnet-4-6 passes either way. The report says
so per model and finds the model × cell interaction real; each session was pinned to, and verified as, its
item's model; `ablate gate` needs --model and gates each model's part; the folder recovers, merges, and
refuses a resume with other models."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ablate.report.sections import build_report
from ablate.run.merge import merge_runs
from ablate.run.recover import recover_run
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import invoke

pytestmark = pytest.mark.e2e

HAIKU, SONNET = "claude-haiku-4-5", "claude-sonnet-4-6"
#: a line of the example's user CLAUDE.md: it reaches the model in C0, not in C11
MARKER = "ablate-example user-claude-md 41c7"


def test_an_effect_on_one_model_only_is_reported_per_model_with_the_interaction(
    claude: Path, tmp_path: Path
) -> None:
    ex = materialise_example(tmp_path / "ex")
    task = tmp_path / "t.toml"
    task.write_text(
        'schema_version = 1\nid = "t"\nprompt = "MODELS-TASK: answer."\n[[pitfalls]]\nid = "p"\npattern = "BADWORD"\n'
    )
    script = script_from_data(
        {
            "default": {"text": "fine"},
            "rules": [
                {"name": "haiku-bare", "model": "haiku", "where": "request", "not_contains": [MARKER],
                 "contains": ["MODELS-TASK"], "text": "BADWORD"},
            ],
        }
    )  # fmt: skip
    where = ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--claude-bin", str(claude)]
    args = ["ab", "--tasks", str(task), "--repeats", "6", "--max-turns", "2", "--models", f"{HAIKU},{SONNET}"]
    with SimServer(script) as sim:
        env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": sim.base_url}
        out = [
            "--out",
            str(tmp_path / "runs"),
            "--work-dir",
            str(tmp_path / "envs"),
            "--seed",
            "7",
            "--no-probe",
        ]
        res = invoke([*args, *where, *out, "--report", "now"], env=env)
        asked = {r.model for r in sim.requests() if r.is_messages and "MODELS-TASK" in r.text}
    assert res.exit_code == 0, res.stderr[-3000:]
    assert asked == {HAIKU, SONNET}
    (run,) = (tmp_path / "runs").iterdir()
    plan = [orjson.loads(line) for line in (run / "plan.jsonl").read_bytes().splitlines()]
    assert sorted((p["cell"], p["model"]) for p in plan if p["repeat"] == 0) == [
        ("C0", HAIKU), ("C0", SONNET), ("C11", HAIKU), ("C11", SONNET)
    ]  # fmt: skip
    for p in plan:  # each session pinned to its item's model, and its transcript says so
        result = orjson.loads((run / "results" / f"{p['item']}.json").read_bytes())
        assert result["complete"] and result["session"]["models"] == [p["model"]], p["item"]
    report = orjson.loads((run / "report.json").read_bytes())
    parts = {m["model"]: m for m in report["models"]}
    assert list(parts) == [HAIKU, SONNET] and all(m["model_verified"] for m in parts.values())
    primary = {m: next(c for c in p["comparisons"] if c["family"] == "primary") for m, p in parts.items()}
    assert {m: (c["delta"], c["real"]) for m, c in primary.items()} == {
        HAIKU: (-1.0, True),
        SONNET: (0.0, False),
    }
    assert primary[HAIKU]["verdict"] == "helps"  # on sonnet no block is discordant: nothing to test
    assert report["ranking"] == parts[HAIKU]["ranking"]  # the top level is the reference model's
    (row,) = report["model_interactions"]
    assert (row["cell"], row["models"], row["blocks"]) == ("C11", [HAIKU, SONNET], 6)
    assert row["delta_difference"] == -1.0 and row["real"] and row["p_adjusted"] <= 0.05
    md = (run / "report.md").read_text()
    print(md[md.index("## Models") : md.index("## Models") + 4000])
    assert f"it helps on {HAIKU} by 100 pts" in md and f"makes no real difference on {SONNET}" in md
    assert "the difference between the two (-100 pts" in md and ") is real" in md
    assert f"on {SONNET}:" in res.stderr + res.stdout  # the terminal answer gives each model's verdicts
    code, said = invoke(["gate", str(run)]).shown
    assert code == 2 and "--model" in said, said
    code, said = invoke(["gate", str(run), "--model", "claude-opus-4-5"]).shown
    assert code == 2 and "not a model of this report" in said, said
    code, said = invoke(["gate", str(run), "--model", HAIKU, "--json"]).shown
    gated = orjson.loads(said)
    assert (code, gated["outcome"], gated["items"]) == (0, "better", 12), said  # haiku's 12 sessions only
    code, said = invoke(["gate", str(run), "--model", SONNET]).shown
    assert code == 4 and "INCONCLUSIVE" in said, said  # no difference, and 6 blocks cannot rule one out
    # the folder recovers, merges and resumes as a run of one model does: its plan names each item's model
    lost = plan[0]["item"]
    (run / "results" / f"{lost}.json").unlink()
    assert {r.item: r.action for r in recover_run(run)}[lost] == "recovered"
    merged = merge_runs([run], tmp_path / "merged")
    assert (merged["complete"], merged["items"]) == (24, 24)
    again = build_report(tmp_path / "merged").model_dump(mode="json")
    assert again["model_interactions"][0]["delta_difference"] == -1.0
    with SimServer(script) as sim:
        env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": sim.base_url}
        other = ["run", "--resume", str(run), "--models", f"{HAIKU},claude-opus-4-5", *where, "--no-probe"]
        code, said = invoke(other, env=env).shown
        assert (
            code == 2 and f"models {HAIKU}, claude-opus-4-5 differ from the run's {HAIKU}, {SONNET}" in said
        ), said
        assert not sim.messages_requests()  # refused before any session


def test_compare_runs_every_arm_on_every_model(claude: Path, tmp_path: Path) -> None:
    """``compare --models``: compare.json gives each model's rates, contrasts and verdicts (the top level is
    the first's) and the model × arm interaction; the arms run in one plan whose items carry their model."""
    ex = materialise_example(tmp_path / "ex")
    rules = tmp_path / "rules.md"
    rules.write_text("# Rules\n\n## Tools\n\n- RULE-UV: use uv, never pip.\n")
    task = tmp_path / "dep.toml"
    task.write_text(
        'schema_version = 1\nid = "dep"\nprompt = "Add requests."\n[[pitfalls]]\nid = "pip"\npattern = "pip install"\n'
    )
    script = script_from_data(
        {
            "default": {"text": "Run `pip install requests`."},
            "rules": [  # haiku follows the rule only when it reaches it twice; sonnet always
                {"name": "haiku-twice", "model": "haiku", "where": "request", "regex": "RULE-UV.*RULE-UV", "text": "uv add"},
                {"name": "sonnet", "model": "sonnet", "where": "request", "contains": ["RULE-UV"], "text": "uv add"},
            ],
        }
    )  # fmt: skip
    where = ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--claude-bin", str(claude)]
    args = [
        "compare",
        f"one={rules}",
        f"two={rules}@duplicate:Tools",
        "--tasks",
        str(task),
        "--yes",
        "--json",
    ]
    out = ["--out", str(tmp_path / "runs"), "--work-dir", str(tmp_path / "envs"), "--seed", "4", "--no-probe"]
    with SimServer(script) as sim:
        env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": sim.base_url}
        res = invoke([*args, *where, *out, "--max-turns", "2", "--models", f"{HAIKU},{SONNET}"], env=env)
    assert res.exit_code == 0, res.stderr[-3000:]
    doc = orjson.loads(res.stdout)
    rates = {
        m["model"]: {r["arm"]: (r["passed"], r["n"]) for r in m["arm_rates"] if r["task"] is None}
        for m in doc["models"]
    }
    assert rates == {HAIKU: {"one": (0, 5), "two": (5, 5)}, SONNET: {"one": (5, 5), "two": (5, 5)}}
    assert doc["arm_rates"] == doc["models"][0]["arm_rates"] and doc["model"] == HAIKU
    (row,) = doc["model_interactions"]
    assert (row["cell"], row["models"], row["blocks"], row["delta_difference"]) == (
        "two",
        [HAIKU, SONNET],
        5,
        1.0,
    )
    assert not row["real"]  # five blocks: the smallest sign-flip p is 2/32
    md = (tmp_path / "runs" / doc["compare_id"] / "compare.md").read_text()
    assert f"### On {SONNET}" in md and "Does the model change the answer?" in md
    # the gate takes one model's rows at a time, as for a run's report of several
    folder = str(tmp_path / "runs" / doc["compare_id"])
    refused = invoke(["gate", folder])
    assert refused.exit_code == 2 and f"holds 2 models ({HAIKU}, {SONNET})" in refused.output
    assert invoke(["gate", folder, "--model", "claude-opus-4-1"]).exit_code == 2
    gated = {
        m: orjson.loads(invoke(["gate", folder, "--model", m, "--json"]).stdout) for m in (HAIKU, SONNET)
    }
    effect = {m: next(f["effect"] for f in g["findings"] if f["subject"] == "two") for m, g in gated.items()}
    assert effect == {HAIKU: 1.0, SONNET: 0.0}

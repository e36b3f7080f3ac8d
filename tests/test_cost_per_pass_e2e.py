"""End to end, the real CLI against the sim: report.json's cost per pass is the sim's usage at the model's list
price over the passes, and an inconclusive gate prices the run that would decide (issue 40 items 4 and 6).

Every answer of the script reports the same usage, so a session costs (answered calls) × one call's price;
task ``good`` always passes, task ``bad`` always hits its pitfall."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest

from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import invoke

pytestmark = pytest.mark.e2e

USAGE = {
    "input_tokens": 2000,
    "output_tokens": 100,
    "cache_creation_input_tokens": 300,
    "cache_read_input_tokens": 500,
}
#: claude-sonnet-4-6 list prices, $ per million tokens: input, output, 5-minute cache write, cache read.
CALL = (2000 * 3.0 + 100 * 15.0 + 300 * 3.75 + 500 * 0.3) / 1e6


def test_cost_per_pass_is_the_sims_usage_at_list_price_over_the_passes(claude: Path, tmp_path: Path) -> None:
    ex = materialise_example(tmp_path / "ex")
    tasks = []
    for name in ("good", "bad"):
        path = tmp_path / f"{name}.toml"
        path.write_text(
            f'schema_version = 1\nid = "{name}"\nprompt = "COSTPASS-{name.upper()}: answer."\n'
            '[[pitfalls]]\nid = "p"\npattern = "BADWORD"\n'
        )
        tasks += ["--tasks", str(path)]
    script = script_from_data(
        {
            "usage": USAGE,
            "default": {"text": "fine"},
            "rules": [{"name": "bad", "where": "prompt", "contains": ["COSTPASS-BAD"], "text": "BADWORD"}],
        }
    )
    where = ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--claude-bin", str(claude)]
    args = ["ab", *tasks, "--repeats", "2", "--max-turns", "3", "--out", str(tmp_path / "runs")]
    with SimServer(script) as sim:
        env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": sim.base_url}
        res = invoke([*args, *where, "--work-dir", str(tmp_path / "envs"), "--report", "now"], env=env)
        calls = [r for r in sim.requests() if r.is_messages and r.status == 200]
    (run,) = (tmp_path / "runs").iterdir()
    results = [orjson.loads(p.read_bytes()) for p in sorted((run / "results").glob("*.json"))]
    assert len(results) == 8 and all(r["complete"] and not r["flags"] for r in results), res.stderr[-3000:]
    assert sum(r["wire"]["answered"] for r in results) == len(calls)  # every answered call crossed the wire
    report = orjson.loads((run / "report.json").read_bytes())
    for cell in report["cells"]:
        mine = [r for r in results if r["cell"] == cell["cell"]]
        spent = sum(r["wire"]["answered"] for r in mine) * CALL
        passes = sum(1 for r in mine if r["task"] == "good")
        got = cell["cost_per_pass"]
        assert (got["passes"], got["sessions"]) == (passes, 4)
        assert math.isclose(got["value"], spent / passes, rel_tol=1e-6), (got, spent, passes)
        assert got["ci_low"] is not None and got["ci_low"] <= got["value"]
        assert got["ci_high"] is None or got["value"] <= got["ci_high"]  # None: a resample without a pass
    code, out = invoke(["gate", str(run), "--json"]).shown
    gate = orjson.loads(out)
    assert code == 4 and gate["outcome"] == "inconclusive", out
    need = gate["needed"]
    assert need["sessions"] == need["repeats"] * 2 * 2  # tasks × cells
    per_session = report["run"]["spend_usd"] / report["n"]["complete"]
    assert math.isclose(need["cost_usd"], need["sessions"] * per_session)
    assert f"{need['sessions']} sessions" in gate["headline"]

"""End-to-end: `ablate compare --executor claude-code` runs the real pinned CLI in variant cells, one sweep.

One small run (2 arms × 1 task × 5 repeats = 10 sessions): the arms replace the user CLAUDE.md of the example
setup; the sim follows the rule only when it reaches the model twice, so the duplicated arm must win every
block, and each session must have loaded its own arm's bytes. The free probe runs first (probe.json in the run
folder): each arm's cell must show its own file to the model.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import ABLATE

pytestmark = pytest.mark.e2e


RULES = """# Rules for this machine

Be brief.

## Tools

- RULE-UV: use uv for Python dependencies, never pip.
"""

SCRIPT = {
    "usage": {"input_tokens": 1000, "output_tokens": 10},
    "default": {"text": "Run `pip install requests`."},
    "rules": [
        {
            "name": "rule-twice",
            "where": "request",
            "regex": "RULE-UV.*RULE-UV",
            "text": "Run `uv add requests`, as the rules say.",
        }
    ],
}


def test_claude_code_executor_runs_arms_as_variant_cells(claude: Path, tmp_path: Path) -> None:
    example = materialise_example(tmp_path / "example")
    md = tmp_path / "rules.md"
    md.write_text(RULES)
    task = tmp_path / "dep.toml"
    task.write_text(
        'schema_version = 1\nid = "dep"\nprompt = "Add the requests library."\n'
        '[[pitfalls]]\nid = "pip"\npattern = "pip install"\n'
    )
    out = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env.update({"HOME": str(example.home), "ANTHROPIC_API_KEY": "sk-test"})
    with SimServer(script_from_data(SCRIPT)) as sim:
        proc = subprocess.run(
            [
                ABLATE,
                "compare",
                f"one={md}",
                f"two={md}@duplicate:Tools",
                "--tasks",
                str(task),
                "--config-dir",
                str(example.config_dir),
                "--repo",
                str(example.repo),
                "--claude-bin",
                str(claude),
                "--work-dir",
                str(tmp_path / "envs"),
                "--max-turns",
                "2",
                "--jobs",
                "2",
                "--seed",
                "4",
                "--out",
                str(out),
                "--yes",
                "--json",
            ],
            env={**env, "ANTHROPIC_BASE_URL": sim.base_url},
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr
    doc = orjson.loads(proc.stdout)
    assert doc["executor"] == "claude-code" and doc["layer"] == "user-claude-md"
    assert doc["excluded"]["count"] == 0
    rates = {r["arm"]: (r["passed"], r["n"]) for r in doc["arm_rates"] if r["task"] is None}
    assert rates == {"one": (0, 5), "two": (5, 5)}
    pooled = next(c for c in doc["contrasts"] if c["task"] is None and c["metric"] == "pitfall_free")
    assert (pooled["a"], pooled["b"], pooled["improved"], pooled["regressed"]) == ("one", "two", 5, 0)
    # every session loaded its own arm's bytes as the user CLAUDE.md (read back from the run folder)
    folder = out / doc["compare_id"]
    run = folder / doc["execution"]["run_folder"]
    fps = {a["name"]: a["fingerprint"] for a in doc["arms"]}
    results = [orjson.loads(p.read_bytes()) for p in sorted((run / "results").glob("*.json"))]
    assert len(results) == 10
    for r in results:
        loaded = {Path(f["path"]).name + ":" + f["type"] for f in r["session"]["instruction_files"]}
        assert "CLAUDE.md:User" in loaded, r["item"]
    check = doc["execution"]["cell_check"]
    assert check["verified"], check
    assert {n: r["built"] for n, r in check["arms"].items()} == {
        n: r["expected"] for n, r in check["arms"].items()
    }
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    assert sorted(c["id"] for c in manifest["cells"]) == ["one", "two"]
    # no CLI start wasted: one per session, one per probed cell, the untouched setup's fidelity session, and
    # (this home's cache being empty) the probe's baseline and `claude --version` once each
    starts = {"sessions": 10, "probe": 2, "fidelity": 1, "baseline": 1, "version": 1}
    assert manifest["cli_starts"] == {"total": sum(starts.values()), **starts}
    # one sweep in the compare plan's order: the runner's plan is the very same (item, order) list
    mine = [orjson.loads(line) for line in (folder / "plan.jsonl").read_bytes().splitlines()]
    ran = [orjson.loads(line) for line in (run / "plan.jsonl").read_bytes().splitlines()]
    assert [(p["item"], p["order"]) for p in mine] == [(p["item"], p["order"]) for p in ran]
    # probed first, for free: each arm's cell carried its arm's file to the model and nothing of the setup's
    probe = orjson.loads((run / "probe.json").read_bytes())
    assert probe["ok"] is True, probe
    assert {c["id"]: c["verdict"] for c in probe["cells"]} == {"one": "faithful", "two": "faithful"}
    for c in probe["cells"]:
        assert c["layers"]["user-claude-md"]["status"] == "ok", c["layers"]["user-claude-md"]
        assert "of the replacement seen" in c["layers"]["user-claude-md"]["evidence"]
    assert "probe: OK: 2 cells (2 faithful)" in proc.stderr
    assert doc["execution"]["probe"] == {
        "file": f"{doc['execution']['run_folder']}/probe.json",
        "ok": True,
        "words": "Probe: every cell as expected; shadow fidelity equal; cells: one faithful, two faithful.",
    }
    assert "## Probe" in (folder / "compare.md").read_text()
    arm_files = {n: (folder / "arms" / f"{n}.md").read_bytes() for n in fps}
    assert arm_files["two"].count(b"RULE-UV") == 2 and arm_files["one"] == RULES.encode()

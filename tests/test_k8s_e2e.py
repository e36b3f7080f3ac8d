"""End to end: the generated Kubernetes Jobs' container commands, run exactly as written in the manifests
(one process per index, JOB_COMPLETION_INDEX set), against ablate.sim with the real pinned CLI; the merged
report equals a one-machine run of the same plan, item for item.

The liberties taken: the one a volume mount takes (``$ABLATE_RUNS``, ``/runs`` in the pod, points at a
temporary folder), the Secret's value is the test's fake key, the plan Job's probe is the one CLI start per
cell of ``ablate probe`` (the runs start none of their own) and the shards write no report of their own
(``ABLATE_REPORT=none``, as a pod's env may say): the merge Job's report of them all is the one compared.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from ablate.folder.layout import RunFolder
from ablate.grade.record import read_grade
from ablate.setup.examples import ExampleSetup, materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import BIN

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parent.parent
USAGE = {"input_tokens": 1000, "output_tokens": 10}


def _container(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    container: dict[str, Any] = doc["spec"]["template"]["spec"]["containers"][0]
    return container


def _env(container: dict[str, Any], base: dict[str, str], runs: Path, **extra: str) -> dict[str, str]:
    env = dict(base)
    for e in container["env"]:
        if "value" in e:
            env[e["name"]] = e["value"]
        else:
            assert e["valueFrom"]["secretKeyRef"]["name"] == "ablate-anthropic"
            env[e["name"]] = "sk-test"  # what the Secret would hold
    env["ABLATE_RUNS"] = str(runs)  # the volume's mount
    env.update(extra)
    return env


def _sh(container: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = container["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def _items(folder: Path) -> dict[str, tuple[Any, ...]]:
    out = {}
    for p in sorted((folder / "results").glob("*.json")):
        r = orjson.loads(p.read_bytes())
        out[p.stem] = (
            r["task"],
            r["cell"],
            r["repeat"],
            r["status"],
            r["turns"],
            r["pitfall_hits"],
            r["cost_usd"],
        )
    return out


def _comparisons(folder: Path) -> list[tuple[Any, ...]]:
    data = orjson.loads((folder / "report.json").read_bytes())
    return [
        (c["cell"], c["metric"], c["task"], c["delta"], c["p"], c["real"], c["n_pairs"])
        for c in data["comparisons"]
    ]


def _grades(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Each item's check grades: attempt, verdict, counts, every check's result, the files changed."""
    run = RunFolder(folder)
    out: dict[str, list[tuple[Any, ...]]] = {}
    for item in _items(folder):
        grade = read_grade(run, item)
        out[item] = [
            (key, g.attempt, g.source, g.passed, g.n_passed, g.n_checks,
             [r.model_dump(mode="json") for r in g.results], g.changed)
            for key, g in sorted((grade.checks if grade else {}).items())
        ]  # fmt: skip
    return out


@pytest.fixture
def example(tmp_path: Path) -> ExampleSetup:
    return materialise_example(tmp_path / "example")


# 12 sessions (probe, 2 shards, one machine): ~45 s of CPU, much more wall time on a busy host
@pytest.mark.timeout(900)
def test_the_indexed_job_commands_reproduce_a_one_machine_run(
    claude: Path, example: ExampleSetup, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    # a task with [[checks]]: `ablate merge` carries each shard's grades/ over, so the merged report has the
    # same checks_passed rows as the one-machine run
    shutil.copy(REPO_ROOT / "tasks" / "typed-farewell.toml", tasks)
    out = tmp_path / "k8s"
    gen = subprocess.run(
        [str(BIN / "ablate"), "ci", "init", "k8s", "--shards", "2", "--image", "ablate:test", "--cells", "binary",
         "--repeats", "2", "--repo", str(example.repo), "--config-dir", str(example.config_dir),
         "--tasks", str(tasks), "--out", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    runs = tmp_path / "runs"
    runs.mkdir()
    script = script_from_data({"default": {"text": "Done.", "usage": USAGE}, "usage": USAGE, "rules": []})
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    base["ABLATE_PROBE"] = "0"  # no probe-first step: one CLI start per cell, not under test here
    base.update(
        HOME=str(example.home),
        PATH=f"{BIN}:{os.environ['PATH']}",
        ABLATE_CLAUDE_BIN=str(claude),
        ABLATE_WORK_DIR=str(tmp_path / "envs"),
    )
    with SimServer(script, seed=0) as sim:
        base["ANTHROPIC_BASE_URL"] = sim.base_url
        plan = _container(out / "plan.yaml")
        done = _sh(plan, _env(plan, base, runs))
        assert done.returncode == 0, done.stdout + done.stderr
        assert orjson.loads((runs / "probe.json").read_bytes())["ok"] is True
        (planned,) = (runs / "plan").iterdir()
        one = tmp_path / "one" / planned.name
        shutil.copytree(planned, one)  # the same plan, for one machine

        shard = _container(out / "shards.yaml")
        for index in range(2):
            done = _sh(shard, _env(shard, base, runs, JOB_COMPLETION_INDEX=str(index), ABLATE_REPORT="none"))
            assert done.returncode == 0, f"index {index}: {done.stdout}{done.stderr}"
        shards = sorted(p.name for p in (runs / "shards").iterdir())
        assert shards == [f"{planned.name}-shard-1-of-2", f"{planned.name}-shard-2-of-2"]

        merge = _container(out / "merge.yaml")
        # 2 blocks cannot see a 20-point change: the gate is inconclusive (exit 4), which fails the Job unless
        # its env says to pass it (the shell of that rule: test_inference_gate)
        assert {"name": "ABLATE_GATE_INCONCLUSIVE", "value": "fail"} in merge["env"]
        done = _sh(merge, _env(merge, base, runs, ABLATE_GATE_INCONCLUSIVE="pass"))
        assert done.returncode == 0, done.stdout + done.stderr
        assert (
            "INCONCLUSIVE — this run cannot detect" in done.stdout and "passed as configured" in done.stdout
        )
        assert "ablate gate: INCONCLUSIVE" in (runs / "merged" / "gate.md").read_text()

        whole = subprocess.run(
            [str(BIN / "ablate"), "run", "--plan", str(one), "--config-dir", str(example.config_dir),
             "--repo", str(example.repo)],
            env={**base, "ANTHROPIC_API_KEY": "sk-test"}, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert whole.returncode == 0, whole.stderr  # its report is written before it returns (--report now)

    merged = runs / "merged"
    assert len(_items(merged)) == 4
    assert _items(merged) == _items(one)
    grades = _grades(merged)
    assert len(grades) == 4 and all(g for g in grades.values())  # every item graded by its checks
    assert grades == _grades(one)
    assert _comparisons(merged) == _comparisons(one)
    assert any(c[1] == "checks_passed" for c in _comparisons(merged))
    for folder in (runs / "shards", merged):  # the Secret's value reaches no run folder
        assert "sk-test" not in "".join(
            p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()
        )

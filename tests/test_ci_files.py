"""`ablate ci init github|k8s`: the generated files validate offline against the GitHub workflow and
Kubernetes schemas, read back as the data they were built from, pin versions and hold no secret value."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
import yaml

from ablate import PINNED_CLAUDE_VERSION, __version__
from ablate.ci.github import GithubOptions, workflow
from ablate.ci.k8s import K8sOptions, manifests
from ablate.ci.yamltext import dump
from tests.helpers_cli import BIN, invoke

CHECK_JSONSCHEMA = str(BIN / "check-jsonschema")
#: Kubernetes 1.33's strict schema of a batch/v1 Job, with only the definitions it reaches (tests/data/k8s/README.md)
JOB_SCHEMA = Path(__file__).parent / "data" / "k8s" / "job-batch-v1-strict-1.33.json"
OFFLINE = {**os.environ, "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}


def _validate_workflow(path: Path) -> None:
    proc = subprocess.run(
        [CHECK_JSONSCHEMA, "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        env=OFFLINE,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--shards", "3"],
        ["--compare", "CLAUDE.md", "--layer", "repo-claude-md", "--require", "new better by 5pts"],
        ["--cells", "binary", "--config-dir", "setup/claude", "--require", "C11 not worse"],
    ],
)
def test_the_workflow_validates_and_reads_back(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / ".github" / "workflows" / "ablate.yml"
    code, text = invoke(["ci", "init", "github", *args, "--out", str(out)]).shown
    assert code == 0, text
    _validate_workflow(out)
    data = yaml.safe_load(out.read_text())
    assert data["env"]["ABLATE_INSTALL"] == f"ablate-claude=={__version__}"
    assert data["env"]["CLAUDE_CODE_VERSION"] == PINNED_CLAUDE_VERSION
    assert data["on"]["pull_request"]["paths"]  # PyYAML (YAML 1.1) reads the quoted "on" as a string
    jobs = data["jobs"]
    assert next(iter(jobs)) == "probe" and "needs" not in jobs["probe"]
    assert all(j.get("needs") for name, j in jobs.items() if name != "probe")
    _no_secret_outside_session_steps(jobs)


def _no_secret_outside_session_steps(jobs: dict[str, Any]) -> None:
    for job in jobs.values():
        assert "secrets." not in str(job.get("env", {}))
        for step in job["steps"]:
            text = str(step)
            if "secrets." in text:
                assert "ablate run" in step["run"] or "ablate compare" in step["run"]
                assert step["env"]["ANTHROPIC_API_KEY"].startswith("${{ secrets.")
                assert "rm -rf" in step["run"]  # a run folder holding the key is never uploaded


def test_the_run_workflow_has_plan_matrix_and_merge(tmp_path: Path) -> None:
    data = workflow(GithubOptions(shards=4, paths=("docs/runbooks/**",)))
    jobs = data["jobs"]
    assert jobs["plan"]["needs"] == "probe"
    assert jobs["shard"]["strategy"]["matrix"]["shard"] == [1, 2, 3, 4]
    run = next(s["run"] for s in jobs["shard"]["steps"] if "ablate run" in s.get("run", ""))
    assert '--shard "${{ matrix.shard }}/4"' in run
    merge = "\n".join(s.get("run", "") for s in jobs["merge"]["steps"])
    for command in ("ablate merge", "ablate report", "ablate gate", "gh pr comment", "GITHUB_STEP_SUMMARY"):
        assert command in merge
    assert jobs["merge"]["permissions"]["pull-requests"] == "write"
    assert data["permissions"] == {"contents": "read"}


def test_trigger_paths_come_from_the_stripped_layers(tmp_path: Path) -> None:
    out = tmp_path / "wf.yml"
    invoke(["ci", "init", "github", "--cells", "layered", "--tasks", "evals/tasks", "--out", str(out)])
    paths = yaml.safe_load(out.read_text())["on"]["pull_request"]["paths"]
    assert "docs/runbooks/**" in paths and "MEMORY.md" in paths and "evals/tasks/**" in paths
    assert "CLAUDE.md" not in paths  # the layered set strips the user's CLAUDE.md, not the repo's


def test_bad_github_options_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "wf.yml"
    assert invoke(["ci", "init", "github", "--tasks", "/abs", "--out", str(out)]).shown[0] == 2
    assert invoke(["ci", "init", "github", "--shards", "300", "--out", str(out)]).shown[0] == 2
    assert (
        invoke(["ci", "init", "github", "--compare", "CLAUDE.md", "--shards", "3", "--out", str(out)]).shown[
            0
        ]
        == 2
    )
    assert invoke(["ci", "init", "github", "--install", "ablate", "--out", str(out)]).shown[0] == 2
    assert invoke(["ci", "init", "github", "--require", "C1 hepls", "--out", str(out)]).shown[0] == 2
    assert not out.exists()  # nothing written on bad input
    assert invoke(["ci", "init", "github", "--out", str(out)]).shown[0] == 0
    code, text = invoke(["ci", "init", "github", "--out", str(out)]).shown
    assert code == 2 and "already exists" in text
    assert invoke(["ci", "init", "github", "--out", str(out), "--force"]).shown[0] == 0


def test_the_k8s_manifests_validate_against_the_kubernetes_schemas(tmp_path: Path) -> None:
    code, text = invoke(
        ["ci", "init", "k8s", "--shards", "3", "--image", "ghcr.io/team/ablate:0.1.0", "--out", str(tmp_path)]
    ).shown
    assert code == 0, text
    job = jsonschema.Draft202012Validator(orjson.loads(JOB_SCHEMA.read_bytes()))
    for name in ("plan.yaml", "shards.yaml", "merge.yaml"):
        doc = yaml.safe_load((tmp_path / name).read_text())
        assert doc["apiVersion"] == "batch/v1" and doc["kind"] == "Job"
        job.validate(doc)
        typo = {**doc, "spec": {**doc["spec"], "completion": 3}}  # strict: a misspelt field is refused
        assert not job.is_valid(typo)
    shards = yaml.safe_load((tmp_path / "shards.yaml").read_text())
    spec = shards["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 3
    container = spec["template"]["spec"]["containers"][0]
    assert "JOB_COMPLETION_INDEX" in container["command"][-1]
    key = next(e for e in container["env"] if e["name"] == "ANTHROPIC_API_KEY")
    assert key == {
        "name": "ANTHROPIC_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "ablate-anthropic", "key": "api-key"}},
    }
    claim = spec["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert claim == "ablate-runs"


def test_bad_k8s_options_exit_2(tmp_path: Path) -> None:
    assert invoke(["ci", "init", "k8s", "--image", "ablate", "--out", str(tmp_path)]).shown[0] == 2
    assert invoke(["ci", "init", "k8s", "--volume", "Bad_Name", "--out", str(tmp_path)]).shown[0] == 2
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "data",
    [
        {
            "a": "on",
            "b": ["yes", "No", "~", "null", "1.5", "-x", "#c", "a: b", "${{ x }}"],
            "c": {"on": True},
        },
        {
            "s": "line one\n  indented\nlast\n",
            "t": "no newline\nat end",
            "u": " leading\nspace",
            "v": "tab\tx\ny",
        },
        {"empty": {}, "none": [], "nested": [[1, [2]], {"k": [{"x": None}]}], "n": -3, "f": 0.25},
        {"trailing": "a  \nb\n", "blank": "a\n\nb\n", "double": "a\n\n", "unicode": "→ ✓ é"},
    ],
)
def test_the_yaml_writer_round_trips(data: dict[str, Any]) -> None:
    assert yaml.safe_load(dump(data)) == data
    manifests(K8sOptions(image="x:1"))  # builds without error


@pytest.mark.parametrize("compare", [None, "CLAUDE.md"])
def test_every_generated_shell_script_parses(compare: str | None) -> None:
    jobs = workflow(GithubOptions(shards=1, compare=compare, require=("new better",)))["jobs"]
    scripts = [("bash", s["run"]) for j in jobs.values() for s in j["steps"] if "run" in s]
    for m in manifests(K8sOptions()).values():
        command = m["spec"]["template"]["spec"]["containers"][0]["command"]
        scripts.append(("sh", command[-1]))  # the pods run /bin/sh -c
    for shell, script in scripts:
        proc = subprocess.run([shell, "-n"], input=script, capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stderr}"

"""End-to-end: `ablate run` with the real pinned CLI against the scripted sim endpoint and the example setup."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.proc import tagged_pids
from ablate.setup.examples import ExampleSetup, materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import ABLATE

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS = REPO_ROOT / "tasks"
TWO_TASKS = [TASKS / "greet-exclaim.toml", TASKS / "deploy-command.toml"]
FIXED_USAGE = {"input_tokens": 1000, "output_tokens": 10}


def script(default: dict[str, Any] | None = None, rules: list[dict[str, Any]] | None = None) -> Any:
    """A trivially short script: every request gets one short text answer with fixed usage."""
    return script_from_data(
        {
            "default": default or {"text": "OK.", "usage": FIXED_USAGE},
            "usage": FIXED_USAGE,
            "rules": rules or [],
        }
    )


@pytest.fixture
def example(tmp_path: Path) -> ExampleSetup:
    return materialise_example(tmp_path / "example")


@pytest.fixture
def sim_env(claude: Path, example: ExampleSetup, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment `ablate` runs with (the sim URL is added per test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env["ABLATE_PROBE"] = "0"  # no probe-first step: one CLI start per cell, not under test here
    env.update(
        {
            "HOME": str(example.home),
            "ABLATE_CLAUDE_BIN": str(claude),
            "ANTHROPIC_API_KEY": "sk-test",
            "ABLATE_WORK_DIR": str(tmp_path / "envs"),
        }
    )
    yield env


def ablate(
    args: list[str], env: dict[str, str], sim: SimServer, example: ExampleSetup, *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    full = [ABLATE, *args]
    if args[0] in ("run", "ab", "plan") and "--resume" not in args and "--plan" not in args:
        full += ["--config-dir", str(example.config_dir), "--repo", str(example.repo)]
    if args[0] in ("run", "ab"):
        full += ["--report", "none"]  # no test here reads a report (~4 CPU-s each): the runner is under test
    proc = subprocess.run(
        full, env={**env, "ANTHROPIC_BASE_URL": sim.base_url}, capture_output=True, text=True, timeout=600
    )
    if check and proc.returncode not in (0, 3):
        raise AssertionError(f"ablate {args[0]} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def task_args(paths: list[Path]) -> list[str]:
    return [a for p in paths for a in ("--tasks", str(p))]


def results(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: orjson.loads(p.read_bytes()) for p in sorted((folder / "results").glob("*.json"))}


def only_run(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


def test_layered_run_of_two_tasks_completes(sim_env: dict[str, str], example: ExampleSetup, tmp_path: Path):
    out = tmp_path / "runs"
    t0 = time.monotonic()
    with SimServer(script()) as sim:
        proc = ablate(
            [
                "run",
                *task_args(TWO_TASKS),
                "--cells",
                "layered",
                "--repeats",
                "1",
                "--jobs",
                "4",
                "--max-turns",
                "3",
                "--out",
                str(out),
                "--seed",
                "11",
                "--json",
            ],
            sim_env,
            sim,
            example,
        )
    summary = orjson.loads(proc.stdout)
    assert summary["outcome"] == "finished", proc.stderr
    assert (summary["total"], summary["done"], summary["failed"]) == (24, 24, [])
    assert summary["envs_built"] == 4  # one checkout per concurrent session; cells are retargeted onto them
    folder = only_run(out)
    res = results(folder)
    assert len(res) == 24
    assert {r["status"] for r in res.values()} == {"completed"}
    for r in res.values():
        assert (folder / r["transcript"]).is_file()
        assert (folder / r["stdout"]).is_file()
        # every session saw exactly its own cell's layers, whichever environment it was retargeted onto
        loaded = {Path(f["path"]).name + ":" + f["type"] for f in r["session"]["instruction_files"]}
        cell = r["cell"]
        assert ("CLAUDE.md:User" in loaded) == (cell not in ("C1", "C11")), (r["item"], loaded)
        assert ("axioms.md:User" in loaded) == (cell not in ("C1", "C2", "C11")), (r["item"], loaded)
        assert ("lessons.md:User" in loaded) == (cell not in ("C1", "C3", "C11")), (r["item"], loaded)
        assert ("MEMORY.md:AutoMem" in loaded) == (cell not in ("C5", "C11")), (r["item"], loaded)
        assert "CLAUDE.md:Project" in loaded, r["item"]
    # every task ran all 12 cells; the environments are gone, and so are the worktrees
    assert not any((tmp_path / "envs").rglob("wt"))
    wts = subprocess.run(["git", "worktree", "list"], cwd=example.repo, capture_output=True, text=True).stdout
    assert len(wts.strip().splitlines()) == 1
    print(f"24-session layered run: {time.monotonic() - t0:.1f} s")


def test_kill_9_then_resume_loses_nothing_and_reruns_nothing(
    sim_env: dict[str, str], example: ExampleSetup, tmp_path: Path
):
    out = tmp_path / "runs"
    slow = script(default={"text": "OK.", "usage": FIXED_USAGE, "delay_s": 2.0})
    with SimServer(slow) as sim:
        args = [
            ABLATE,
            "ab",
            *task_args(TWO_TASKS[1:]),
            "--repeats",
            "2",  # four items, two at a time: the first two done before the kill, the rest left for the resume
            "--jobs",
            "2",
            "--max-turns",
            "3",
            "--out",
            str(out),
            "--seed",
            "5",
            "--config-dir",
            str(example.config_dir),
            "--repo",
            str(example.repo),
            "--report",
            "none",  # killed before it ends; the resume builds none either
        ]
        proc = subprocess.Popen(
            args,
            env={**sim_env, "ANTHROPIC_BASE_URL": sim.base_url},
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "first.err").open("w"),
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and any(out.iterdir()) and len(list(only_run(out).glob("results/*.json"))) >= 2:
                break
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        folder = only_run(out)
        run_id = orjson.loads((folder / "manifest.json").read_bytes())["run_id"]
        # the watchdog kills the dead runner's sessions: none finishes later behind the resume's back
        # (sessions are mid-answer: each answer takes 2 s, far longer than the watchdog needs)
        deadline = time.monotonic() + 0.5
        while tagged_pids(f"{run_id}/") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tagged_pids(f"{run_id}/") == []
        stdout_files = sorted(p.name for p in (folder / "stdout").iterdir())
        time.sleep(3.0)  # longer than a session's answer takes: a survivor would write its stdout now
        assert sorted(p.name for p in (folder / "stdout").iterdir()) == stdout_files
        before = results(folder)
        assert 2 <= len(before) < 4
        proc2 = ablate(["run", "--resume", str(folder), "--jobs", "2", "--json"], sim_env, sim, example)
    summary = orjson.loads(proc2.stdout)
    assert summary["outcome"] == "finished", proc2.stderr
    assert summary["skipped"] == len(before)
    assert summary["launched"] == 4 - len(before)
    after = results(folder)
    assert len(after) == 4
    assert set(before) < set(after)
    assert list((tmp_path / "envs").iterdir()) == []  # the crashed run's environments are gone too
    for item, r in before.items():
        assert after[item] == r  # nothing complete was re-run or replaced
    for item in set(after) - set(before):
        plan = {p["item"]: p for p in map(orjson.loads, (folder / "plan.jsonl").read_bytes().splitlines())}
        sids = [a["session_id"] for a in plan[item]["attempts"]]
        assert len(set(sids)) == len(sids)  # every attempt had its own session id
        assert after[item]["session_id"] == sids[-1]


def test_429_storm_pauses_and_recovers_without_a_stub(
    sim_env: dict[str, str], example: ExampleSetup, tmp_path: Path
):
    storm = script(rules=[{"name": "storm", "error": {"status": 429}, "times": 6, "times_per": "server"}])
    out = tmp_path / "runs"
    with SimServer(storm) as sim:
        proc = ablate(
            [
                "ab",
                "--tasks",
                str(TWO_TASKS[1]),
                "--repeats",
                "1",  # two sessions: the storm's six 429s fall on both
                "--jobs",
                "2",
                "--max-turns",
                "3",
                "--out",
                str(out),
                "--backoff",
                "1",
                "--json",
            ],
            sim_env,
            sim,
            example,
        )
    summary = orjson.loads(proc.stdout)
    assert summary["outcome"] == "finished", proc.stderr
    assert summary["rate_limited"] >= 1
    assert summary["done"] == 2
    res = results(only_run(out))
    assert {r["status"] for r in res.values()} == {"completed"}
    assert len(res) == 2  # one result per item, none of them a 429 stub
    assert "rate-limited: pausing every launch" in proc.stderr  # the user was told why it waited


def test_timeout_kills_the_tree_and_the_transcript_still_mines(
    sim_env: dict[str, str], example: ExampleSetup, tmp_path: Path
):
    hang = script(
        rules=[{"name": "hang", "where": "prompt", "contains": ["deploy"], "text": "late", "delay_s": 60}]
    )
    out = tmp_path / "runs"
    with SimServer(hang) as sim:
        proc = ablate(
            [
                "ab",
                "--tasks",
                str(TWO_TASKS[1]),
                "--jobs",
                "2",
                "--max-turns",
                "3",
                "--timeout",
                # the sim never answers (60 s); the CLI has written the prompt to its transcript well before
                # this, even with its start-up slowed by other tests running beside it
                "15",
                "--out",
                str(out),
                "--json",
            ],
            sim_env,
            sim,
            example,
        )
    summary = orjson.loads(proc.stdout)
    assert summary["outcome"] == "finished", proc.stderr
    folder = only_run(out)
    for r in results(folder).values():
        assert r["status"] == "timeout"
        assert r["exit"]["timed_out"] is True
        assert r["transcript"] and (folder / r["transcript"]).is_file()
        assert r["session"]["status"] in ("killed", "no_transcript")
        assert r["session"]["prompts"] >= 1


def test_budget_stops_launching(sim_env: dict[str, str], example: ExampleSetup, tmp_path: Path):
    out = tmp_path / "runs"
    with SimServer(script()) as sim:
        proc = ablate(
            [
                "ab",
                *task_args(TWO_TASKS),
                "--jobs",
                "1",
                "--max-turns",
                "3",
                "--budget-usd",
                "0.005",
                "--out",
                str(out),
                "--json",
            ],
            sim_env,
            sim,
            example,
        )
    assert proc.returncode == 3
    summary = orjson.loads(proc.stdout)
    assert summary["outcome"] == "budget"
    assert summary["launched"] == 2  # 1000 in + 10 out at sonnet list price = $0.00315 a session
    assert len(summary["pending"]) == 2
    assert "plan: 4 sessions" in proc.stderr


def test_shards_then_merge_equal_the_single_machine_run(
    sim_env: dict[str, str], example: ExampleSetup, tmp_path: Path
):
    common = [
        *task_args(TWO_TASKS),
        "--cells",
        "binary",
        "--repeats",
        "1",  # four items, two per shard: enough to show the merge equals the single run
        "--max-turns",
        "3",
        "--seed",
        "42",
    ]
    with SimServer(script()) as sim:
        ablate(["run", *common, "--jobs", "2", "--out", str(tmp_path / "single")], sim_env, sim, example)
        ablate(["plan", *common, "--out", str(tmp_path / "planned")], sim_env, sim, example)
        plan_dir = only_run(tmp_path / "planned")
        for k in (1, 2):
            ablate(
                [
                    "run",
                    "--plan",
                    str(plan_dir),
                    "--shard",
                    f"{k}/2",
                    "--jobs",
                    "2",
                    "--out",
                    str(tmp_path / "shards"),
                ],
                sim_env,
                sim,
                example,
            )
        shards = sorted((tmp_path / "shards").iterdir())
        assert [s.name.rsplit("-shard-", 1)[1] for s in shards] == ["1-of-2", "2-of-2"]
        ablate(["merge", *map(str, shards), "--out", str(tmp_path / "merged")], sim_env, sim, example)
    single, merged = only_run(tmp_path / "single"), tmp_path / "merged"
    ms = orjson.loads((single / "manifest.json").read_bytes())
    mm = orjson.loads((merged / "manifest.json").read_bytes())
    assert ms["plan_sha256"] == mm["plan_sha256"]
    assert mm["shard"] is None

    def shape(folder: Path) -> dict[str, tuple[Any, ...]]:
        return {i: (r["status"], r["cost_usd"], r["turns"], r["order"]) for i, r in results(folder).items()}

    assert shape(single) == shape(merged)
    assert len(shape(merged)) == 4

"""The runner against a fake CLI and folder environments: scheduling, results, resume, rate limits, budget."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

from ablate.core.backoff import BackoffPolicy
from ablate.core.claude import ClaudeBinary
from ablate.core.errors import OutputExists, RunFolderError
from ablate.core.fsutil import sha256_file
from ablate.folder.layout import RunFolder, read_manifest
from ablate.folder.result import COMPLETE_STATUSES, ItemResult, iter_results, read_result, should_replace
from ablate.grade.hook import GradingHook
from ablate.run.create import compatibility_problems, create_run, load_run_tasks, open_run
from ablate.run.scheduler import Progress, Runner, RunOptions, RunSummary
from ablate.setup.cells import load_cell_set
from ablate.setup.layers import load_catalog
from ablate.setup.tasks import Task, load_task
from tests.runner_support import FakeBackend, base_env, write_fake_claude

FAST = RunOptions(jobs=3, backoff=BackoffPolicy(first_s=0.3, max_s=1.0), retry_delay_s=0.05, grace_s=5.0)


def make_task(dir_: Path, tid: str, prompt: str, **extra: str) -> Task:
    dir_.mkdir(parents=True, exist_ok=True)
    lines = [f'id = "{tid}"', f'prompt = "{prompt}"']
    lines += [f"{k} = {v}" for k, v in extra.items()]
    lines += ["[[pitfalls]]", 'id = "said-done"', 'pattern = "done"']
    path = dir_ / f"{tid}.toml"
    path.write_text("\n".join(lines) + "\n")
    return load_task(path)


class Rig:
    """A planned run over fake parts; ``run()`` executes it (again) and returns the summary."""

    def __init__(
        self, tmp: Path, prompts: dict[str, str], *, cells: str = "binary", repeats: int = 1, **env: str
    ):
        self.tmp = tmp
        self.claude_path = write_fake_claude(tmp / "claude")
        self.claude = ClaudeBinary(
            path=self.claude_path, version="2.1.332", sha256=sha256_file(self.claude_path)
        )
        tasks = [make_task(tmp / "tasks", tid, p) for tid, p in prompts.items()]
        cs = load_cell_set(cells, load_catalog())
        self.cells = list(cs.cells)
        self.folder, self.manifest = create_run(
            tmp / "runs",
            tasks=tasks,
            cell_set=cs.name,
            cells=self.cells,
            repeats=repeats,
            seed=7,
            model="claude-sonnet-4-6",
            max_turns=5,
            claude=self.claude,
            timeout_s=20,
        )
        self.backend = FakeBackend(tmp / "envs", base_env(tmp, **env))
        self.events: list[Progress] = []

    def runner(self, options: RunOptions = FAST) -> Runner:
        folder, manifest = open_run(self.folder.root)
        return Runner(
            folder,
            manifest,
            tasks={t.id: t for t in load_run_tasks(folder, manifest)},
            cells={c.id: c for c in self.cells},
            backend=self.backend,
            options=options,
            tree_hook=GradingHook(),
            claude=self.claude,
            on_progress=self.events.append,
        )

    def run(self, options: RunOptions = FAST) -> RunSummary:
        return self.runner(options).run()

    def result(self, item: str) -> dict[str, Any]:
        res = read_result(self.folder, item)
        assert res is not None, item
        return res.model_dump(mode="json")

    def results(self) -> dict[str, dict[str, Any]]:
        out = {}
        for p in sorted((self.folder.root / "results").glob("*.json")):
            out[p.stem] = orjson.loads(p.read_bytes())
        return out


# -- the result-replacement rule ------------------------------------------------------------------------


def _result(status: str, *, recovered: bool = False) -> ItemResult:
    return ItemResult.model_validate(
        {
            "item": "t__C0__r00",
            "task": "t",
            "cell": "C0",
            "repeat": 0,
            "order": 0,
            "attempt": 1,
            "session_id": "s",
            "status": status,
            "complete": status in COMPLETE_STATUSES,
            "recovery": {} if recovered else None,
        }
    )


@pytest.mark.parametrize(
    ("old", "new", "replace"),
    [
        (None, "completed", True),
        (None, "api_error", True),
        ("api_error", "completed", True),
        ("no_transcript", "timeout", True),
        ("api_error", "no_transcript", True),  # newer failure, same rank: newer evidence
        ("completed", "api_error", False),
        ("completed", "completed", False),  # the first complete outcome stands
        ("timeout", "completed", False),
        ("max_turns", "killed", False),
        (None, "rate_limited", False),  # never a result
        ("api_error", "rate_limited", False),
    ],
)
def test_result_replacement_rule(old: str | None, new: str, replace: bool) -> None:
    assert replace == should_replace(None if old is None else _result(old), _result(new))


def test_a_recovered_failure_never_replaces_a_failure_the_runner_observed() -> None:
    assert not should_replace(_result("api_error"), _result("killed", recovered=True))
    assert should_replace(_result("no_transcript"), _result("killed", recovered=True))
    assert should_replace(_result("api_error", recovered=True), _result("killed"))


# -- runs ---------------------------------------------------------------------------------------------


def test_run_completes_every_item_with_one_environment_per_cell(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"alpha": "say hi", "beta": "say bye"}, repeats=2, FAKE_AGENT="1", FAKE_COST="0.02")
    summary = rig.run(RunOptions(jobs=2))
    assert summary.outcome == "finished"
    assert (summary.total, summary.done, summary.failed, summary.pending) == (8, 8, [], [])
    assert summary.spend_usd == pytest.approx(0.16)
    results = rig.results()
    assert len(results) == 8
    for item, res in results.items():
        assert res["status"] == "completed"
        assert res["complete"] is True
        assert res["pitfall_hits"] == {"said-done": 1}
        sid = res["session_id"]
        assert res["transcript"] == f"transcripts/{item}.a1/{sid}.jsonl"
        tdir = rig.folder.root / "transcripts" / f"{item}.a1"
        assert (tdir / f"{sid}.jsonl").is_file()
        assert (tdir / sid / "subagents" / "agent-a1.jsonl").is_file()
        assert (tdir / sid / "subagents" / "agent-a1.meta.json").is_file()
        assert (rig.folder.root / "stdout" / f"{item}.a1.json").is_file()
    # one environment per concurrent session, reset between items, never rebuilt
    assert len(rig.backend.builds) == 2  # --jobs 2
    assert sorted(slot for _, slot in rig.backend.builds) == [0, 1]
    # every item runs on a fresh environment or on one prepared for it just before (a reset, or a retarget,
    # which the fake also counts as a reset): exactly one preparation per item not on a fresh one
    assert 8 - len(rig.backend.builds) <= rig.backend.resets <= 8
    assert rig.backend.teardowns == len(rig.backend.builds)
    plan = rig.folder.read_plan()
    assert all(len(p.attempts) == 1 and p.attempts[0].outcome == "completed" for p in plan)
    assert len({p.attempts[0].session_id for p in plan}) == 8
    manifest = read_manifest(rig.folder)
    assert manifest.sessions[-1].outcome == "finished"
    assert manifest.cells[0].fingerprints == {"fake": "C0"}
    assert rig.events[-1].phase == "finished"
    assert rig.events[-1].done == 8


def test_resume_skips_complete_items_and_reruns_failed_ones_with_a_new_session(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"good": "say hi", "bad": "FAIL500 please"})
    first = rig.run(RunOptions(jobs=2, max_attempts=1))
    assert first.outcome == "failed-items"
    assert sorted(first.failed) == ["bad__C0__r00", "bad__C11__r00"]
    good_before = {i: r["session_id"] for i, r in rig.results().items() if i.startswith("good")}
    bad_before = rig.result("bad__C0__r00")
    assert bad_before["status"] == "api_error"
    assert bad_before["complete"] is False

    second = rig.run(RunOptions(jobs=2, max_attempts=1))
    assert second.skipped == 2
    assert second.launched == 2  # only the failed ones
    assert {i: r["session_id"] for i, r in rig.results().items() if i.startswith("good")} == good_before
    bad_after = rig.result("bad__C0__r00")
    assert bad_after["attempt"] == 2
    assert bad_after["session_id"] != bad_before["session_id"]
    assert len(read_manifest(rig.folder).sessions) == 2


def test_transient_errors_are_retried_then_recorded_as_failed(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"bad": "FAIL500"}, cells="binary")
    summary = rig.run(RunOptions(jobs=2, max_attempts=2, retry_delay_s=0.01))
    assert summary.launched == 4
    assert summary.outcome == "failed-items"
    assert [a.outcome for a in rig.folder.read_plan()[0].attempts] == ["api_error", "api_error"]


def test_a_second_runner_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"slow": "SLEEP"})
    runner = rig.runner(RunOptions(jobs=2, grace_s=0.2))
    t = threading.Thread(target=runner.run)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while not any(e.running for e in rig.events) and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(RunFolderError, match="another `ablate run` is working on this run folder"):
            rig.run()
    finally:
        runner.request_stop(kill=True)
        t.join(30)
    assert not t.is_alive()


def test_stop_kills_after_the_grace_period_and_leaves_a_resumable_folder(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"slow": "SLEEP now"})
    runner = rig.runner(RunOptions(jobs=2, grace_s=0.3))
    threading.Timer(1.0, runner.request_stop).start()
    t0 = time.monotonic()
    summary = runner.run()
    assert time.monotonic() - t0 < 15
    assert summary.outcome == "interrupted"
    assert sorted(summary.pending) == ["slow__C0__r00", "slow__C11__r00"]
    assert rig.results() == {}
    assert [a.outcome for a in rig.folder.read_plan()[0].attempts] == ["interrupted"]
    assert read_manifest(rig.folder).sessions[-1].outcome == "interrupted"


def test_timeout_kills_the_session_and_is_recorded_as_such(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"slow": "SLEEP forever"})
    folder, manifest = open_run(rig.folder.root)
    from ablate.folder.layout import write_manifest

    write_manifest(folder, manifest.model_copy(update={"timeout_s": 1.0}))
    summary = rig.run()
    assert summary.outcome == "finished"
    res = rig.result("slow__C0__r00")
    assert res["status"] == "timeout"
    assert res["complete"] is True
    assert res["exit"]["timed_out"] is True
    assert res["session"]["status"] == "killed"  # the partial transcript still mines


def test_rate_limit_storm_pauses_the_pool_and_records_no_stub(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"alpha": "say hi", "beta": "say bye"}, FAKE_RL_CALLS="3")
    summary = rig.run()
    assert summary.outcome == "finished"
    assert 1 <= summary.rate_limited <= 4  # the fake's call counter is approximate under concurrency
    assert summary.done == 4
    assert all(r["status"] == "completed" for r in rig.results().values())
    outcomes = [a.outcome for p in rig.folder.read_plan() for a in p.attempts]
    assert outcomes.count("rate_limited") == summary.rate_limited
    assert any(e.phase == "paused" for e in rig.events)


def test_a_named_reset_time_is_honoured(tmp_path: Path) -> None:
    reset = int(time.time()) + 3
    rig = Rig(
        tmp_path,
        {"alpha": "say hi"},
        cells="binary",
        FAKE_RL_CALLS="1",
        FAKE_RL_MESSAGE=f"Claude AI usage limit reached|{reset}",
    )
    t0 = time.time()
    summary = rig.run(RunOptions(jobs=1, backoff=BackoffPolicy(first_s=0.1, max_s=0.2)))
    assert summary.outcome == "finished"
    assert summary.rate_limited == 1
    assert time.time() - t0 >= reset - t0 - 0.5  # waited for the reset, not for the 0.1 s backoff


def test_persistent_rate_limit_gives_up_and_stays_resumable(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"alpha": "say hi"}, FAKE_RL_CALLS="100")
    summary = rig.run(RunOptions(jobs=2, backoff=BackoffPolicy(first_s=0.05, max_s=0.1, max_pauses=2)))
    assert summary.outcome == "rate-limited"
    assert rig.results() == {}
    assert len(summary.pending) == 2


def test_budget_stops_launching(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"a": "x", "b": "y", "c": "z"}, FAKE_COST="0.05")
    summary = rig.run(RunOptions(jobs=1, budget_usd=0.1))
    assert summary.outcome == "budget"
    assert summary.launched == 2
    assert summary.spend_usd == pytest.approx(0.1)
    assert len(summary.pending) == 4
    # a resume with a larger budget goes on from the recorded spend
    more = rig.run(RunOptions(jobs=1, budget_usd=0.2))
    assert more.launched == 2
    assert more.spend_usd == pytest.approx(0.2)


def test_version_and_model_mismatch_are_reported(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"a": "x"})
    other = ClaudeBinary(path=rig.claude_path, version="2.1.400", sha256="0" * 64)
    problems = compatibility_problems(rig.manifest, other, "claude-opus-5-5")
    assert any("2.1.400" in p for p in problems)
    assert any("claude-opus-5-5" in p for p in problems)
    assert compatibility_problems(rig.manifest, rig.claude, "claude-sonnet-4-6") == []


def test_attempt_numbers_are_never_reused_even_when_the_plan_lags(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"a": "x"})
    # a crashed runner launched attempt 1 and died before plan.jsonl recorded it
    stale = rig.folder.root / "stdout" / "a__C0__r00.a1.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("")
    rig.run()
    assert rig.result("a__C0__r00")["attempt"] == 2
    assert rig.result("a__C11__r00")["attempt"] == 1


def test_create_run_refuses_an_existing_folder(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"a": "x"})
    before = rig.folder.plan_path.read_bytes()
    with pytest.raises(OutputExists, match="already exists"):
        create_run(
            tmp_path / "runs",
            tasks=load_run_tasks(rig.folder, rig.manifest),
            cell_set="binary",
            cells=rig.cells,
            repeats=1,
            seed=7,
            model="claude-sonnet-4-6",
            max_turns=5,
            claude=rig.claude,
            run_id=rig.manifest.run_id,
        )
    assert rig.folder.plan_path.read_bytes() == before  # nothing of the first run was touched


def test_environments_are_capped_at_jobs_and_retargeted(tmp_path: Path) -> None:
    rig = Rig(tmp_path, {"t1": "say done", "t2": "say done"}, cells="layered")
    summary = rig.run(FAST)
    assert summary.outcome == "finished" and summary.done == 24
    # a checkout per concurrent session, not per cell: the other cells get an idle environment retargeted
    assert len(rig.backend.builds) == 3
    assert sorted(slot for _, slot in rig.backend.builds) == [0, 1, 2]
    assert len(rig.backend.retargets) >= 9
    assert all(old != new for old, new in rig.backend.retargets)
    assert rig.backend.teardowns == 3


def test_run_then_lost_outputs_recover_merge_and_summarise_as_one_contract(tmp_path: Path) -> None:
    """run → delete stdout and result → recover → merge → demo summary: every stage reads the same ItemResult."""
    from ablate.run.merge import merge_runs
    from ablate.run.recover import recover_run
    from tests.folder_totals import cell_totals

    rig = Rig(tmp_path, {"alpha": "say done", "beta": "say hi"}, repeats=1)
    summary = rig.run()
    assert (summary.done, summary.total) == (4, 4)
    before = rig.results()
    lost = sorted(before)[:2]
    for item in lost:
        rig.folder.result_path(item).unlink()
        attempt = before[item]["attempt"]
        rig.folder.stdout_path(item, attempt).unlink()

    actions = {r.item: r.action for r in recover_run(rig.folder.root)}
    assert {i: actions[i] for i in lost} == dict.fromkeys(lost, "recovered")
    assert sorted(a for i, a in actions.items() if i not in lost) == ["ok", "ok"]
    after = rig.results()
    for item in lost:
        rebuilt = after[item]
        for key in ("task", "cell", "repeat", "order", "attempt", "session_id", "status", "complete"):
            assert rebuilt[key] == before[item][key], (item, key)
        assert rebuilt["transcript"] == before[item]["transcript"]  # relative, same as the runner's
        assert rebuilt["stdout"] == before[item]["stdout"]
        assert rebuilt["recovery"]["recovered_fields"]

    merged = merge_runs([rig.folder.root], tmp_path / "merged")
    assert (merged["complete"], merged["items"]) == (4, 4)
    merged_results = {r.item: r for r in iter_results(RunFolder(tmp_path / "merged"))}
    assert {i: r.stdout for i, r in merged_results.items()} == {i: r["stdout"] for i, r in after.items()}

    cells = {s.cell: (s.items, s.complete, s.pitfall_hits) for s in cell_totals(tmp_path / "merged")}
    hits = {
        c: sum(r["pitfall_hits"].get("said-done", 0) for r in before.values() if r["cell"] == c)
        for c in cells
    }
    assert min(hits.values()) > 0  # the "say done" task hits its pitfall; recovery must not lose that
    assert cells == {c: (2, 2, {"said-done": hits[c]}) for c in ("C0", "C11")}


def test_a_merged_folder_counts_every_folders_cli_starts(tmp_path: Path) -> None:
    """``cli_starts`` of a merge is the sum of its folders' (each shard counted its own starts)."""
    import shutil

    from ablate.folder.layout import CliStarts, write_manifest
    from ablate.run.merge import merge_runs

    rig = Rig(tmp_path, {"alpha": "say done"}, repeats=1)
    rig.run()
    shutil.copytree(rig.folder.root, tmp_path / "other")
    shards = {
        rig.folder.root: {"sessions": 2, "probe": 2, "fidelity": 1},
        tmp_path / "other": {"sessions": 1},
    }
    for root, starts in shards.items():
        folder = RunFolder(root)
        write_manifest(
            folder, read_manifest(folder).model_copy(update={"cli_starts": CliStarts().plus(starts)})
        )
    merge_runs(list(shards), tmp_path / "merged")
    merged = read_manifest(RunFolder(tmp_path / "merged")).cli_starts
    assert merged.model_dump() == {
        "total": 6,
        "sessions": 3,
        "probe": 2,
        "fidelity": 1,
        "baseline": 0,
        "version": 0,
    }


def _daemons(mark: str) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"]) if mark in (p.info.get("cmdline") or [])]


@pytest.mark.parametrize("prompt", ["DAEMON then answer", "DAEMON then SLEEP"])
def test_a_double_forked_daemon_dies_with_its_session(tmp_path: Path, prompt: str) -> None:
    """A model's `setsid … &` leaves the process tree; it must not outlive the session, on exit or timeout."""
    mark = f"{(os.getpid() % 9000) + 1000}.{len(prompt)}17"
    rig = Rig(tmp_path, {"d": prompt}, FAKE_DAEMON_MARK=mark)
    runner = rig.runner(RunOptions(jobs=2, grace_s=1.0))
    runner.manifest = runner.manifest.model_copy(update={"timeout_s": 3.0})
    summary = runner.run()
    assert summary.total == 2
    assert _daemons(mark) == []


def test_the_watchdog_kills_tagged_processes_when_its_owner_dies(tmp_path: Path) -> None:
    """kill -9 of a runner: its watchdog sees the pipe close and kills every process of the run."""
    mark = f"{(os.getpid() % 9000) + 1000}.4242"
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "from ablate.core.watchdog import Watchdog\n"
            "w = Watchdog('run-x/')\n"
            f"subprocess.Popen(['sh', '-c', 'setsid sleep {mark} &'], env={{'ABLATE_TAG': 'run-x/s1', 'PATH': '/usr/bin:/bin'}})\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
    )
    assert owner.stdout is not None and owner.stdout.readline().strip() == b"ready"
    deadline = time.monotonic() + 5
    while not _daemons(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _daemons(mark), "the daemon did not start"
    owner.kill()  # SIGKILL: no finally, no atexit
    owner.wait()
    deadline = time.monotonic() + 10
    while _daemons(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _daemons(mark) == []


@pytest.mark.parametrize("timeout", [None, 1.0])
def test_run_process_kills_what_left_the_tree(tmp_path: Path, timeout: float | None) -> None:
    from ablate.core.proc import run_process

    mark = f"{(os.getpid() % 9000) + 1000}.{7 if timeout else 8}31"
    # a subshell that backgrounds and exits: the sleep is reparented, out of the command's process tree
    script = f"(setsid sleep {mark} >/dev/null 2>&1 &); " + ("sleep 30" if timeout else "true")
    env = {"PATH": "/usr/bin:/bin"}
    try:
        # without a tag the daemon outlives the command: the case this guards against is real
        run_process(["sh", "-c", script], cwd=tmp_path, env=env, timeout=timeout, kill_grace_s=0.5)
        time.sleep(0.2)
        assert _daemons(mark)
        for pid in _daemons(mark):
            os.kill(pid, 9)
        res = run_process(
            # a tag of this test's own: the test's other case may run beside it, and ending a command kills
            # every process of its tag
            ["sh", "-c", script],
            cwd=tmp_path,
            env=env,
            timeout=timeout,
            tag=f"t{mark}/1",
            kill_grace_s=0.5,
        )
        assert res.timed_out is (timeout is not None)
        assert _daemons(mark) == []
    finally:
        for pid in _daemons(mark):
            os.kill(pid, 9)

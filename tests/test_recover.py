"""`recover`: rebuild results from transcripts when stdout is missing, empty, corrupt or a rate-limit stub."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from ablate.core.errors import NotFound, RunFolderError, SpecError
from ablate.folder.layout import Attempt, PlanItem, RunFolder
from ablate.folder.lock import RunLock
from ablate.folder.result import read_result
from ablate.run.recover import recover_run
from tests.mining_support import FIXTURES, stdout_of


def _session_id(name: str) -> str:
    return str(orjson.loads((FIXTURES / f"{name}.jsonl").read_bytes().splitlines()[0])["sessionId"])


def _add(rf: RunFolder, items: list[PlanItem], item: str, name: str, stdout: bytes | None) -> None:
    sid = _session_id(name)
    transcript = rf.transcript_path(item, 1, sid)
    transcript.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / f"{name}.jsonl", transcript)
    for sub in FIXTURES.glob(f"{name}.subagents_agent-*"):
        target = transcript.with_suffix("") / "subagents" / sub.name.removeprefix(f"{name}.subagents_")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sub, target)
    if stdout is not None:
        rf.stdout_path(item, 1).parent.mkdir(parents=True, exist_ok=True)
        rf.stdout_path(item, 1).write_bytes(stdout)
    items.append(
        PlanItem(
            item=item,
            task="t",
            cell="C0",
            repeat=len(items),
            order=len(items),
            attempts=[Attempt(n=1, session_id=sid)],
        )
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return build_run_dir(tmp_path)


def build_run_dir(tmp_path: Path) -> Path:
    """A run folder with one item per kind of stdout: valid, empty, missing, corrupt, stub, no transcript."""
    rf = RunFolder(tmp_path / "run")
    items: list[PlanItem] = []
    _add(rf, items, "valid", "plain", stdout_of("plain").read_bytes())
    _add(rf, items, "killed", "killed_by_timeout", b"")
    _add(rf, items, "missing", "multi_tool", None)
    # Two runs wrote the same file: the shorter one (this item's) last, over the longer one.
    longer = stdout_of("agent_background").read_bytes()
    shorter = stdout_of("skill").read_bytes()
    _add(rf, items, "corrupt", "skill", shorter + longer[len(shorter) :])
    _add(rf, items, "stub", "rate_limited", b"You've hit your limit \xc2\xb7 resets 5pm (UTC)\n")
    items.append(
        PlanItem(item="gone", task="t", cell="C1", repeat=0, order=9, attempts=[Attempt(n=1, session_id="x")])
    )
    items.append(PlanItem(item="later", task="t", cell="C2", repeat=0, order=10))
    rf.write_plan(items)
    return rf.root


def test_recover_each_kind_of_stdout(run_dir: Path) -> None:
    got = {r.item: r for r in recover_run(run_dir)}
    assert {k: (v.stdout_kind, v.action) for k, v in got.items()} == {
        "valid": ("valid", "recovered"),  # a valid stdout without a result: the result is built from both
        "killed": ("empty", "recovered"),
        "missing": ("missing", "recovered"),
        "corrupt": ("corrupt", "recovered"),
        "stub": ("rate_limit_stub", "needs_rerun"),
        "gone": ("missing", "needs_rerun"),
        "later": (None, "not_run"),
    }
    rf = RunFolder(run_dir)
    killed = orjson.loads(rf.result_path("killed").read_bytes())
    assert killed["status"] == "killed" and killed["cost_usd"] == pytest.approx(0.0048)
    assert "status" in killed["recovery"]["recovered_fields"]
    assert killed["recovery"]["estimated_fields"] == ["turns"]
    missing = orjson.loads(rf.result_path("missing").read_bytes())
    assert (missing["status"], missing["turns"], missing["session"]["main"]["input_tokens"]) == (
        "completed",
        6,
        7200,
    )
    # every result is the runner's ItemResult: identity, completeness and relative evidence paths
    assert (missing["task"], missing["cell"], missing["repeat"], missing["complete"]) == ("t", "C0", 2, True)
    assert missing["transcript"] == f"transcripts/missing.a1/{_session_id('multi_tool')}.jsonl"
    assert missing["stdout"] == "stdout/missing.a1.json"
    valid = orjson.loads(rf.result_path("valid").read_bytes())
    assert valid["recovery"]["recovered_fields"] == [] and valid["complete"] is True
    # The corrupt file still holds this session's complete document: reconciled with it.
    corrupt = orjson.loads(rf.result_path("corrupt").read_bytes())
    assert corrupt["recovery"]["reconciliation"]["cost_usd"]["difference"] == 0.0
    assert corrupt["recovery"]["reconciliation"]["turns"] == {
        "transcript": 5,
        "cli": 5,
        "difference": 0,
        "note": "calibrated rule over the last prompt vs the CLI's num_turns",
    }
    assert got["stub"].reason.startswith("rate limited; resets ")
    for item in ("stub", "gone", "later"):
        assert not rf.result_path(item).exists()
    # a second pass finds every result in place
    again = {r.item: r.action for r in recover_run(run_dir)}
    assert again["valid"] == "ok"


def test_recover_in_worker_processes_writes_and_says_what_one_process_does(tmp_path: Path) -> None:
    """``jobs=3``: the same items, actions and reasons in plan order, and the same results written, byte for
    byte, as one process gives on an identical folder."""
    one, three = build_run_dir(tmp_path / "one"), build_run_dir(tmp_path / "three")
    serial = [r.to_json() for r in recover_run(one)]
    parallel = [r.to_json() for r in recover_run(three, jobs=3)]
    assert parallel == serial and [r["action"] for r in serial].count("recovered") == 4
    written = sorted(p.name for p in RunFolder(one).result_path("x").parent.glob("*.json"))
    assert written == sorted(p.name for p in RunFolder(three).result_path("x").parent.glob("*.json"))
    for name in written:
        a = (RunFolder(one).result_path("x").parent / name).read_text().replace(str(one), "RUN")
        b = (RunFolder(three).result_path("x").parent / name).read_text().replace(str(three), "RUN")
        assert a == b, name


def test_recover_never_replaces_a_better_result(run_dir: Path) -> None:
    rf = RunFolder(run_dir)
    recover_run(run_dir)
    recovered = read_result(rf, "killed")
    assert recovered is not None and recovered.status == "killed"
    # the runner later observed the same item complete: recovery must keep that result
    better = recovered.model_copy(update={"status": "completed", "cost_usd": 1.0, "recovery": None})
    rf.result_path("killed").write_bytes(orjson.dumps(better.model_dump(mode="json")))
    got = {r.item: r for r in recover_run(run_dir)}
    assert got["killed"].action == "kept"
    assert read_result(rf, "killed") == better


def test_recover_refuses_a_result_of_another_schema(run_dir: Path) -> None:
    rf = RunFolder(run_dir)
    rf.result_path("killed").parent.mkdir(parents=True, exist_ok=True)
    rf.result_path("killed").write_bytes(orjson.dumps({"schema_version": 1, "status": "completed"}))
    with pytest.raises(SpecError) as err:
        recover_run(run_dir)
    assert "killed.json: schema_version: is 1" in str(err.value)


def test_recover_waits_for_no_one_while_a_runner_holds_the_folder(run_dir: Path) -> None:
    with RunLock(RunFolder(run_dir)), pytest.raises(RunFolderError, match="another"):
        recover_run(run_dir)
    assert not (run_dir / "results").exists()


def _storm(tmp_path: Path) -> Path:
    """A folder of a 429 storm: every attempt ended on a rate limit, with the CLI's valid error document."""
    rf = RunFolder(tmp_path / "storm")
    items: list[PlanItem] = []
    for n in range(2):
        _add(rf, items, f"rl{n}", "rate_limited", stdout_of("rate_limited").read_bytes())
    rf.write_plan(items)
    return rf.root


def test_a_429_storm_needs_a_rerun(tmp_path: Path) -> None:
    got = recover_run(_storm(tmp_path))
    assert [(r.action, r.reason.split(";")[0]) for r in got] == [("needs_rerun", "rate limited")] * 2
    assert not (tmp_path / "storm" / "results").exists()


def test_dry_run_writes_nothing(run_dir: Path) -> None:
    assert [r.action for r in recover_run(run_dir, write=False)].count("recovered") == 4
    assert not (run_dir / "results").exists()


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        list(recover_run(tmp_path / "nope"))
    with pytest.raises(RunFolderError):
        list(recover_run(tmp_path))


def test_recover_checks_the_transcript_against_the_wire(run_dir: Path) -> None:
    from ablate.folder.wire import WireRecord, append_wire, wire_path

    wire = wire_path(run_dir, "missing")
    for attempt, out in ((1, 40), (2, 999)):  # another attempt's records are not this one's
        record = WireRecord(
            at=1,
            status=200,
            model="claude-sonnet-4-6",
            attempt=attempt,
            usage={"input_tokens": 9, "output_tokens": out},
        )
        append_wire(wire, record)
    got = {r.item: r.action for r in recover_run(run_dir)}
    assert got["missing"] == "recovered"
    result = orjson.loads(RunFolder(run_dir).result_path("missing").read_bytes())
    assert result["wire"]["requests"] == 1 and result["wire"]["differs"][0].startswith(
        "input_tokens: transcript"
    )
    assert (result["session"]["total"]["input_tokens"], result["session"]["total"]["output_tokens"]) == (
        9,
        40,
    )
    assert result["cost_usd"] == result["wire"]["cost_usd"] > 0
    assert result["flags"] == ["transcript-differs-from-wire"]  # left out of the statistics, named as such
    valid = orjson.loads(RunFolder(run_dir).result_path("valid").read_bytes())
    assert valid["wire"] is None  # no wire record: nothing to check against

"""The run folder's typed contract: results, manifests, session metrics and writes refuse what they do not
describe, with errors that name the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from ablate.core.claude import ClaudeBinary
from ablate.core.errors import SpecError
from ablate.folder.layout import (
    Attempt,
    IsolationInfo,
    PlanItem,
    RunFolder,
    RunManifest,
    SetupInfo,
    read_manifest,
    write_manifest,
)
from ablate.folder.result import COMPLETE_STATUSES, STATUSES, ItemResult, read_result, write_result
from ablate.folder.session import SessionMetrics, SessionWrites
from ablate.mine.derive import mine_session
from ablate.run.session import build_result

#: The keys of the mined-session object as they were before it was typed (``ablate mine --json``).
SESSION_KEYS = {
    "schema_version", "session_id", "transcript", "status", "api_error_status", "rate_limit_reset",
    "rate_limit_message", "turns", "turns_source", "turns_last_prompt", "num_turns_cli", "prompts", "cost_usd",
    "cost_estimated", "cost_source", "unknown_models", "duration_s", "duration_source", "estimated_fields", "cwd",
    "claude_version", "models", "instruction_files", "skills_listed", "hooks_fired", "agents", "pitfall_hits",
    "stdout", "reconciliation", "retries", "malformed_lines", "truncated_lines", "unknown_record_types", "main",
    "subagents", "total",
}  # fmt: skip


def _result(status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {
        "schema_version": 2,
        "item": "t__C0__r00",
        "task": "t",
        "cell": "C0",
        "repeat": 0,
        "order": 0,
        "attempt": 1,
        "session_id": "s1",
        "status": status,
        **extra,
    }


def _write_raw_result(tmp_path: Path, doc: dict[str, Any]) -> RunFolder:
    folder = RunFolder(tmp_path)
    path = folder.result_path("t__C0__r00")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc))
    return folder


def _manifest() -> RunManifest:
    return RunManifest(
        run_id="r",
        created_at="2026-01-01T00:00:00+00:00",
        ablate_version="0",
        claude=ClaudeBinary(path="/bin/claude", version="2.1.332", sha256="0" * 64, pinned=True),
        model="claude-sonnet-4-6",
        max_turns=5,
        argv=["claude"],
        max_retries=0,
        cell_set="core",
        cells=[],
        tasks=[],
        repeats=1,
        seed=0,
        plan_sha256="0" * 64,
        items=0,
        setup=SetupInfo(repo="/r", head="abc"),
        isolation=IsolationInfo(backend="namespace", reason="user namespaces work"),
    )


@pytest.mark.parametrize("version", [1, None])  # a newer one: tests/test_run_folder_files.py
def test_a_result_of_another_schema_is_a_located_error(tmp_path: Path, version: int | None) -> None:
    folder = _write_raw_result(tmp_path, _result(schema_version=version))
    with pytest.raises(SpecError) as exc:
        read_result(folder, "t__C0__r00")
    [problem] = exc.value.problems
    assert problem.file == str(folder.result_path("t__C0__r00"))
    assert problem.field == "schema_version"
    assert repr(version) in problem.message and "schema 2" in problem.message
    assert "ablate recover" in (exc.value.hint or "")


@pytest.mark.parametrize("version", [0, "1", None])
def test_a_manifest_of_another_schema_is_a_located_error(tmp_path: Path, version: object) -> None:
    folder = RunFolder(tmp_path)
    doc = _manifest().model_dump(mode="json") | {"schema_version": version}
    folder.manifest_path.write_bytes(orjson.dumps(doc))
    with pytest.raises(SpecError) as exc:
        read_manifest(folder)
    [problem] = exc.value.problems
    assert (problem.file, problem.field) == (str(folder.manifest_path), "schema_version")
    assert repr(version) in problem.message and "manifest schema 1" in problem.message
    assert exc.value.hint


def test_a_manifest_round_trips_with_typed_setup_and_isolation(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    write_manifest(folder, _manifest())
    doc = orjson.loads(folder.manifest_path.read_bytes())
    assert doc["setup"]["head"] == "abc" and doc["isolation"]["backend"] == "namespace"
    back = read_manifest(folder)
    assert back.setup.head == "abc" and back.isolation is not None
    assert back.isolation.describe() == "namespace — user namespaces work"


def test_a_misspelt_setup_field_in_a_manifest_is_located(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    doc = _manifest().model_dump(mode="json")
    doc["setup"]["haed"] = "abc"
    folder.manifest_path.write_bytes(orjson.dumps(doc))
    with pytest.raises(SpecError) as exc:
        read_manifest(folder)
    assert [p.field for p in exc.value.problems] == ["setup.haed"]


def test_a_manifest_written_before_any_session_reads_with_no_isolation(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    folder.manifest_path.write_bytes(orjson.dumps(_manifest().model_dump(mode="json") | {"isolation": {}}))
    assert read_manifest(folder).isolation is None


def test_an_unknown_status_in_a_result_file_is_an_error(tmp_path: Path) -> None:
    folder = _write_raw_result(tmp_path, _result("launched-somehow"))
    with pytest.raises(SpecError) as exc:
        read_result(folder, "t__C0__r00")
    assert [p.field for p in exc.value.problems] == ["status"]


def test_the_runner_never_maps_an_unknown_status_to_error(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    item = PlanItem(item="t__C0__r00", task="t", cell="C0", repeat=0, order=0)
    attempt = Attempt(n=1, session_id="s1")
    with pytest.raises(ValidationError, match="status"):
        build_result(folder, item, attempt, None, None, "exploded", None)
    # the runner's own outcomes for attempts that never reached the CLI are named explicitly
    for outcome in ("env_error", "launch_error"):
        assert build_result(folder, item, attempt, None, None, outcome, None, "boom").status == "error"


@pytest.mark.parametrize("status", sorted(STATUSES))
def test_complete_follows_status_and_is_written_for_readers(tmp_path: Path, status: str) -> None:
    res = ItemResult.model_validate(_result(status))
    assert res.complete is (status in COMPLETE_STATUSES)
    assert res.model_dump()["complete"] is res.complete
    if status != "rate_limited":  # never written, by the replacement rule
        folder = RunFolder(tmp_path)
        assert write_result(folder, res)
        on_disk = orjson.loads(folder.result_path(res.item).read_bytes())
        assert on_disk["complete"] is res.complete
        back = read_result(folder, res.item)
        assert back is not None and back.complete is res.complete


def test_an_old_result_with_a_consistent_complete_reads_and_a_contradicting_one_is_located(
    tmp_path: Path,
) -> None:
    folder = _write_raw_result(tmp_path, _result("max_turns", complete=True))
    res = read_result(folder, "t__C0__r00")
    assert res is not None and res.complete
    folder = _write_raw_result(tmp_path, _result("api_error", complete=True))
    with pytest.raises(SpecError) as exc:
        read_result(folder, "t__C0__r00")
    [problem] = exc.value.problems
    assert problem.field == "complete" and "'api_error'" in problem.message
    with pytest.raises(ValidationError, match="complete is derived"):
        ItemResult.model_validate(_result("api_error", complete=True))


def test_the_mined_session_keeps_its_keys_and_reads_back_typed(tmp_path: Path) -> None:
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text("")
    mined = mine_session(transcript)
    doc = mined.to_json()
    assert set(doc) == SESSION_KEYS
    assert set(doc["total"]) >= {"api_calls", "tool_calls", "files_read", "skills_invoked", "models"}
    metrics = SessionMetrics.model_validate(doc)
    assert metrics.status == "no_transcript" and metrics.total.tool_calls == 0
    with pytest.raises(ValidationError, match="tool_cals"):
        SessionMetrics.model_validate(doc | {"total": {"tool_cals": 3}})


@pytest.mark.parametrize("fixture", ["multi_tool", "agent", "skill"])
def test_the_printed_session_object_is_exactly_the_typed_one(fixture: str) -> None:
    mined = mine_session(Path(__file__).parent / "data" / "fixtures" / f"{fixture}.jsonl")
    doc = mined.to_json()
    assert mined.to_metrics().model_dump(mode="json") == doc
    assert doc["total"]["api_calls"] > 0


def test_writes_are_typed_and_an_inspection_error_is_one_of_them() -> None:
    w = SessionWrites.model_validate(
        {
            "schema_version": 1,
            "discarded": True,
            "areas": {
                "home": {"path": "/home/u", "files": 1, "bytes": 3, "deleted": 0, "by_folder": {"~/x": 1}}
            },
            "outside_cell": {},
        }
    )
    assert w.areas["home"].by_folder == {"~/x": 1} and w.error is None
    assert SessionWrites.model_validate({"error": "could not inspect"}).error == "could not inspect"
    with pytest.raises(ValidationError):
        SessionWrites.model_validate({"schema_version": 2})

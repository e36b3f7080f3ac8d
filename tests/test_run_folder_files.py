"""Every file of a run folder with its version (ablate.folder.files.RUN_FILES), and the one reader rule: a file
written by a newer ablate is refused, located (file, field), with the fix (upgrade ablate), exit 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.errors import EXIT_USAGE, SpecError
from ablate.folder.files import RUN_FILES
from ablate.folder.layout import RunFolder
from tests.helpers_cli import invoke
from tests.run_folder import new_manifest

ITEM = "t__C0__r00"

#: Every file of a run folder and the schema_version ablate writes it at (None: not ablate's format).
EXPECTED = {
    "manifest.json": 1,
    ".lock": None,
    "plan.jsonl": 1,
    "results/<item>.json": 2,
    "grades/<item>.json": 1,
    "diffs/<item>.a<N>.patch": None,
    "stdout/<item>.a<N>.json": None,
    "stderr/<item>.a<N>.txt": None,
    "transcripts/<item>.a<N>/": None,
    "wire/<item>.jsonl": 1,
    "tasks/": None,
    "adaptive.json": 1,
    "probe.json": 1,
    "report.json": 1,
    "report.md": None,
    "report.html": None,
    "plots/": None,
    "report.log": None,
}


def test_every_run_folder_file_is_listed_with_its_version() -> None:
    assert {f.path: f.version for f in RUN_FILES} == EXPECTED


def test_every_listed_owner_is_a_module_of_ablate() -> None:
    import importlib.util

    assert [f.owner for f in RUN_FILES if importlib.util.find_spec(f.owner) is None] == []


def test_the_listed_versions_are_the_writers() -> None:
    from ablate.folder.adaptive import AdaptiveState
    from ablate.folder.layout import PlanItem, RunManifest
    from ablate.folder.result import ItemResult
    from ablate.folder.wire import WireRecord
    from ablate.grade.record import GradeFile
    from ablate.probe.probe import ProbeResult
    from ablate.report.model import REPORT_SCHEMA_VERSION, Report

    models: dict[str, Any] = {
        "manifest.json": RunManifest,
        "plan.jsonl": PlanItem,
        "results/<item>.json": ItemResult,
        "grades/<item>.json": GradeFile,
        "wire/<item>.jsonl": WireRecord,
        "adaptive.json": AdaptiveState,
        "report.json": Report,
    }
    versions = {f.path: f.version for f in RUN_FILES}
    for path, model in models.items():
        assert model.model_fields["schema_version"].default == versions[path], path
    assert versions["report.json"] == REPORT_SCHEMA_VERSION
    probe = ProbeResult([], [], {}, {}, {}, [], True, 0.0).to_json()
    assert probe["schema_version"] == versions["probe.json"]


def _manifest(run: RunFolder, version: int) -> Path:
    doc = new_manifest(cells=[], tasks=[], repeats=1, items=0).model_dump(mode="json")
    run.manifest_path.write_bytes(orjson.dumps(doc | {"schema_version": version}))
    return run.manifest_path


def _json(rel: str, doc: dict[str, Any]) -> Callable[[RunFolder, int], Path]:
    def write(run: RunFolder, version: int) -> Path:
        path = run.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps({**doc, "schema_version": version}) + b"\n")
        return path

    return write


def _read(kind: str, run: RunFolder) -> object:
    if kind == "manifest.json":
        from ablate.folder.layout import read_manifest

        return read_manifest(run)
    if kind == "plan.jsonl":
        return run.read_plan()
    if kind == "results/<item>.json":
        from ablate.folder.result import read_result

        return read_result(run, ITEM)
    if kind == "grades/<item>.json":
        from ablate.grade.record import read_grade

        return read_grade(run, ITEM)
    if kind == "wire/<item>.jsonl":
        from ablate.folder.wire import read_wire, wire_path

        return list(read_wire(wire_path(run.root, ITEM)))
    if kind == "adaptive.json":
        from ablate.folder.adaptive import read_state

        return read_state(run)
    if kind == "probe.json":
        from ablate.folder.probe import read_probe

        return read_probe(run)
    assert kind == "report.json", kind
    from ablate.ci.verdicts import load_evidence

    return load_evidence(run.root)


#: A file of each versioned kind, as its writer lays it out but at the version given.
WRITERS: dict[str, Callable[[RunFolder, int], Path]] = {
    "manifest.json": _manifest,
    "plan.jsonl": _json("plan.jsonl", {"item": ITEM, "task": "t", "cell": "C0", "repeat": 0, "order": 0}),
    "results/<item>.json": _json(f"results/{ITEM}.json", {"item": ITEM, "status": "completed"}),
    "grades/<item>.json": _json(f"grades/{ITEM}.json", {"item": ITEM}),
    "wire/<item>.jsonl": _json(f"wire/{ITEM}.jsonl", {"at": 1.0, "status": 200}),
    "adaptive.json": _json("adaptive.json", {"control": "C0"}),
    "probe.json": _json("probe.json", {"ok": True, "cells": []}),
    "report.json": _json("report.json", {"comparisons": []}),
}


def test_every_versioned_file_has_a_newer_version_check() -> None:
    assert set(WRITERS) == {f.path for f in RUN_FILES if f.version is not None}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_file_of_a_newer_version_is_refused_located(tmp_path: Path, kind: str) -> None:
    run = RunFolder(tmp_path)
    version = EXPECTED[kind]
    assert version is not None
    path = WRITERS[kind](run, version + 1)
    with pytest.raises(SpecError) as exc:
        _read(kind, run)
    [problem] = exc.value.problems
    assert problem.file.split(":")[0] == str(path) and problem.field == "schema_version"
    assert problem.message == (
        f"written by a newer ablate (version {version + 1} > {version}): upgrade ablate"
    )
    assert exc.value.exit_code == EXIT_USAGE


def test_the_cli_refuses_a_newer_run_folder_with_exit_2(tmp_path: Path) -> None:
    run = RunFolder(tmp_path)
    _manifest(run, 2)
    code, out, err = invoke(["report", str(run.root)])
    assert code == 2, (out, err)
    assert f"{run.manifest_path}: schema_version: written by a newer ablate (version 2 > 1)" in err

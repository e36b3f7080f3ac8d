"""Per-item provenance from the wire: what each cell's sessions carried, and the caveat when two cells that
differ in a layer sent the model the same thing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import orjson

from ablate.folder.layout import IsolationInfo, RunFolder, read_manifest, write_manifest
from ablate.folder.result import iter_results
from ablate.folder.wire import WireRecord, wire_totals
from ablate.isolate.forwarder import context_digest
from ablate.report import write_report
from ablate.report.sections import build_report
from tests.report_support import Outcome, make_run

#: C2 strips the axioms (instructions, in the first message) yet carried C0's context: a provenance failure.
#: C8 strips repo docs the model reads on demand: the same context as C0 is expected, not flagged (but C8 keeps
#: the axioms C2 strips, so C2 and C8 carrying the same context is flagged too).
CELLS = {"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"], "C8": ["decisions"]}
CONTEXT = {"C0": "ctx-full", "C1": "ctx-no-user", "C2": "ctx-full", "C8": "ctx-full"}


def _run(root: Path, *, context: Mapping[str, str | None]) -> Path:
    run = make_run(root, cells=CELLS, tasks=["greet", "validate"], repeats=2, outcome=lambda *_: Outcome())
    for r in iter_results(RunFolder(run)):
        records = [
            WireRecord(
                at=1.0, status=200, system_sha256="sys", tools_sha256="tools", context_sha256=context[r.cell]
            )
            for _ in range(2)
        ]
        data = r.model_copy(update={"wire": wire_totals(records)}).model_dump(mode="json")
        RunFolder(run).result_path(r.item).write_bytes(orjson.dumps(data))
    return run


def test_the_report_counts_what_each_cell_carried_and_names_cells_identical_on_the_wire(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path / "run", context=dict(CONTEXT))
    write_report(run, formats=["json", "md", "html"])
    data = orjson.loads((run / "report.json").read_bytes())
    carried = {c["cell"]: c for c in data["carried"]}
    assert {c: (v["sessions"], v["system"], v["tools"], v["context"]) for c, v in carried.items()} == {
        c: (4, 1, 1, 1) for c in CELLS
    }
    assert {c: v["same_as"] for c, v in carried.items()} == {
        "C0": ["C2"],
        "C1": [],
        "C2": ["C0", "C8"],
        "C8": ["C2"],
    }
    (caveat,) = [c for c in data["caveats"] if c["id"] == "carried-identical"]
    assert ": C0 and C2; C2 and C8. " in caveat["text"]
    md = (run / "report.md").read_text()
    assert "| C2 " in md and "same on the wire as" in md and "**carried-identical**" in md
    assert 'id="carried"' in (run / "report.html").read_text()


def test_distinct_contexts_raise_no_caveat_and_an_old_wire_is_not_compared(tmp_path: Path) -> None:
    distinct = _run(tmp_path / "a", context={**CONTEXT, "C2": "ctx-no-axioms"})
    report = build_report(distinct)
    assert all(not c.same_as for c in report.carried)
    assert "carried-identical" not in {c.id for c in report.caveats}
    # a wire written before the context was digested: counted, never called identical
    old = build_report(_run(tmp_path / "b", context=dict.fromkeys(CELLS)))
    assert [(c.context, c.same_as) for c in old.carried] == [(0, [])] * len(CELLS)
    assert "carried-identical" not in {c.id for c in old.caveats}


def test_a_run_without_a_wire_has_no_carried_section(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", cells=CELLS, tasks=["greet"], repeats=1, outcome=lambda *_: Outcome())
    write_report(run, formats=["json", "md"])
    assert "carried" not in orjson.loads((run / "report.json").read_bytes())
    assert "same on the wire as" not in (run / "report.md").read_text()


def _probed(run: Path, backend: str, contexts: dict[str, str]) -> None:
    """The run's manifest says ``backend``; probe.json holds a namespace probe with ``contexts``."""
    folder = RunFolder(run)
    manifest = read_manifest(folder)
    write_manifest(folder, manifest.model_copy(update={"isolation": IsolationInfo(backend=backend)}))
    cells = [{"id": c, "verdict": "faithful", "context_sha256": ctx} for c, ctx in contexts.items()]
    probe = {"ok": True, "cells": cells, "isolation": {"backend": "namespace"}}
    (run / "probe.json").write_bytes(orjson.dumps(probe))


def test_sessions_are_compared_with_the_probes_context_in_a_namespace_run(tmp_path: Path) -> None:
    distinct = {**CONTEXT, "C2": "ctx-no-axioms"}
    run = _run(tmp_path / "run", context=dict(distinct))
    _probed(run, "namespace", {**distinct, "C1": "ctx-probe-saw-another"})
    report = build_report(run)
    assert {c.cell: c.unlike_probe for c in report.carried} == {"C0": 0, "C1": 4, "C2": 0, "C8": 0}
    (caveat,) = [c for c in report.caveats if c.id == "carried-unlike-probe"]
    assert ": C1 (4 of 4 sessions)." in caveat.text
    # a links run's cells are elsewhere than the probe's: their paths differ, nothing is compared
    _probed(run, "links", {**distinct, "C1": "ctx-probe-saw-another"})
    links = build_report(run)
    assert {c.unlike_probe for c in links.carried} == {None}
    assert "carried-unlike-probe" not in {c.id for c in links.caveats}


def _reminder(text: str) -> dict[str, str]:
    return {"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>"}


def test_the_context_digest_keeps_the_layers_and_leaves_out_what_differs_per_session() -> None:
    layers = [_reminder("Contents of /home/u/.claude/CLAUDE.md:\n\n# rules"), _reminder("skills: a, b")]

    def first(date: str, cwd: str, prompt: str, extra: list[dict[str, str]] = []) -> list[dict[str, object]]:  # noqa: B006
        content = [
            _reminder(f"# Environment\n - Primary working directory: {cwd}"),
            *layers,
            *extra,
            _reminder("You are powered by the model named Sonnet 4.6."),
            _reminder(f"Today's date is {date}."),
            _reminder(
                "As you answer the user's questions, you can use the following context:\n# gitStatus\nmain"
            ),
            _reminder("<total_tokens>15000000 tokens left</total_tokens>"),
            {"type": "text", "text": prompt},
        ]
        return [{"role": "user", "content": content}, {"role": "assistant", "content": "ok"}]

    one = context_digest(first("2026-12-01", "/a", "fix the bug"))
    assert one is not None
    assert context_digest(first("2026-12-02", "/b", "another task")) == one
    assert context_digest(first("2026-12-01", "/a", "fix the bug", [_reminder("axioms: be brief")])) != one
    assert context_digest([{"role": "user", "content": "plain prompt"}]) is None
    assert context_digest(None) is None

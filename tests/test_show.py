"""Flipped pairs on a small synthetic run folder: which pairs flipped, one pair's two sessions (the recorded
transcript of tests/data/fixtures, its CLAUDE.md missing on the cell's side), the context diff, the terminal
layouts, ``--json``, the report's section, and every bad input of ``ablate show``."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from ablate.folder.layout import RunFolder, item_id
from ablate.folder.lock import RunLock
from ablate.folder.result import iter_results, read_result
from ablate.folder.wire import WireRecord, append_wire, wire_path
from ablate.report import write_report
from ablate.report.pairs_text import show
from tests.conftest import DATA
from tests.helpers_cli import invoke
from tests.report_support import Outcome, make_run

FIXTURE = DATA / "fixtures" / "multi_tool.jsonl"
CELLS = {"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"]}


def _outcome(task: str, cell: str, repeat: int) -> Outcome:
    """C1 fails greet r0 and r2 (the control passes them); C0 fails validate r1, C1 passes it."""
    flips = {("greet", "C1", 0), ("greet", "C1", 2), ("validate", "C0", 1)}
    return Outcome(pitfall=(task, cell, repeat) in flips)


def _session(run: Path, task: str, cell: str, repeat: int, *, claude_md: bool, tokens: int | None) -> None:
    """The fixture's transcript as this item's (the cell's without the user CLAUDE.md) and its wire record."""
    folder = RunFolder(run)
    item = item_id(task, cell, repeat)
    res = read_result(folder, item)
    assert res is not None
    lines = FIXTURE.read_text().splitlines()
    if not claude_md:
        lines = [
            ln.replace('"content":"# Global rules\\nPrefer small diffs.\\n@axioms.md"', '"content":""')
            for ln in lines
        ]
    path = folder.transcript_path(item, res.attempt, res.session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    if tokens is not None:
        usage = {"input_tokens": tokens, "cache_read_input_tokens": 10}
        append_wire(wire_path(run, item), WireRecord(item=item, attempt=1, at=time.time(), status=200,
                                                     usage=usage, context_sha256=f"ctx{claude_md}"))  # fmt: skip


@pytest.fixture
def run(tmp_path: Path) -> Path:
    root = make_run(tmp_path / "run", cells=CELLS, tasks=["greet", "validate"], repeats=3, outcome=_outcome)
    _session(root, "greet", "C0", 0, claude_md=True, tokens=1200)
    _session(root, "greet", "C1", 0, claude_md=False, tokens=1100)
    return root


def test_the_summary_puts_the_answer_first_then_each_cells_flips_with_its_command(run: Path) -> None:
    shown = show(run, None, None, None, 80)
    assert shown.lines[0].startswith("rank") and max(map(len, shown.lines[:6])) <= 80
    at = shown.lines.index("Flipped pairs (the control C0 and the cell disagree on pitfall-free rate):")
    assert shown.lines[at + 1 : at + 9] == [
        "  C1 (strips user-claude-md): 3 of 6 pairs flipped",
        "    greet r0: C0 passed, C1 failed",
        f"      ablate show {run} --cell C1 --task greet --repeat 0",
        "    greet r2: C0 passed, C1 failed",
        f"      ablate show {run} --cell C1 --task greet --repeat 2",
        "    validate r1: C0 failed, C1 passed",
        f"      ablate show {run} --cell C1 --task validate --repeat 1",
        "  C2 (strips axioms): 1 of 6 pairs flipped",
    ]
    assert [c["cell"] for c in shown.data["cells"]] == ["C1", "C2"] and shown.notes == []


def test_a_pair_side_by_side_and_stacked_with_its_context_diff(run: Path) -> None:
    narrow = show(run, "C1", None, None, 80)  # the first flipped pair: greet r0
    text = "\n".join(narrow.lines)
    assert narrow.lines[0] == "greet r0: C0 (control): passed · completed; C1: failed · completed"
    assert max(map(len, narrow.lines)) <= 80 and "[C0]" in text and "[C1]" in text
    assert (
        "first request: C0 1210 tokens, C1 1110 tokens; on the wire these differ:\n  attached context" in text
    )
    assert "-# Global rules\n-Prefer small diffs.\n-@axioms.md" in text  # the stripped layer, removed
    assert "[C1]\nLet me look at the app first.\n→ Read: app.py" in text and "→ Bash: python3 app.py" in text
    answers = text.split("── final answer ", 1)[1]
    assert answers.count("Done: app.py now prints `Hello, world!`.") == 2  # both final answers
    assert "✓ pitfall p" in text and "✗ pitfall p" in text
    wide = show(run, "C1", "greet", 0, 150).lines
    assert "[C0]" not in wide and max(map(len, wide)) <= 150
    turn = wide.index("── turn 1 ".ljust(150, "─"))
    assert (
        wide[turn + 1].startswith("Let me look at the app first.")
        and " │ Let me look at the app first." in wide[turn + 1]
    )
    data = show(run, "C1", None, None, 80).data
    assert data["control"]["prompt"] == "FX-MULTI Make the greeting in app.py friendlier and run it."
    assert [c["name"] for t in data["other"]["turns"] for c in t["calls"]] == [
        "Read",
        "Bash",
        "Read",
        "Edit",
        "Bash",
    ]
    assert data["diff"][:3] == ["-# Global rules", "-Prefer small diffs.", "-@axioms.md"]


def test_a_pair_without_transcript_or_wire_is_shown_from_what_exists(run: Path) -> None:
    shown = show(run, "C1", "greet", 2, 80)
    missing = RunFolder(run).transcript_path("greet__C0__r02", 1, "s-12")
    assert shown.data["control"]["missing"] == [
        f"transcript ({missing})",
        f"wire record ({run}/wire/greet__C0__r02.jsonl)",
    ]
    assert shown.lines[1].startswith("C0: missing transcript (") and max(map(len, shown.lines)) <= 80
    assert "first request: C0 ? tokens, C1 ? tokens" in shown.lines
    unflipped = show(run, "C1", "validate", 0, 80)  # named, not flipped: shown all the same
    assert unflipped.lines[0].startswith("validate r0: C0 (control): passed")


def test_a_running_run_shows_what_has_finished(run: Path) -> None:
    (run / "results" / "validate__C2__r02.json").unlink()
    with RunLock(RunFolder(run)):
        res = invoke(["show", str(run)])
        pair = invoke(["show", str(run), "--cell", "C2", "--task", "validate", "--repeat", "2", "--json"])
    assert (
        res.exit_code == 0 and "still running (pid " in res.stderr and "17 of 18 items finished" in res.stderr
    )
    assert orjson.loads(pair.stdout)["other"]["missing"] == ["result (the session has not finished)"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--cell", "C9"], "--cell C9: not a tested cell of this run\n  hint: cells: C1, C2"),
        (
            ["--cell", "C1", "--task", "nope"],
            "--task nope: not a task of this run\n  hint: tasks: greet, validate",
        ),
        (["--cell", "C1", "--repeat", "7"], "--repeat 7: not a repeat of this run\n  hint: repeats: 0, 1, 2"),
        (["--task", "greet"], "--task/--repeat: name the cell too"),
    ],
)
def test_bad_input_is_a_located_error(run: Path, args: list[str], said: str) -> None:
    res = invoke(["show", str(run), *args])
    assert res.exit_code == 2 and said in res.stderr, res.output


def test_not_a_run_folder(tmp_path: Path) -> None:
    res = invoke(["show", str(tmp_path)])
    assert res.exit_code == 2 and f"{tmp_path}: not a run folder (no manifest.json)" in res.stderr


def test_the_report_links_each_ranking_row_to_its_flips_and_embeds_the_pairs(run: Path) -> None:
    written = write_report(run, formats=["md", "html", "json"])
    md = (run / "report.md").read_text()
    assert "| 1 | C1 | user-claude-md |" in md or "| C1 | user-claude-md |" in md
    assert "| C1 | user-claude-md | 3 of 6 | 2 | 1 | ablate show runs/" in md
    html = written.paths["html"].read_text()
    assert '<td><a href="#pairs-C1">C1</a></td>' in html and '<details class="flips" id="pairs-C1">' in html
    assert 'data-pair="C1|greet|0"' in html and '<script type="application/json" id="pairs-data">' in html
    shown = orjson.loads((run / "report.json").read_bytes())["pairs"]["shown"]
    assert [(p["cell"], p["task"], p["repeat"]) for p in shown] == [
        ("C1", "greet", 0), ("C1", "greet", 2), ("C1", "validate", 1), ("C2", "validate", 1)
    ]  # fmt: skip


def test_a_thousand_session_run_writes_a_small_report_fast(tmp_path: Path) -> None:
    """1,000 sessions, every pair of C1 flipped and each transcript recorded: report.html stays under 10 MB."""
    cells = {"C0": [], **{f"C{i}": ["user-claude-md"] for i in range(1, 10)}}
    root = make_run(tmp_path / "run", cells=cells, tasks=[f"t{i}" for i in range(10)], repeats=10,
                    outcome=lambda t, c, r: Outcome(pitfall=c != "C0" and (r + int(c[1:])) % 2 == 0))  # fmt: skip
    for res in iter_results(RunFolder(root)):
        _session(root, res.task, res.cell, res.repeat, claude_md=res.cell == "C0", tokens=1000)
    t0 = time.monotonic()
    written = write_report(root, formats=["html"])
    took = time.monotonic() - t0
    size = written.paths["html"].stat().st_size
    print(f"1000-session report.html: {size / 1e6:.2f} MB in {took:.1f} s")
    assert size < 10_000_000 and took < 60

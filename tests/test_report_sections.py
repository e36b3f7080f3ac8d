"""The report's section registry: a section added with one line is in report.json, report.md and report.html;
the answer comes first; the docs list the registry's sections (tests/test_docs_true.py holds the
guide's example to its module)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from ablate.report import sections, write_report
from tests import report_section_example
from tests.report_support import make_run
from tests.test_report import TASKS, planted

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cells = {"C0": [], "C1": ["user-claude-md"], "C2": ["axioms"]}
    return make_run(
        tmp_path_factory.mktemp("run") / "run", cells=cells, tasks=TASKS, repeats=2, outcome=planted
    )


def test_a_section_added_with_one_line_is_in_every_format(
    small_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sections, "SECTIONS", [*sections.SECTIONS, report_section_example.SECTION])
    write_report(small_run)
    data = orjson.loads((small_run / "report.json").read_bytes())
    assert data["scored_sessions"] == {"C0": 4, "C1": 4, "C2": 4}
    md = (small_run / "report.md").read_text()
    assert md.rstrip().endswith(
        "## Scored sessions\n\n| cell | sessions |\n|---|---|\n| C0 | 4 |\n| C1 | 4 |\n| C2 | 4 |"
    )
    html = (small_run / "report.html").read_text()
    assert (
        '<h2>Scored sessions</h2>\n<table id="scored-sessions">' in html and "<td>C2</td><td>4</td>" in html
    )


def test_without_it_the_report_is_as_before(small_run: Path) -> None:
    write_report(small_run)
    assert "scored_sessions" not in orjson.loads((small_run / "report.json").read_bytes())
    assert "Scored sessions" not in (small_run / "report.md").read_text()


def test_the_answer_comes_first_with_one_sentence_per_verdict(small_run: Path) -> None:
    write_report(small_run, formats=["md"])
    md = (small_run / "report.md").read_text()
    headings = re.findall(r"^## (.*)$", md, re.M)
    assert headings[0] == "Ranking: which layer earns its keep" and headings[1] == "The run"
    assert headings.index("Caveats") > headings.index("Run-to-run spread and power")
    ranking = md.split("## Ranking", 1)[1].split("\n## ", 1)[0]
    table_end = ranking.index("\n\n- **")
    assert ranking.index("| rank | cell |") < table_end < ranking.index("Primary metric:")
    sentences = re.findall(
        r"^- \*\*(C\d)\*\* \(strips [^)]+\): \*\*(helps|hurts|mixed|draw)\*\*", ranking, re.M
    )
    assert sorted(c for c, _ in sentences) == ["C1", "C2"]


def test_the_docs_list_the_registrys_sections_in_order() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    listed = text.split('<a id="report-sections"></a>', 1)[1].split("The answer comes first:", 1)[1]
    keys = re.findall(r"`([a-z_]+)`", re.split(r"A section\s+marked", listed, maxsplit=1)[0])
    assert keys == [s.key for s in sections.SECTIONS]

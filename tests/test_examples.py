"""examples/ stays current: its reports have the sections, the ranking columns and the verdict words a fresh
render of the same kind of run has (regenerate them with `make examples` when this fails)."""

from __future__ import annotations

import re
from pathlib import Path

from ablate.report import write_report
from tests.report_support import make_run
from tests.run_folder import edit_manifest
from tests.test_report import CELLS, TASKS, planted

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: Sections a report has only when the setup or the run has the data (the example setup has usage history and
#: the demo runs with --aa, an A/A control; the synthetic run here has neither).
NOISE_FLOOR = "## Noise floor (A/A)"
#: Sections only some runs have: history when the user has one, the noise floor with --aa, how far it
#: generalizes when a cell is ranked (the binary fixture's C11 strips no layer this setup has).
CONDITIONAL = {
    "## Your own history (context, not part of the measurement)",
    NOISE_FLOOR,
    "## How far it generalizes",
}
VERDICT = re.compile(r"^(helps|hurts|mixed|draw)( \((costs|saves|adds) [^)]*\))?$")


def _structure(md: str) -> dict[str, object]:
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## Ranking"))
    ranking = next(line for line in lines[start:] if line.startswith("| rank"))
    header_rows = []
    for line in lines[lines.index("|  |  |") + 2 :]:
        if not line.startswith("|"):
            break
        header_rows.append(line.split("|")[1].strip())
    return {
        "sections": [line for line in lines if line.startswith("## ") and line not in CONDITIONAL],
        "ranking columns": ranking,
        "header rows": header_rows,
    }


def _verdicts(md: str) -> list[str]:
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| rank"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[4].strip())
    return rows


def _fresh(tmp_path: Path, *, binary: bool) -> str:
    cells = {"C0": [], "C11": ["everything"]} if binary else CELLS
    run = make_run(
        tmp_path / "run",
        cells=cells,
        tasks=TASKS,
        repeats=8,
        outcome=planted,
        cell_set="binary" if binary else "layered",
    )
    edit_manifest(
        run, lambda m: m["setup"].update(endpoint={"simulated": True})
    )  # the demo reaches ablate.sim
    return write_report(run, formats=["md"]).paths["md"].read_text()


def test_the_layered_example_matches_a_fresh_render(tmp_path: Path) -> None:
    example = (EXAMPLES / "layered_ablation_example.md").read_text()
    assert _structure(example) == _structure(_fresh(tmp_path, binary=False))
    verdicts = _verdicts(example)
    assert verdicts and all(VERDICT.match(v) for v in verdicts), verdicts
    # the demo's planted layers help (README: "C1 ... and C8 ... help")
    assert re.search(r"^\| 1 \| C(1|8) \| [^|]+ \| helps", example, re.M)
    # the demo runs with its A/A control: the measured noise floor, C0b never ranked, no A/A difference real
    assert NOISE_FLOOR in example.splitlines()
    assert re.search(r"^\| pitfall_free \| C0b \| \d+ \| \d+% \|.*\| no \|$", example, re.M)
    assert not re.search(r"^\| \d+ \| C0b \|", example, re.M) and "real — untrustworthy" not in example


def test_the_ab_example_matches_a_fresh_render(tmp_path: Path) -> None:
    example = (EXAMPLES / "binary_ab_example.md").read_text()
    assert _structure(example) == _structure(_fresh(tmp_path, binary=True))
    assert all(VERDICT.match(v) for v in _verdicts(example))

"""The probe proves piece cells with the real CLI (issue 32): a correct cut passes, a wrong one is caught.

One probe of three cells (the control, one cell cutting a repo section, a skill and a SessionStart hook,
one cutting a rule file whose builder also drops a line of the user's CLAUDE.md): five CLI starts with the
baseline and the untouched setup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ablate.core.claude import find_claude
from ablate.core.fsutil import tree_hash
from ablate.isolate.environment import CellEnvironment, build_environment
from ablate.probe.probe import probe
from ablate.setup.examples import git, materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup
from ablate.setup.piece_cells import piece_cells
from ablate.setup.pieces import setup_pieces

WRONG_LINE = "- Prefer small, reviewable commits with messages that say why."


@pytest.mark.e2e
def test_probe_passes_piece_cells_and_catches_a_wrong_cut(tmp_path: Path, claude: Path) -> None:
    ex = materialise_example(tmp_path / "ex")
    claude_md = ex.repo / "CLAUDE.md"
    claude_md.write_text(
        claude_md.read_text() + "\n## Releases\nTag releases as vYYYY.MM. (fp: releases 5d1e)\n"
    )
    git(ex.repo, "commit", "-qam", "a second section")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    pieces = setup_pieces(setup, catalog)
    good = ["repo-claude-md#releases", "skills#bug-triage", "hooks#sessionstart-session-start"]
    cells = piece_cells(pieces, [good, ["rules#python"]])

    def builder(*args: Any, **kwargs: Any) -> CellEnvironment:
        cenv = build_environment(*args, **kwargs)
        if cenv.cell.id == "P02":  # a wrong cut: one more line of the user's CLAUDE.md gone
            target = cenv.config_dir / "CLAUDE.md"
            target.write_text(target.read_text().replace(WRONG_LINE + "\n", ""))
        return cenv

    before = tree_hash(ex.home), tree_hash(ex.repo)
    result = probe(setup, catalog, cells, find_claude(claude), jobs=2, builder=builder)
    by_id = {c.id: c for c in result.cells}
    assert by_id["C0"].verdict == "faithful"
    p01 = by_id["P01"]
    assert p01.verdict == "faithful", p01.problems
    statuses = {pid: chk["status"] for pid, chk in p01.pieces["pieces"].items()}
    assert statuses == dict.fromkeys(good, "gone")
    assert p01.pieces["removed_chars"] > len("Tag releases as vYYYY.MM. (fp: releases 5d1e)")
    p02 = by_id["P02"]
    assert p02.pieces["pieces"]["rules#python"]["status"] == "gone"
    assert p02.verdict == "missing" and not result.ok
    assert any("belong to none of its pieces" in p and WRONG_LINE in p for p in p02.problems), p02.problems
    assert (tree_hash(ex.home), tree_hash(ex.repo)) == before


@pytest.mark.e2e
def test_knowledge_and_memory_files_are_pieces_the_probe_proves_gone(tmp_path: Path, claude: Path) -> None:
    """A repo knowledge file and an auto-memory file are cut from the cell where its session finds them
    (``links``: auto-memory under the cell's own slug), and a cut that leaves one behind is a leak."""
    ex = materialise_example(tmp_path / "ex")
    setup, catalog = load_setup(ex.config_dir, ex.repo, home=ex.home), load_catalog()
    pieces = setup_pieces(setup, catalog)
    good, bad = ["runbooks#deploy", "auto-memory#memory"], "decisions#0001-plain-python"
    cells = piece_cells(pieces, [good, [bad]])

    def builder(*args: Any, **kwargs: Any) -> CellEnvironment:
        cenv = build_environment(*args, **kwargs)
        if cenv.cell.id == "P02":  # a wrong cut: the decision record is put back
            (cenv.cwd / "docs/decisions/0001-plain-python.md").write_text("# Plain Python\n")
        return cenv

    result = probe(setup, catalog, cells, find_claude(claude), jobs=2, builder=builder)
    by_id = {c.id: c for c in result.cells}
    p01, p02 = by_id["P01"], by_id["P02"]
    assert p01.verdict == "faithful", p01.problems
    assert {pid: chk["status"] for pid, chk in p01.pieces["pieces"].items()} == dict.fromkeys(good, "gone")
    assert p01.pieces["removed_chars"] > 0  # the auto-memory index left the first request
    assert p02.pieces["pieces"][bad]["status"] == "still-there" and p02.verdict == "leak", p02.pieces

"""The probe proves piece cells with the real CLI (issue 32): a correct cut passes, a wrong one is caught.

One probe of five cells, run once for both tests (``built_once``): the control; P01 cutting a repo section, a skill
and a SessionStart hook; P02 cutting a rule file whose builder also drops a line of the user's CLAUDE.md; P03
cutting a repo knowledge file and an auto-memory file; P04 cutting a decision record whose builder puts it
back. Seven CLI starts with the baseline and the untouched setup (two probes of three cells were ten).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
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
from tests.conftest import built_once, isolate_env

WRONG_LINE = "- Prefer small, reviewable commits with messages that say why."
GOOD = ["repo-claude-md#releases", "skills#bug-triage", "hooks#sessionstart-session-start"]
KNOWN = ["runbooks#deploy", "auto-memory#memory"]
BAD = "decisions#0001-plain-python"


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory, claude: Path) -> dict[str, Any]:
    """The shared probe's probe.json (cells keyed by id) and ``untouched``: whether it left the home and the
    repository as they were."""

    def build(tmp: Path) -> None:
        with pytest.MonkeyPatch.context() as env:
            isolate_env(env, tmp_path_factory)
            (tmp / "probe.json").write_bytes(orjson.dumps(_probe(tmp, claude)))

    got = orjson.loads((built_once(tmp_path_factory, "pieces-probe", build) / "probe.json").read_bytes())
    return {**got, "cells": {c["id"]: c for c in got["cells"]}}


def _probe(tmp: Path, claude: Path) -> dict[str, Any]:
    ex = materialise_example(tmp / "ex")
    claude_md = ex.repo / "CLAUDE.md"
    claude_md.write_text(
        claude_md.read_text() + "\n## Releases\nTag releases as vYYYY.MM. (fp: releases 5d1e)\n"
    )
    git(ex.repo, "commit", "-qam", "a second section")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = piece_cells(setup_pieces(setup, catalog), [GOOD, ["rules#python"], KNOWN, [BAD]])

    def builder(*args: Any, **kwargs: Any) -> CellEnvironment:
        cenv = build_environment(*args, **kwargs)
        if cenv.cell.id == "P02":  # a wrong cut: one more line of the user's CLAUDE.md gone
            target = cenv.config_dir / "CLAUDE.md"
            target.write_text(target.read_text().replace(WRONG_LINE + "\n", ""))
        if cenv.cell.id == "P04":  # a wrong cut: the decision record is put back
            (cenv.cwd / "docs/decisions/0001-plain-python.md").write_text("# Plain Python\n")
        return cenv

    before = tree_hash(ex.home), tree_hash(ex.repo)
    result = probe(setup, catalog, cells, find_claude(claude), jobs=2, builder=builder)
    return {**result.to_json(), "untouched": (tree_hash(ex.home), tree_hash(ex.repo)) == before}


@pytest.mark.e2e
def test_probe_passes_piece_cells_and_catches_a_wrong_cut(probed: dict[str, Any]) -> None:
    assert probed["cells"]["C0"]["verdict"] == "faithful"
    p01 = probed["cells"]["P01"]
    assert p01["verdict"] == "faithful", p01["problems"]
    statuses = {pid: chk["status"] for pid, chk in p01["pieces"]["pieces"].items()}
    assert statuses == dict.fromkeys(GOOD, "gone")
    assert p01["pieces"]["removed_chars"] > len("Tag releases as vYYYY.MM. (fp: releases 5d1e)")
    p02 = probed["cells"]["P02"]
    assert p02["pieces"]["pieces"]["rules#python"]["status"] == "gone"
    assert p02["verdict"] == "missing" and not probed["ok"]
    assert any("belong to none of its pieces" in p and WRONG_LINE in p for p in p02["problems"]), p02
    assert probed["untouched"]


@pytest.mark.e2e
def test_knowledge_and_memory_files_are_pieces_the_probe_proves_gone(probed: dict[str, Any]) -> None:
    """A repo knowledge file and an auto-memory file are cut from the cell where its session finds them
    (``links``: auto-memory under the cell's own slug), and a cut that leaves one behind is a leak."""
    p03, p04 = probed["cells"]["P03"], probed["cells"]["P04"]
    assert p03["verdict"] == "faithful", p03["problems"]
    assert {pid: chk["status"] for pid, chk in p03["pieces"]["pieces"].items()} == dict.fromkeys(
        KNOWN, "gone"
    )
    assert p03["pieces"]["removed_chars"] > 0  # the auto-memory index left the first request
    assert p04["pieces"]["pieces"][BAD]["status"] == "still-there" and p04["verdict"] == "leak", p04["pieces"]

"""A setup installed as links (tests/dotfiles_setup.py: a dotfiles checkout, a linked skills folder of
relative skill links, one a chain, one dangling, a link into a plugin cache, the config dir itself a link,
the repository under the home) probed with the real CLI in both backends: C0's request equals the untouched
setup's, the skills cell lacks every skill, a cell stripping what a linked CLAUDE.md imports is faithful,
and every link target is byte-identical afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.core.claude import find_claude
from ablate.core.fsutil import tree_hash
from ablate.isolate.registry import choose_isolation
from ablate.probe.probe import probe
from ablate.setup.cells import load_cell_set
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup
from tests.dotfiles_setup import dotfiles_setup


@pytest.mark.e2e
@pytest.mark.parametrize(("isolation", "cells"), [("namespace", ["C0", "C2", "C4"]), ("links", ["C0", "C4"])])
def test_dotfiles_setup_probes_faithful(
    isolation: str, cells: list[str], tmp_path: Path, claude: Path
) -> None:
    if isolation == "namespace" and choose_isolation(None).backend != "namespace":
        pytest.skip("the namespace backend does not work on this machine")
    ex = dotfiles_setup(tmp_path / "ex")
    before = tree_hash(ex.home)  # the dotfiles checkout, ~/.agents and the repository are all under it
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    result = probe(
        setup,
        catalog,
        load_cell_set("layered", catalog),
        find_claude(claude),
        cell_ids=cells,
        jobs=2,
        isolation=isolation,
    )
    verdicts = {c.id: c.verdict for c in result.cells}
    assert verdicts == dict.fromkeys(cells, "faithful"), [c.to_json() for c in result.cells]
    assert result.fidelity["checked"] and result.fidelity["equal"], result.fidelity
    by_id = {c.id: c for c in result.cells}
    assert by_id["C0"].layers["skills"].observed == "present"
    # bug-triage through the linked skills folder, release-notes through the chain of two links
    assert by_id["C0"].layers["skills"].evidence == "2/2 fingerprints seen"
    assert by_id["C4"].layers["skills"].observed == "absent"  # neither skill reached through its link
    if "C2" in by_id:  # CLAUDE.md links into the checkout, and @axioms.md resolves there in C0
        assert by_id["C2"].layers["axioms"].observed == "absent"
    assert not [lk for lk in result.leaks if lk.kind == "ancestor-file"], result.leaks
    assert any("skills/gone is a dangling link" in n for n in result.notes), result.notes
    assert result.ok and result.real_setup_unchanged
    assert tree_hash(ex.home) == before

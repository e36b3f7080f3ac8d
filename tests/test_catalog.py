"""The layer catalog and cell sets: shipped data is valid, bad files give located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.core.errors import NotFound, SpecError, UsageError
from ablate.setup.cells import cell_effect, load_cell_set
from ablate.setup.examples import materialise_example
from ablate.setup.layers import load_catalog, resolve_layer, walk_files
from ablate.setup.load import inventory, load_setup, parse_imports

CLASSIC = [
    ("C1", "user-claude-md"),
    ("C2", "axioms"),
    ("C3", "lessons"),
    ("C4", "skills"),
    ("C5", "auto-memory"),
    ("C6", "repo-memory"),
    ("C7", "runbooks"),
    ("C8", "decisions"),
    ("C9", "findings"),
    ("C10", "handoffs-plans"),
]


def test_shipped_catalog_has_design_layers() -> None:
    cat = load_catalog()
    for _, lid in CLASSIC:
        assert lid in cat
    assert cat.get("user-claude-md").strip == "stub"
    assert cat.get("hooks").strip == "drop-key"
    assert [k.key for k in cat.get("mcp").keys] == ["mcpServers", "mcpServers"]
    assert cat.get("auto-memory").patterns("SLUG") == ["projects/SLUG/memory/"]
    assert {cat.get(x).side for x in ("repo-memory", "runbooks", "repo-claude-md")} == {"repo"}


def test_layered_set_matches_design_table() -> None:
    cells = load_cell_set("layered", load_catalog())
    assert [c.id for c in cells.cells] == ["C0", *[c for c, _ in CLASSIC], "C11"]
    assert cells.get("C0").is_control and cells.get("C0").stripped == ()
    for cid, lid in CLASSIC:
        assert cells.get(cid).stripped == (lid,)
    c11 = cells.get("C11")
    assert c11.empty_config
    # C11: every config layer plus the five repo knowledge layers, but not the repo's own CLAUDE.md
    assert {"repo-memory", "runbooks", "decisions", "findings", "handoffs-plans", "hooks", "skills"} <= set(
        c11.stripped
    )
    assert "repo-claude-md" not in c11.stripped
    assert [c.dirname for c in cells.cells] == [f"c{i:02d}" for i in range(12)]


@pytest.mark.parametrize("name", ["binary", "extended", "leave-one-in"])
def test_other_shipped_sets_load(name: str) -> None:
    cells = load_cell_set(name, load_catalog())
    assert cells.control in [c.id for c in cells.cells]
    assert len({len(c.dirname) for c in cells.cells}) == 1


def test_leave_one_in_keeps_exactly_one_layer() -> None:
    cells = load_cell_set("leave-one-in", load_catalog())
    k4 = cells.get("K4")
    assert k4.kept == ("skills",) and "skills" not in k4.stripped and "user-claude-md" in k4.stripped


def test_unknown_cell_set_and_cell(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="unknown cell set 'nope'"):
        load_cell_set("nope", load_catalog())
    with pytest.raises(UsageError, match="unknown cell 'C99'"):
        load_cell_set("layered", load_catalog()).get("C99")


def test_unknown_layer_in_cell_file_is_located(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text('name = "mine"\n[[cell]]\nid = "C0"\n[[cell]]\nid = "X1"\nstrip = ["skilz"]\n')
    with pytest.raises(SpecError) as err:
        load_cell_set(f, load_catalog())
    assert f"{f}: cell.1: unknown layer 'skilz'" in str(err.value)


def test_malformed_cell_file_is_located(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('name = "bad"\n[[cell]]\nid = "C0"\nstirp = []\n')
    with pytest.raises(SpecError) as err:
        load_cell_set(f, load_catalog())
    assert f"{f}: cell.0.stirp: unknown field" in str(err.value)
    f.write_text("name = [unclosed\n")
    with pytest.raises(SpecError, match="invalid TOML"):
        load_cell_set(f, load_catalog())


def test_duplicate_cell_and_missing_control(tmp_path: Path) -> None:
    f = tmp_path / "dup.toml"
    f.write_text('name = "d"\ncontrol = "Z"\n[[cell]]\nid = "A"\n[[cell]]\nid = "A"\n')
    with pytest.raises(SpecError, match="duplicate cell id 'A'"):
        load_cell_set(f, load_catalog())


def test_variant_cell_replaces_a_single_file(tmp_path: Path) -> None:
    (tmp_path / "v2.md").write_text("# v2\n")
    f = tmp_path / "h2h.toml"
    f.write_text(
        'name = "h2h"\n[[cell]]\nid = "C0"\n[[cell]]\nid = "V2"\nreplace = { user-claude-md = "v2.md" }\n'
        '[[cell]]\nid = "V3"\nreplace = { skills = "v2.md" }\n'
    )
    with pytest.raises(SpecError, match="layer 'skills' is not a single file"):
        load_cell_set(f, load_catalog())
    f.write_text(
        'name = "h2h"\n[[cell]]\nid = "C0"\n[[cell]]\nid = "V2"\nreplace = { user-claude-md = "v2.md" }\n'
    )
    cells = load_cell_set(f, load_catalog())
    assert cells.get("V2").replace == {"user-claude-md": (tmp_path / "v2.md").resolve()}


def test_user_layers_from_ablate_toml(tmp_path: Path) -> None:
    f = tmp_path / "ablate.toml"
    f.write_text('[[layer]]\nid = "playbooks"\nside = "repo"\npaths = ["docs/playbooks/"]\n')
    cat = load_catalog(f)
    assert cat.get("playbooks").side == "repo"
    assert cat.sources["playbooks"] == str(f)
    f.write_text('[[layer]]\nid = "skills"\nside = "config"\npaths = ["x/"]\n')
    with pytest.raises(SpecError, match="'skills' is already defined"):
        load_catalog(f)
    f.write_text('[[layer]]\nid = "Bad Id"\nside = "sideways"\npaths = ["/abs"]\n')
    with pytest.raises(SpecError) as err:
        load_catalog(f)
    text = str(err.value)
    assert "layer.0.id" in text and "layer.0.side" in text and "layer.0.paths" in text
    with pytest.raises(NotFound):
        load_catalog(tmp_path / "missing.toml")


def test_symlink_loop_in_config_dir_is_an_error(tmp_path: Path) -> None:
    skills = tmp_path / "skills" / "loopy"
    skills.mkdir(parents=True)
    (skills / "back").symlink_to(tmp_path / "skills")
    with pytest.raises(UsageError, match="symlink loop"):
        walk_files(tmp_path, "skills")
    with pytest.raises(UsageError, match="symlink loop"):
        resolve_layer(load_catalog().get("skills"), tmp_path, memory_slug="x")


def test_parse_imports_skips_code_fences() -> None:
    text = "Intro @axioms.md and\n```\n@not-this.md\n```\n@~/notes/lessons.md\nmail me@example\n"
    assert parse_imports(text) == ["axioms.md", "~/notes/lessons.md"]


def test_example_setup_inventory_and_noop_cells(tmp_path: Path) -> None:
    ex = materialise_example(tmp_path / "ex")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    cat = load_catalog()
    inv = inventory(setup, cat)
    present = {lid for lid, lf in inv.layers.items() if lf.present}
    assert present >= {lid for _, lid in CLASSIC} | {"hooks", "agents", "commands", "rules", "repo-claude-md"}
    assert "mcp" not in present and "output-styles" not in present
    assert inv.imports == {"user-claude-md": ["axioms", "lessons"]}
    # history transcripts are not part of the auto-memory layer
    assert inv.layers["auto-memory"].files == [f"projects/{setup.memory_slug}/memory/MEMORY.md"]
    cells = load_cell_set("layered", cat)
    c1 = cell_effect(cells.get("C1"), inv.layers, inv.imports)
    assert c1.also_removes == ("axioms", "lessons") and not c1.noop
    # remove the decisions folder: C8 becomes a no-op, said plainly
    for f in (ex.repo / "docs" / "decisions").iterdir():
        f.unlink()
    (ex.repo / "docs" / "decisions").rmdir()
    inv2 = inventory(setup, cat)
    c8 = cell_effect(cells.get("C8"), inv2.layers, inv2.imports)
    assert c8.noop
    assert c8.note == "C8: no decisions in this setup — identical to the control by construction"


def test_fingerprint_changes_with_content(tmp_path: Path) -> None:
    layer = load_catalog().get("runbooks")
    (tmp_path / "docs" / "runbooks").mkdir(parents=True)
    (tmp_path / "docs" / "runbooks" / "a.md").write_text("one")
    fp1 = resolve_layer(layer, tmp_path, memory_slug="x").fingerprint
    (tmp_path / "docs" / "runbooks" / "a.md").write_text("two")
    fp2 = resolve_layer(layer, tmp_path, memory_slug="x").fingerprint
    assert fp1 and fp2 and fp1 != fp2

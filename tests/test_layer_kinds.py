"""One table of layer kinds; no-op cells as a field; the HTML row style as a flag on the row."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from ablate.folder.layout import ManifestCell
from ablate.report.blocks import Document, Table
from ablate.report.context import _noop_reason
from ablate.report.html import render_html
from ablate.setup.cells import load_cell_set, noop_reasons
from ablate.setup.examples import materialise_example
from ablate.setup.kinds import LoadedBy, ProbeBy, UsedBy, layer_kind
from ablate.setup.layers import Shows, load_catalog
from ablate.setup.load import load_setup


def test_the_table_covers_every_kind_and_every_catalog_layer() -> None:
    kinds = {shows: layer_kind(shows) for shows in get_args(Shows)}
    for shows, row in kinds.items():
        assert row.shows == shows
        assert row.probe in get_args(ProbeBy)
        assert row.loaded in get_args(LoadedBy)
        assert row.used in get_args(UsedBy)
    for layer in load_catalog():
        assert layer.shows in kinds, layer.id
    # the rows say different things for different kinds: no kind is a default for another
    assert layer_kind("instructions") != layer_kind("memory")
    assert layer_kind("files").used == "reads" and layer_kind("files").loaded == "not_applicable"


def test_a_noop_cell_is_a_field_of_the_manifest_cell(tmp_path: Path) -> None:
    ex = materialise_example(tmp_path / "ex")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog)
    decisions = ex.repo / "docs" / "decisions"
    for f in decisions.iterdir():
        f.unlink()
    decisions.rmdir()
    reasons = noop_reasons(cells.cells, setup, catalog)
    assert reasons["C8"] == "C8: no decisions in this setup — identical to the control by construction"
    assert "C1" not in reasons and "C0" not in reasons
    # the report reads the field, whatever the wording; a cell's notes never make it a no-op
    cell = ManifestCell(id="C8", dirname="c08", stripped=["decisions"], noop="anything at all")
    control = ManifestCell(id="C0", dirname="c00")
    assert _noop_reason(cell, control) == "anything at all"
    noisy = ManifestCell(
        id="C9", dirname="c09", stripped=["x"], notes=["identical to the control by construction"]
    )
    assert _noop_reason(noisy, control) is None


def test_html_row_class_comes_from_the_row_flag_not_the_text(tmp_path: Path) -> None:
    table = Table(
        ["cell", "real?"],
        [["C1", "**real**"], ["C2", "draw"], ["C3", "withdrawn"]],
        row_styles=["draw", "real", ""],
    )
    page = render_html(Document("t", [table]), tmp_path)
    rows = [line for line in page.split("<tr") if "<td>" in line]
    assert rows[0].startswith(' class="draw"') and rows[1].startswith(' class="real"')
    assert rows[2].startswith(">")
    plain = render_html(Document("t", [Table(["a"], [["**real**"]])]), tmp_path)
    assert 'class="real"' not in plain

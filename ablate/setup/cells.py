"""Cell sets (docs/ARCHITECTURE.md#cells): which layers each cell strips, and how that plays out for one setup."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from ablate.core.errors import NotFound, Problem, SpecError, UsageError
from ablate.core.resources import data_dir
from ablate.core.specs import Spec, read_spec_data, validate
from ablate.setup.layers import Catalog, LayerFiles

if TYPE_CHECKING:
    from ablate.setup.load import Setup


class Cell(Spec):
    """One ablation cell: the control, one layer stripped, everything stripped, or a variant."""

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
    """Unique id within the set (``C0``, ``C1``, ``K-skills``, ``V-claude-md-v2``)."""
    label: str = ""
    """Short human label (``no skills``); defaults to a description of what is stripped."""
    strip: list[str] | Literal["all"] = Field(default_factory=list)
    """Layer ids to strip, or ``"all"``: an empty config dir plus the set's repo-side `universe` stripped."""
    keep: list[str] = Field(default_factory=list)
    """With ``strip = "all"``: layers kept anyway (leave-one-in cells)."""
    replace: dict[str, str] = Field(default_factory=dict)
    """Layer id → file (relative to the cell file) whose content replaces the layer's single file."""
    strip_pieces: list[str] = Field(default_factory=list)
    """Piece ids (``ablate pieces``) cut from the cell: a section from its file, a skill folder, a hook entry,
    an MCP server; checked against the setup when the cell is built."""

    @model_validator(mode="after")
    def _consistent(self) -> Cell:
        if self.keep and self.strip != "all":
            raise ValueError('`keep` only goes with strip = "all"')
        return self


class CellSetFile(Spec):
    """A cell-set file in cells/ (or a user's own)."""

    schema_version: int = 1
    name: str
    description: str = ""
    control: str = "C0"
    """The id of the control cell every other cell is compared with."""
    universe: list[str] = Field(default_factory=list)
    """Repo-side layers that ``strip = "all"`` removes (config side: everything is removed)."""
    cell: list[Cell]


@dataclass(frozen=True)
class ResolvedCell:
    """A cell checked against the catalog, with its directory name and the exact layers it strips."""

    id: str
    index: int
    label: str
    stripped: tuple[str, ...]
    """Catalog layer ids this cell removes, in catalog order."""
    empty_config: bool
    """True when the config dir starts empty (``strip = "all"``), keeping only auth and the kept layers."""
    kept: tuple[str, ...] = ()
    replace: dict[str, Path] = field(default_factory=dict)
    aa_of: str | None = None
    """Set on the A/A cell of ``--aa``: the control it is a second, independently built copy of."""
    pieces: tuple[str, ...] = ()
    """Piece ids this cell cuts (docs/PIECES.md), in the setup's order."""

    @property
    def dirname(self) -> str:
        """Equal-length folder name (``c00``, ``c11``): the absolute path appears in the system prompt."""
        return f"c{self.index:02d}"

    @property
    def cut_layers(self) -> frozenset[str]:
        """Layers the cell keeps but cuts pieces from (a piece id is ``<layer>#<name>``)."""
        return frozenset(pid.split("#", 1)[0] for pid in self.pieces)

    @property
    def is_control(self) -> bool:
        return not self.stripped and not self.empty_config and not self.replace and not self.pieces


@dataclass(frozen=True)
class CellSet:
    name: str
    description: str
    control: str
    cells: tuple[ResolvedCell, ...]
    source: Path

    def get(self, cell_id: str) -> ResolvedCell:
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        known = ", ".join(c.id for c in self.cells)
        raise UsageError(f"unknown cell {cell_id!r} in set {self.name!r}", hint=f"known cells: {known}")

    def select(self, ids: list[str] | None) -> list[ResolvedCell]:
        return list(self.cells) if not ids else [self.get(i) for i in ids]


def with_aa(cell_set: CellSet) -> CellSet:
    """The set plus an A/A cell (``--aa``): a second control, built and run on its own."""
    if any(c.aa_of for c in cell_set.cells):
        return cell_set
    control = cell_set.get(cell_set.control)
    aa_id = f"{control.id}b"
    if any(c.id == aa_id for c in cell_set.cells):
        raise UsageError(f"--aa: the set {cell_set.name!r} already has a cell {aa_id!r}")
    index = max(c.index for c in cell_set.cells) + 1
    aa = ResolvedCell(
        aa_id, index, f"A/A: a second {control.id}, built on its own", (), False, aa_of=control.id
    )
    return dataclasses.replace(cell_set, cells=(*cell_set.cells, aa))


def builtin_sets() -> list[str]:
    return sorted(p.stem for p in data_dir("cells").glob("*.toml"))


def combined(sets: Sequence[CellSet], name: str) -> CellSet:
    """Several cell sets as one, in shared blocks: the first set's control, every cell once (a later cell with
    a taken id must be the same cell, as ``C11`` of ``layered`` and ``leave-one-in`` is)."""
    cells: list[ResolvedCell] = []
    by_id: dict[str, ResolvedCell] = {}
    for s in sets:
        for c in s.cells:
            seen = by_id.get(c.id)
            if seen is not None:
                if dataclasses.replace(c, index=seen.index, label=seen.label, aa_of=seen.aa_of) != seen:
                    raise UsageError(
                        f"--cells {name}: cell {c.id} of {s.name!r} differs from the cell {c.id} of an earlier set",
                        hint="rename the cell in one of the files",
                    )
                continue
            by_id[c.id] = dataclasses.replace(c, index=len(cells))
            cells.append(by_id[c.id])
    if len(cells) > 100:
        raise UsageError(f"--cells {name}: {len(cells)} cells; at most 100 (folder names are c00..c99)")
    described = " + ".join(s.description or s.name for s in sets)
    return CellSet(name, described, sets[0].control, tuple(cells), sets[0].source)


def cell_set_path(name_or_path: str | Path) -> Path:
    """A set name (``layered``) names a shipped file in cells/; anything else is a path."""
    text = str(name_or_path)
    if re.fullmatch(r"[A-Za-z0-9_-]+", text) and not Path(text).exists():
        path = data_dir("cells") / f"{text}.toml"
        if not path.exists():
            raise NotFound(
                f"unknown cell set {text!r}",
                hint=f"shipped sets: {', '.join(builtin_sets())}; or pass a .toml path",
            )
        return path
    path = Path(text)
    if not path.exists():
        raise NotFound(f"{path}: no such cell-set file")
    return path


def load_cell_set(name_or_path: str | Path, catalog: Catalog) -> CellSet:
    """Load and check a cell set; ``A+B`` runs both sets in shared blocks (:func:`combined`)."""
    text = str(name_or_path)
    if "+" in text and not Path(text).exists():
        parts = [p.strip() for p in text.split("+")]
        if len(parts) < 2 or not all(parts):
            raise UsageError(
                f"--cells {text}: empty set name", hint="join set names with +: layered+leave-one-in"
            )
        sets = [load_cell_set(p, catalog) for p in parts]
        return combined(sets, text)
    path = cell_set_path(name_or_path)
    spec = validate(CellSetFile, read_spec_data(path), path)
    problems: list[Problem] = []

    def bad(where: str, message: str) -> None:
        problems.append(Problem(str(path), where, message))

    if spec.schema_version != 1:
        bad("schema_version", f"unsupported version {spec.schema_version}; expected 1")
    for i, lid in enumerate(spec.universe):
        if lid not in catalog:
            bad(f"universe.{i}", f"unknown layer {lid!r}")
        elif catalog.get(lid).side != "repo":
            bad(f"universe.{i}", f"{lid!r} is a config-side layer; list repo layers")
    seen: set[str] = set()
    resolved: list[ResolvedCell] = []
    for ci, cell in enumerate(spec.cell):
        where = f"cell.{ci}"
        if cell.id in seen:
            bad(f"{where}.id", f"duplicate cell id {cell.id!r}")
        seen.add(cell.id)
        named = ([] if cell.strip == "all" else list(cell.strip)) + list(cell.keep) + list(cell.replace)
        for lid in named:
            if lid not in catalog:
                bad(where, f"unknown layer {lid!r} (known: {', '.join(catalog.ids)})")
        replace: dict[str, Path] = {}
        for lid, rel in cell.replace.items():
            target = (path.parent / rel).resolve()
            if not target.is_file():
                bad(f"{where}.replace.{lid}", f"{target}: no such file")
            layer = catalog.get(lid) if lid in catalog else None
            if layer is not None and (
                not layer.paths or layer.paths[0].endswith("/") or layer.strip == "drop-key"
            ):
                bad(f"{where}.replace.{lid}", f"layer {lid!r} is not a single file; cannot replace")
            replace[lid] = target
        if problems:
            continue
        if cell.strip == "all":
            stripped = tuple(
                layer.id
                for layer in catalog
                if (layer.side == "config" or layer.id in spec.universe) and layer.id not in cell.keep
            )
        else:
            order = {lid: n for n, lid in enumerate(catalog.ids)}
            stripped = tuple(sorted(set(cell.strip), key=order.__getitem__))
        label = cell.label or _default_label(cell, stripped)
        cut = tuple(dict.fromkeys(cell.strip_pieces))
        resolved.append(
            ResolvedCell(
                cell.id, ci, label, stripped, cell.strip == "all", tuple(cell.keep), replace, pieces=cut
            )
        )
    if not problems and spec.control not in seen:
        bad("control", f"no cell with id {spec.control!r}")
    if not problems and len(spec.cell) > 100:
        bad("cell", "at most 100 cells per set (folder names are c00..c99)")
    if problems:
        raise SpecError(problems)
    return CellSet(spec.name, spec.description, spec.control, tuple(resolved), path)


def _default_label(cell: Cell, stripped: Sequence[str]) -> str:
    if cell.strip == "all":
        return "nothing" if not cell.keep else "only " + ", ".join(cell.keep)
    if cell.replace:
        return "replaced " + ", ".join(cell.replace)
    if cell.strip_pieces and not stripped:
        return "no " + ", ".join(dict.fromkeys(cell.strip_pieces))
    if not stripped:
        return "everything (control)"
    return "no " + ", ".join(stripped)


# ---------------------------------------------------------------------------------------------------------
# How a cell plays out for one setup


@dataclass(frozen=True)
class CellEffect:
    """What a cell actually changes in one setup."""

    cell: ResolvedCell
    removes: tuple[str, ...]
    """Stripped layers that are present in this setup."""
    absent: tuple[str, ...]
    """Stripped layers this setup does not have (stripping them changes nothing)."""
    also_removes: tuple[str, ...]
    """Layers that go with a stripped one (files @imported by a stubbed CLAUDE.md)."""
    noop: bool
    """True when the cell is identical to the control by construction."""
    note: str
    """What the cell does here, in words (for a no-op cell: why it changes nothing)."""
    unloaded: tuple[str, ...] = ()
    """Stripped layers that are on disk but never loaded by the CLI (stripping them changes nothing)."""


def cell_effect(
    cell: ResolvedCell,
    present: dict[str, LayerFiles],
    imports: dict[str, list[str]],
    loaded: dict[str, list[str] | None] | None = None,
) -> CellEffect:
    """Describe ``cell`` for a setup whose layers resolved to ``present``; ``imports``: layer id → the layers
    its files ``@import``; ``loaded``: the files the CLI loads of each layer (``setup.load.loaded_files``)."""
    removes = tuple(lid for lid in cell.stripped if lid in present and present[lid].present)
    absent = tuple(lid for lid in cell.stripped if lid not in present or not present[lid].present)
    unloaded = tuple(
        lid
        for lid in removes
        if loaded is not None and lid in loaded and loaded[lid] is not None and not loaded[lid]
    )
    also: list[str] = []
    for lid in removes:
        for imp in imports.get(lid, []):
            if imp not in cell.stripped and imp not in also and imp in present and present[imp].present:
                also.append(imp)
    if cell.is_control:
        return CellEffect(cell, (), (), (), False, "control")
    effective = [lid for lid in removes if lid not in unloaded]
    noop = not effective and not also and not cell.replace and not cell.pieces
    if noop:
        if unloaded:
            what = ", ".join(unloaded)
            note = f"{cell.id}: {what} on disk but never loaded by the CLI — identical to the control by construction"
        else:
            what = ", ".join(cell.stripped)
            note = f"{cell.id}: no {what} in this setup — identical to the control by construction"
    else:
        parts = [f"removes {', '.join(effective)}"] if effective else []
        if cell.replace:
            parts.append("replaces " + ", ".join(cell.replace))
        if cell.pieces:
            parts.append("cuts " + ", ".join(cell.pieces))
        if also:
            parts.append(f"also removes {', '.join(also)} (imported by {', '.join(removes)})")
        if unloaded:
            parts.append(f"{', '.join(unloaded)} on disk but never loaded by the CLI")
        if absent and not cell.empty_config:
            parts.append(f"{', '.join(absent)} absent here")
        note = "; ".join(parts)
    return CellEffect(cell, removes, absent, tuple(also), noop, note, unloaded)


def noop_reasons(cells: Sequence[ResolvedCell], setup: Setup, catalog: Catalog) -> dict[str, str]:
    """Cell id -> why the cell is identical to the control in this setup, for the cells that are."""
    from ablate.setup.load import inventory

    inv = inventory(setup, catalog)
    effects = {cell.id: cell_effect(cell, inv.layers, inv.imports, inv.loaded) for cell in cells}
    return {cid: eff.note for cid, eff in effects.items() if eff.noop}

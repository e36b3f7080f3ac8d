"""What ``ablate layers`` and ``ablate cells`` report, as plain data (the CLI only renders it)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ablate.setup.cells import CellSet, cell_effect
from ablate.setup.layers import Catalog, LayerFiles
from ablate.setup.load import Inventory, import_lines, mapping_hint
from ablate.setup.plugins import plugins_of


def _loaded(lf: LayerFiles, loaded: list[str] | None) -> dict[str, Any] | None:
    """What of a present layer the CLI loads by itself; None when that does not apply (or it is absent)."""
    if not lf.present or loaded is None:
        return None
    size = sum((lf.base / rel).stat().st_size for rel in loaded if (lf.base / rel).exists())
    return {
        "files": len(loaded),
        "bytes": size,
        "est_tokens": size // 4,
        "not_loaded": [rel for rel in lf.files if rel not in loaded][:50],
    }


def _plugins(inv: Inventory, lf: LayerFiles) -> dict[str, Any] | None:
    """What a layer's ``plugins/`` holds and loads: None when it has no file there."""
    on_disk = [rel for rel in lf.files if rel.split("/", 1)[0] == "plugins"]
    if not on_disk or lf.layer.side != "config":
        return None
    plugins = plugins_of(lf.base, inv.setup.repo)
    loaded = inv.loaded.get(lf.layer.id) or []
    return {
        "installed": plugins.installed,
        "enabled": plugins.enabled,
        "files": len(on_disk),
        "loaded_files": len([rel for rel in on_disk if rel in loaded]),
    }


def layer_rows(inv: Inventory, catalog: Catalog) -> list[dict[str, Any]]:
    """One row per catalog layer: side, paths found, present or absent, files, bytes, tokens, fingerprint."""
    imported_by: dict[str, list[str]] = {}
    for owner, targets in inv.imports.items():
        for t in targets:
            imported_by.setdefault(t, []).append(owner)
    rows = []
    for layer in catalog:
        lf = inv.layers[layer.id]
        rep = inv.import_reports.get(layer.id)
        base = inv.setup.base(layer.side)
        found = list(lf.entries) + [f"{k.file}#{k.key}" for k in lf.keys]
        rows.append(
            {
                "id": layer.id,
                "side": layer.side,
                "base": str(base),
                "strip": layer.strip,
                "present": lf.present,
                "paths": found,
                "files": len(lf.files),
                "bytes": lf.bytes,
                "est_tokens": lf.est_tokens,
                "fingerprint": lf.fingerprint,
                "imported_by": imported_by.get(layer.id, []),
                "imports": inv.imports.get(layer.id, []),
                "import_files": rep.files if rep else [],
                "import_edges": import_lines(inv.setup, lf, rep) if rep else [],
                "import_bytes": rep.bytes if rep else 0,
                "import_missing": rep.missing if rep else [],
                "import_cycles": rep.cycles if rep else [],
                "est_tokens_with_imports": (lf.bytes + (rep.bytes if rep else 0)) // 4,
                "on_disk": {"files": len(lf.files), "bytes": lf.bytes},
                "loaded": _loaded(lf, inv.loaded.get(layer.id)),
                "plugins": _plugins(inv, lf),
                "dangling": dict(lf.dangling),
                "source": catalog.sources[layer.id],
            }
        )
    return rows


def dangling_lines(layers: dict[str, LayerFiles]) -> list[str]:
    """One line per dangling link in a layer: the CLI reads nothing there, in every cell alike."""
    return [
        f"{lid}: {rel} is a dangling link to {target} (the CLI reads nothing there; every cell keeps it so)"
        for lid, lf in layers.items()
        for rel, target in sorted(lf.dangling.items())
    ]


def inventory_json(inv: Inventory, catalog: Catalog) -> dict[str, Any]:
    s = inv.setup
    return {
        "config_dir": str(s.config_dir),
        "repo": str(s.repo),
        "main_worktree_root": str(s.main_root),
        "memory_slug": s.memory_slug,
        "head": s.head,
        "dirty_files": list(s.dirty_files),
        "layers": layer_rows(inv, catalog),
        "leaks": [asdict(leak) for leak in inv.leaks],
        "unclassified": {"files": list(inv.unclassified), "hints": mapping_hint(inv.unclassified)},
    }


def cell_rows(cells: CellSet, inv: Inventory | None) -> list[dict[str, Any]]:
    """One row per cell: what it strips and, given a setup, what that changes (no-op cells flagged)."""
    rows = []
    for cell in cells.cells:
        row: dict[str, Any] = {
            "id": cell.id,
            "dir": cell.dirname,
            "label": cell.label,
            "control": cell.id == cells.control,
            "strips": list(cell.stripped),
            "empty_config": cell.empty_config,
            "keeps": list(cell.kept),
            "replaces": {k: str(v) for k, v in cell.replace.items()},
        }
        if inv is not None:
            eff = cell_effect(cell, inv.layers, inv.imports, inv.loaded)
            for key in ("removes", "absent", "also_removes", "noop", "unloaded", "note"):
                value = getattr(eff, key)
                row[key] = list(value) if isinstance(value, tuple) else value
        rows.append(row)
    return rows

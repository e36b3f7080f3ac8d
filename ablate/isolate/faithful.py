"""Is a cell's copy of each layer it keeps the setup's? Fingerprints of the layers as a cell holds them, with the
cell's paths mapped back to the real ones, compared file by file with the setup's
(docs/ARCHITECTURE.md#links-in-setups). A cell with any mismatch is not the setup and is never run as if it were."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from ablate.core.jsonl import map_strings
from ablate.isolate.shadow_home import ACCOUNT as ACCOUNT_FILE
from ablate.setup.cells import ResolvedCell
from ablate.setup.layers import Catalog, Layer, LayerFiles, layer_hash, resolve_layer
from ablate.setup.load import Setup

#: A layer as a cell holds it: its fingerprint and each file's (and key's) digest, comparable with the setup's.
CopyPrint = tuple[str, dict[str, str]]


def cell_prints(
    setup: Setup, catalog: Catalog, *, config_dir: Path, memory_slug: str, cwd: Path
) -> dict[str, CopyPrint]:
    """Every layer as the cell holds it, paths and memory slug mapped back: a kept one equals the setup's."""
    config = config_prints(setup, catalog, config_dir, memory_slug=memory_slug, at_real_path=False)
    undo = [(str(config_dir), str(setup.config_dir)), *canonical_paths(setup)]
    return {
        layer.id: config[layer.id]
        if layer.side == "config"
        else _fingerprint(layer, cwd, setup.memory_slug, undo)
        for layer in catalog
    }


def config_prints(
    setup: Setup, catalog: Catalog, config: Path, *, memory_slug: str, at_real_path: bool
) -> dict[str, CopyPrint]:
    """The config-side layers as ``config`` holds them (paths mapped back unless seen at the real path)."""
    undo = ([] if at_real_path else [(str(config), str(setup.config_dir))]) + canonical_paths(setup)
    rel_undo = (f"projects/{memory_slug}/", f"projects/{setup.memory_slug}/")
    return {
        layer.id: _fingerprint(layer, config, memory_slug, undo, rel_undo)
        for layer in catalog
        if layer.side == "config"
    }


def canonical_paths(setup: Setup) -> list[tuple[str, str]]:
    """``<home>/.claude`` spelled as the config dir it is a link to: a cell's copy has both spellings of
    the real config path rewritten alike, so the comparison reads both as one."""
    alias = str(setup.home / ".claude")
    return [(alias, str(setup.config_dir))] if alias != str(setup.config_dir) else []


def setup_prints(setup: Setup, catalog: Catalog, layers: Mapping[str, LayerFiles]) -> dict[str, CopyPrint]:
    """The setup's layers as :func:`kept_mismatches` compares them with a cell's (:func:`canonical_paths`)."""
    aliases = {ACCOUNT_FILE: setup.account_state} if setup.account_state else {}
    canon = canonical_paths(setup)
    return {
        layer.id: _fingerprint(layer, setup.config_dir, setup.memory_slug, canon, aliases=aliases)
        if layer.side == "config"
        else (layers[layer.id].fingerprint, dict(layers[layer.id].digests))
        for layer in catalog
    }


def kept_mismatches(
    setup: Mapping[str, CopyPrint], cell: ResolvedCell, prints: Mapping[str, CopyPrint]
) -> dict[str, list[str]]:
    """Each layer the cell keeps whose copy differs from the setup's → the files (and keys) that
    differ. A cell with any is not the setup and must never be run as if it were."""
    out: dict[str, list[str]] = {}
    for lid, (want, theirs) in setup.items():
        if lid not in prints or lid in cell.stripped or lid in cell.replace or not want:
            continue
        if lid in cell.cut_layers:  # cut on purpose: the probe checks exactly those pieces are gone
            continue
        fingerprint, digests = prints[lid]
        if fingerprint == want:
            continue
        files = [
            f"{rel} ({'missing in the cell' if rel not in digests else 'only in the cell' if rel not in theirs else 'differs'})"
            for rel in sorted(set(theirs) | set(digests))
            if theirs.get(rel) != digests.get(rel)
        ]
        out[lid] = files or ["(the fingerprints differ; the files are not listed)"]
    return out


def mismatch_lines(mismatches: Mapping[str, list[str]]) -> list[str]:
    """One line per mismatching layer, naming up to five of its files."""
    lines = []
    for lid, files in mismatches.items():
        more = f", and {len(files) - 5} more" if len(files) > 5 else ""
        lines.append(f"{lid}: the cell's copy differs from the setup's: {', '.join(files[:5])}{more}")
    return lines


def _unrewrite(text: str, undo: list[tuple[str, str]]) -> str:
    for cell_path, real in undo:
        text = text.replace(cell_path, real)
    return text


def _fingerprint(
    layer: Layer,
    base: Path,
    memory_slug: str,
    undo: list[tuple[str, str]],
    rel_undo: tuple[str, str] | None = None,
    *,
    aliases: dict[str, Path] | None = None,
) -> CopyPrint:
    """The layer's :func:`~ablate.setup.layers.layer_hash` and digests, cell paths and names undone."""
    lf = resolve_layer(layer, base, memory_slug=memory_slug, aliases=aliases)
    if not lf.present:
        return "", {}
    files: list[tuple[str, bytes]] = []
    for rel in lf.files:
        data = (base / rel).read_bytes()
        for cell_path, real in undo:
            data = data.replace(cell_path.encode(), real.encode())
        key = rel.replace(rel_undo[0], rel_undo[1], 1) if rel_undo and rel.startswith(rel_undo[0]) else rel
        files.append((key, data))
    keys: list[tuple[str, bytes]] = []
    for kp in lf.keys:
        obj = json.loads(kp.path.read_text(encoding="utf-8"))
        unrewritten = map_strings(obj[kp.key], lambda text: _unrewrite(text, undo))
        value = json.dumps(unrewritten, sort_keys=True, separators=(",", ":")).encode()
        keys.append((f"{kp.file}#{kp.key}", value))
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in (*files, *keys)}
    return layer_hash(files, keys), digests

"""Applying piece cuts (:func:`ablate.setup.piece_cut.cut_ops`) to a cell's own files (docs/PIECES.md#cuts).

Every write goes through :func:`ablate.isolate.shadowfs.detach`, so a cut never reaches the user's files. The
config side cuts after the config dir is populated and stripped; the repo side replays cuts as worktree
operations (``links`` on its checkout, ``namespace`` in the cell's copy-on-write layer).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ablate.core.errors import UsageError
from ablate.isolate import shadowfs
from ablate.setup.cells import ResolvedCell
from ablate.setup.layers import Catalog, Layer
from ablate.setup.load import Setup
from ablate.setup.piece_cut import cut_ops, cut_ranges, drop_hooks, drop_servers, select_pieces
from ablate.setup.pieces import Piece, setup_pieces, side_pieces

#: The worktree operation kinds this module applies.
PIECE_OPS = ("cutrange", "cuthooks", "cutmcp")


def _read_json(path: Path, where: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{where}: cannot read it as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not a JSON object")
    return data


def apply_piece_op(root: Path, op: dict[str, Any]) -> None:
    """Apply one piece operation under ``root`` (a cell's config dir or worktree)."""
    kind, rel = op["op"], op["rel"]
    where = f"{root / rel} (cutting {', '.join(op.get('pieces', []))})"
    path = shadowfs.detach(root, rel)
    if kind == "cutrange":
        data = path.read_bytes()
        new = cut_ranges(data, op["ranges"], where=where)
        mode = path.stat().st_mode & 0o7777
        shadowfs.remove_path(path)
        path.write_bytes(new)
        path.chmod(mode)
    elif kind == "cuthooks":
        shadowfs.write_json_file(path, drop_hooks(_read_json(path, where), op["hooks"], where=where))
    elif kind == "cutmcp":
        obj = drop_servers(_read_json(path, where), op["key"], op["servers"], where=where)
        shadowfs.write_json_file(path, obj)
    else:
        raise UsageError(f"unknown piece operation {kind!r}")


def apply_cuts(
    root: Path, ops: Sequence[dict[str, Any]], *, also: dict[str, Path] | None = None
) -> list[str]:
    """Apply ``ops`` under ``root``; ``also`` maps a file to a second copy cut the same way (the account
    state, copied into the shadow home too). Returns the files changed, relative to ``root``."""
    changed: list[str] = []
    for op in ops:
        if op["op"] == "remove":
            shadowfs.remove(root, op["rel"])
        else:
            apply_piece_op(root, op)
            extra = (also or {}).get(op["rel"])
            if extra is not None and extra.is_file():
                apply_piece_op(extra.parent, {**op, "rel": extra.name})
        changed.append(op["rel"])
    return changed


def cut_side(root: Path, pieces: Sequence[Piece], *, also: dict[str, Path] | None = None) -> list[str]:
    """Cut ``pieces`` (all of ``root``'s side) from ``root``; the files changed."""
    return apply_cuts(root, cut_ops(pieces), also=also)


def cell_pieces(setup: Setup, catalog: Catalog, cell: ResolvedCell) -> list[Piece]:
    """The setup's pieces ``cell`` cuts (an unknown id: ``UsageError``), but those of layers it strips."""
    if not cell.pieces:
        return []
    chosen = select_pieces(setup_pieces(setup, catalog), cell.pieces, where=f"cell {cell.id}: strip_pieces")
    return [p for p in chosen if p.layer not in cell.stripped]


def repo_piece_ops(setup: Setup, repo_layers: Sequence[Layer], cell: ResolvedCell) -> list[dict[str, Any]]:
    """The worktree operations that cut ``cell``'s repo-side pieces."""
    if not cell.pieces:
        return []
    found = side_pieces(setup.repo, repo_layers, setup.memory_slug)
    wanted = set(cell.pieces)
    return cut_ops([p for p in found if p.id in wanted and p.layer not in cell.stripped])

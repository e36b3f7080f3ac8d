"""Cutting pieces out of a setup (docs/PIECES.md#cuts) as plain JSON file operations, applied by
:mod:`ablate.isolate.piece_ops`; each carries what it expects to find, so a cell whose copy differs from the
setup the pieces were read from is refused instead of cut in the wrong place."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from ablate.core.errors import UsageError
from ablate.core.fsutil import sha256_bytes
from ablate.setup.pieces import Piece

#: The fewest pieces a piece design needs (one piece is a layer ablation: use the layered run).
MIN_PIECES = 2


def select_pieces(pieces: Sequence[Piece], ids: Iterable[str], *, where: str = "--pieces") -> list[Piece]:
    """The pieces named by ``ids``, in the setup's order; an unknown id is a located :class:`UsageError`."""
    by_id = {p.id: p for p in pieces}
    wanted = list(dict.fromkeys(ids))
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        close = {u: difflib.get_close_matches(u, list(by_id), n=1) for u in unknown}
        said = ", ".join(f"{u!r}" + (f" (did you mean {c[0]!r}?)" if c else "") for u, c in close.items())
        raise UsageError(
            f"{where}: unknown piece id {said}", hint="`ablate pieces` lists the ids of this setup's pieces"
        )
    chosen = set(wanted)
    return [p for p in pieces if p.id in chosen]


def require_pieces(pieces: Sequence[Piece], *, where: str) -> None:
    """A piece design needs at least :data:`MIN_PIECES` pieces."""
    if len(pieces) < MIN_PIECES:
        found = ", ".join(p.id for p in pieces) or "none"
        raise UsageError(
            f"{where}: {len(pieces)} piece(s) ({found}); a piece design needs at least {MIN_PIECES}",
            hint="add sections (Markdown headings) to CLAUDE.md, or compare whole layers with `ablate run`",
        )


def cut_ops(pieces: Sequence[Piece]) -> list[dict[str, Any]]:
    """The operations that remove ``pieces`` (all of one side) from a copy of that side; a range carries
    the sha256 of the section read from the setup, so it cuts exactly those bytes or refuses."""
    ops: list[dict[str, Any]] = []
    by_file: dict[tuple[str, str], list[Piece]] = {}
    for p in pieces:
        if p.cut == "entry":
            ops.append({"op": "remove", "rel": p.file, "piece": p.id})
        else:
            by_file.setdefault((p.cut, p.file), []).append(p)
    for (cut, rel), group in by_file.items():
        ids = [p.id for p in group]
        if cut == "range":
            ranges = sorted([p.start, p.end, p.digest] for p in group)
            ops.append({"op": "cutrange", "rel": rel, "ranges": ranges, "pieces": ids})
        elif cut == "hook":
            hooks = sorted([p.locator[0], int(p.locator[1]), int(p.locator[2])] for p in group)
            ops.append({"op": "cuthooks", "rel": rel, "hooks": hooks, "pieces": ids})
        else:
            servers = sorted(p.locator[1] for p in group)
            ops.append(
                {"op": "cutmcp", "rel": rel, "key": group[0].locator[0], "servers": servers, "pieces": ids}
            )
    return ops


def cut_ranges(data: bytes, ranges: Sequence[Sequence[Any]], *, where: str) -> bytes:
    """``data`` without the byte ranges ``[start, end, sha256-or-""]`` (the rest byte-identical)."""
    out = bytearray(data)
    for start, end, want in sorted((tuple(r) for r in ranges), reverse=True):
        if not 0 <= start <= end <= len(data) or (want and sha256_bytes(data[start:end]) != want):
            raise UsageError(
                f"{where}: bytes {start}..{end} are not the section that was read from the setup",
                hint="the file changed since the pieces were listed: list them again (`ablate pieces`)",
            )
        del out[start:end]
    return bytes(out)


def drop_hooks(settings: dict[str, Any], hooks: Iterable[Sequence[Any]], *, where: str) -> dict[str, Any]:
    """``settings`` without the hook entries ``(event, group index, hook index)``; a group left with no
    hook, and an event left with no group, go too. Every other key and entry stays as it was."""
    out = copy.deepcopy(settings)
    table: Any = out.get("hooks")
    by_group: dict[tuple[str, int], set[int]] = {}
    for event, gi, hi in hooks:
        by_group.setdefault((str(event), int(gi)), set()).add(int(hi))
    for (event, gi), his in by_group.items():
        try:
            group = table[event][gi]
            entries = group["hooks"]
            if max(his) >= len(entries):
                raise IndexError(max(his))
        except (KeyError, IndexError, TypeError):
            raise UsageError(
                f"{where}: no hook entry {event}[{gi}] with {sorted(his)} in `hooks`",
                hint="the settings changed since the pieces were listed: list them again (`ablate pieces`)",
            ) from None
        group["hooks"] = [h for i, h in enumerate(entries) if i not in his]
    assert isinstance(table, dict)
    for event in list(table):
        groups = table[event]
        if isinstance(groups, list):
            kept = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
            if kept:
                table[event] = kept
            else:
                del table[event]
    return out


def drop_servers(obj: dict[str, Any], key: str, servers: Iterable[str], *, where: str) -> dict[str, Any]:
    """``obj`` without the servers named in its ``key`` (``mcpServers``) table."""
    out = copy.deepcopy(obj)
    table = out.get(key)
    for name in servers:
        if not isinstance(table, dict) or name not in table:
            raise UsageError(f"{where}: no MCP server {name!r} in `{key}`")
        del table[name]
    return out

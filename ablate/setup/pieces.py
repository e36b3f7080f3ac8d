"""The pieces of a setup (docs/PIECES.md#kinds): the units below a layer that a cell can remove one by one,
found in the resolved layers; the same enumeration of a cell's own copy lets it be cut by id
(:mod:`ablate.setup.piece_cut`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ablate.core.tokens import tokens_of_chars
from ablate.setup.layers import Catalog, Layer, LayerFiles, hook_entries, json_keys, resolve_layer
from ablate.setup.load import Setup, frontmatter_field, resolve_layers

PieceKind = Literal[
    "section", "import", "skill", "hook", "mcp", "agent", "command", "rule", "output-style", "file", "memory"
]
#: How each kind is cut from a cell: a byte range of a file, a whole file or folder, or a JSON entry.
CutBy = Literal["range", "entry", "hook", "mcp"]

#: Instruction layers whose files are split into sections (the CLI loads them whole, by itself).
SECTIONED = ("user-claude-md", "repo-claude-md")
#: Layers whose entries (below these folders) are one piece each, and the kind of piece.
ENTRY_KINDS: dict[str, PieceKind] = {
    "skills/": "skill",
    ".claude/skills/": "skill",
    "agents/": "agent",
    ".claude/agents/": "agent",
    "commands/": "command",
    ".claude/commands/": "command",
    "rules/": "rule",
    "output-styles/": "output-style",
}
#: Layers whose every file is a piece: the repository's knowledge (read when the model opens it) and auto-memory
#: (its ``MEMORY.md`` index reaches the first request).
FILE_KINDS: dict[str, PieceKind] = {"files": "file", "memory": "memory"}
_HEADING = re.compile(rb"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(rb"^\s*(```|~~~)")


@dataclass(frozen=True)
class Piece:
    """One removable piece of a setup."""

    id: str
    layer: str
    kind: PieceKind
    side: str
    """``config`` or ``repo``: the base its ``file`` is relative to."""
    file: str
    """The file (or folder, for skills) the piece lives in, relative to its side."""
    name: str
    """What a person calls it: the heading, the skill's folder, the hook's event and command, the server."""
    bytes: int
    text: str = field(repr=False)
    """The piece's own text: what leaves the first request when the piece is cut (JSON for hooks/servers)."""
    cut: CutBy = "entry"
    start: int = 0
    """Section pieces: the byte range ``[start, end)`` of the section in ``file``."""
    end: int = 0
    line: int = 0
    """Section pieces: the heading's line number in ``file`` (1-based)."""
    digest: str = ""
    """Section pieces: the sha256 of the section's bytes (a cut checks it removes exactly these)."""
    locator: tuple[str, ...] = ()
    """Hook pieces: (event, group index, hook index); MCP pieces: (key, server name)."""

    @property
    def shown_text(self) -> str:
        """What of the piece reaches the first request (docs/PIECES.md#kinds): a skill, agent or command its
        listing line; a hook, MCP server or knowledge file nothing; an auto-memory file only its index."""
        if self.kind in ("skill", "agent", "command"):
            return f"{self.name}: {frontmatter_field(self.text, 'description')}"
        if self.kind in ("hook", "mcp", "file") or (
            self.kind == "memory" and not self.file.endswith("MEMORY.md")
        ):
            return ""
        return self.text

    @property
    def est_tokens(self) -> int:
        """The estimate (:func:`ablate.core.tokens.tokens_of_chars`, the sim's own rule) of :attr:`shown_text`."""
        return tokens_of_chars(len(self.shown_text))

    def to_json(self, tokens: int | None = None, source: str = "estimate") -> dict[str, Any]:
        shown = {k: getattr(self, k) for k in ("id", "layer", "kind", "side", "file", "name", "bytes")}
        return shown | {"tokens": self.est_tokens if tokens is None else tokens, "tokens_source": source}


def name_slug(text: str) -> str:
    """``## Money & time`` → ``money-time``: lower-case letters and digits joined by single dashes."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return out or "piece"


@dataclass(frozen=True)
class Section:
    heading: str
    """The heading's text (``preamble`` for the text before the first heading)."""
    start: int
    end: int


def sections(data: bytes) -> list[Section]:
    """Split Markdown into sections at every ATX heading outside fenced code: a flat partition of the bytes
    (nested headings are sections of their own). A preamble that is only whitespace is no section."""
    starts: list[tuple[int, str]] = []
    pos = 0
    fence: bytes | None = None
    for line in data.splitlines(keepends=True):
        stripped = line.rstrip(b"\r\n")
        m = _FENCE.match(stripped)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
        elif fence is None and (h := _HEADING.match(stripped)):
            starts.append((pos, h.group(2).decode("utf-8", errors="replace").strip() or "heading"))
        pos += len(line)
    out: list[Section] = []
    first = starts[0][0] if starts else len(data)
    if data[:first].strip():
        out.append(Section("preamble", 0, first))
    for i, (start, heading) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(data)
        out.append(Section(heading, start, end))
    return out


class _Ids:
    """Unique ids per layer: a repeated slug gets ``-2``, ``-3`` in the order met."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def make(self, layer: str, name: str) -> str:
        base = f"{layer}#{name_slug(name)}"
        pid, n = base, 1
        while pid in self.seen:
            n += 1
            pid = f"{base}-{n}"
        self.seen.add(pid)
        return pid


def _section_pieces(lf: LayerFiles, side: str, ids: _Ids) -> Iterator[Piece]:
    for rel in lf.files:
        if not rel.endswith(".md"):
            continue
        data = (lf.base / rel).read_bytes()
        for sec in sections(data):
            chunk = data[sec.start : sec.end]
            yield Piece(
                ids.make(lf.layer.id, sec.heading),
                lf.layer.id,
                "section",
                side,
                rel,
                sec.heading,
                len(chunk),
                chunk.decode("utf-8", errors="replace"),
                cut="range",
                start=sec.start,
                end=sec.end,
                line=data[: sec.start].count(b"\n") + 1,
                digest=hashlib.sha256(chunk).hexdigest(),
            )


def _entry_pieces(lf: LayerFiles, side: str, ids: _Ids) -> Iterator[Piece]:
    """One piece per entry below a piece folder (``skills/<name>``), or per whole file of a file layer."""
    for rel_entry in lf.entries:
        folder = next((f for f in ENTRY_KINDS if rel_entry.rstrip("/") + "/" == f), None)
        if kind := FILE_KINDS.get(lf.layer.shows):
            below = [
                rel for rel in lf.files if rel == rel_entry or rel.startswith(rel_entry.rstrip("/") + "/")
            ]
            for rel in below:
                inner = rel[len(rel_entry) :].strip("/") or Path(rel).name
                name = str(Path(inner).with_suffix("")) if inner != "CLAUDE.md" else str(Path(rel).parent)
                yield _whole(lf, side, ids, rel, kind, [rel], name=name)
            continue
        if folder is None:
            if rel_entry in lf.files and lf.layer.shows == "instructions":
                yield _whole(lf, side, ids, rel_entry, "import", [rel_entry])
            continue
        children: dict[str, list[str]] = {}
        for rel in lf.files:
            if rel.startswith(folder):
                top = rel[len(folder) :].split("/", 1)[0]
                children.setdefault(folder + top, []).append(rel)
        for entry, files in children.items():
            yield _whole(lf, side, ids, entry, ENTRY_KINDS[folder], files)


def _whole(
    lf: LayerFiles, side: str, ids: _Ids, entry: str, kind: PieceKind, files: list[str], name: str = ""
) -> Piece:
    texts = [(lf.base / rel).read_bytes() for rel in files]
    name = name or (Path(entry).stem if kind != "skill" else Path(entry).name)
    text = "".join(t.decode("utf-8", errors="replace") for t in texts)
    return Piece(
        ids.make(lf.layer.id, name), lf.layer.id, kind, side, entry, name, sum(map(len, texts)), text
    )


def _command_name(hook: dict[str, Any]) -> str:
    """The last word of a hook's command that names a file (``python3 ~/x/session_start.py`` → session_start)."""
    words = str(hook.get("command") or hook.get("type") or "hook").split()
    named = [w for w in words if "/" in w or "." in w] or words or ["hook"]
    return Path(named[-1]).stem or "hook"


def _json_pieces(lf: LayerFiles, side: str, ids: _Ids) -> Iterator[Piece]:
    """Hook entries and MCP servers: one piece per entry of the layer's JSON keys (text: sorted-key JSON)."""
    layer = lf.layer.id

    def piece(
        file: str, kind: Literal["hook", "mcp"], id_name: str, name: str, value: object, at: tuple[str, ...]
    ) -> Piece:
        text = json.dumps(value, sort_keys=True)
        pid = ids.make(layer, id_name)
        return Piece(pid, layer, kind, side, file, name, len(text.encode()), text, cut=kind, locator=at)

    for kp in lf.keys:
        obj = json_keys(kp.path) or {}
        if kp.key == "hooks":
            for event, gi, hi, matcher, hook in hook_entries(obj.get("hooks")):
                parts = [event, matcher if matcher not in ("", "*") else "", _command_name(hook)]
                label = f"{event} [{matcher or '*'}] {hook.get('command', hook.get('type', ''))}"
                yield piece(
                    kp.file, "hook", " ".join(p for p in parts if p), label, hook, (event, str(gi), str(hi))
                )
        elif kp.key == "mcpServers" and isinstance(servers := obj.get(kp.key), dict):
            for server, spec in servers.items():
                yield piece(kp.file, "mcp", server, server, {server: spec}, (kp.key, server))


def layer_pieces(lf: LayerFiles, side: str) -> list[Piece]:
    """The pieces of one resolved layer (none for the layers that are not split: plugins, agent memory)."""
    ids = _Ids()
    own = _section_pieces if lf.layer.id in SECTIONED else _entry_pieces
    return [*own(lf, side, ids), *_json_pieces(lf, side, ids)]


def pieces_of(layers: dict[str, LayerFiles], order: Iterable[Layer]) -> list[Piece]:
    """Every piece of the resolved ``layers``, in the order of ``order`` (the catalog)."""
    out: list[Piece] = []
    for layer in order:
        lf = layers.get(layer.id)
        if lf is not None and lf.present:
            out.extend(layer_pieces(lf, layer.side))
    return out


def side_pieces(
    base: Path, layers: Iterable[Layer], memory_slug: str, aliases: dict[str, Path] | None = None
) -> list[Piece]:
    """The pieces of ``layers`` (all of one side) found under ``base`` (a setup's side, or a cell's copy)."""
    order = list(layers)
    resolved = {
        layer.id: resolve_layer(layer, base, memory_slug=memory_slug, aliases=aliases) for layer in order
    }
    return pieces_of(resolved, order)


def repeated_headings(pieces: Iterable[Piece]) -> list[str]:
    """A located note for each heading that appears more than once in one file, with the ids it got."""
    seen: dict[tuple[str, str, str], list[Piece]] = {}
    for p in pieces:
        if p.kind == "section":
            seen.setdefault((p.layer, p.file, p.name), []).append(p)
    return [
        f"{group[0].file} ({layer}): heading {name!r} appears {len(group)} times (lines "
        + ", ".join(str(p.line) for p in group)
        + "): ids "
        + ", ".join(p.id for p in group)
        + " (numbered in file order: rename a heading to keep its id when others move)"
        for (layer, _file, name), group in seen.items()
        if len(group) > 1
    ]


def setup_pieces(setup: Setup, catalog: Catalog) -> list[Piece]:
    """Every piece of ``setup`` (config side, then repo side, each in catalog order); never writes."""
    layers = resolve_layers(setup, catalog)
    return [
        p for side in ("config", "repo") for p in pieces_of(layers, [x for x in catalog if x.side == side])
    ]

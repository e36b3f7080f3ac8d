"""Variant content for a file layer (what a variant cell or a compare arm puts in place of its file): another
file, or the same file with one block (a :class:`Selector`, README.md's "Arms") moved to the end or appended
again. Every variant carries the sha256 of its bytes and its source's, so an edit between two runs is caught."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ablate.core.errors import NotFound, SpecError, UsageError
from ablate.core.fsutil import sha256_bytes

Op = Literal["original", "move", "duplicate"]

_HEADING_RE = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_MARKER_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


@dataclass(frozen=True)
class Selector:
    """Which block of a file a transform acts on."""

    kind: Literal["heading", "marker"]
    value: str
    """The heading's text (without the leading ``#``s), or the marker name."""

    def __str__(self) -> str:
        return f"marker:{self.value}" if self.kind == "marker" else self.value

    @classmethod
    def parse(cls, text: str) -> Selector:
        """``marker:NAME`` selects a marker span; anything else a heading (``## Rules`` or ``Rules``)."""
        text = text.strip()
        if text.startswith("marker:"):
            name = text[len("marker:") :].strip()
            if not _MARKER_NAME_RE.match(name):
                raise UsageError(
                    f"block selector {text!r}: marker names are 1-64 letters, digits, '_', '.', ':' or '-'",
                    hint="write marker:NAME for a span between <!-- NAME --> and <!-- /NAME -->",
                )
            return cls("marker", name)
        heading = re.sub(r"^#{1,6}[ \t]*", "", text).strip()
        if not heading:
            raise UsageError(
                f"block selector {text!r} is empty",
                hint="name a heading (e.g. 'Rules' or '## Rules') or a marker (marker:NAME)",
            )
        return cls("heading", heading)


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, text) of every Markdown heading outside fenced code."""
    out: list[tuple[int, int, str]] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        m = _FENCE_RE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark[0] * len(mark)
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        h = _HEADING_RE.match(line.rstrip("\r\n"))
        if h:
            out.append((i, len(h.group(1)), h.group(2).strip()))
    return out


def find_block(text: str, selector: Selector, *, source: str = "<text>") -> tuple[int, int]:
    """The block's line range ``[start, end)``; a located error unless exactly one block matches."""
    lines = text.splitlines(keepends=True)

    def fail(message: str, hint: str | None = None) -> SpecError:
        return SpecError.single(source, f"block {selector}", message, hint=hint)

    if selector.kind == "heading":
        heads = _headings(lines)
        want = selector.value.casefold()
        hits = [(i, lvl) for i, lvl, t in heads if t.casefold() == want]
        if not hits:
            known = ", ".join(repr(t) for _, _, t in heads[:20]) or "none"
            raise fail(f"no heading {selector.value!r} (headings: {known})")
        if len(hits) > 1:
            where = ", ".join(f"line {i + 1}" for i, _ in hits)
            raise fail(
                f"heading {selector.value!r} occurs {len(hits)} times ({where}); the block is ambiguous",
                hint="rename one heading, or mark the block with <!-- NAME --> … <!-- /NAME -->",
            )
        start, level = hits[0]
        return start, next((i for i, lvl, _ in heads if i > start and lvl <= level), len(lines))
    open_re = re.compile(r"^\s*<!--\s*" + re.escape(selector.value) + r"\s*-->\s*$")
    close_re = re.compile(r"^\s*<!--\s*/" + re.escape(selector.value) + r"\s*-->\s*$")
    opens = [i for i, line in enumerate(lines) if open_re.match(line)]
    closes = [i for i, line in enumerate(lines) if close_re.match(line)]
    marker = f"<!-- {selector.value} -->"
    if not opens or not closes:
        missing = marker if not opens else f"<!-- /{selector.value} -->"
        raise fail(f"no {missing} line")
    if len(opens) > 1 or len(closes) > 1:
        raise fail(f"marker {marker} occurs more than once; the block is ambiguous")
    if closes[0] < opens[0]:
        raise fail(f"<!-- /{selector.value} --> comes before {marker}")
    return opens[0], closes[0] + 1


def _join_at_end(head: str, block: str, nl: str) -> str:
    head = head.rstrip("\r\n")
    block = block.strip("\r\n")
    if not head:
        return block + nl
    return head + nl + nl + block + nl


def transform(text: str, op: Op, selector: Selector | None, *, source: str = "<text>") -> str:
    """Apply ``op`` to ``text``: ``original`` returns it unchanged; ``move``/``duplicate`` need a selector."""
    if op == "original":
        return text
    if selector is None:
        raise UsageError(f"a {op} variant needs a block selector (a heading or marker:NAME)")
    start, end = find_block(text, selector, source=source)
    lines = text.splitlines(keepends=True)
    block = "".join(lines[start:end])
    nl = "\r\n" if "\r\n" in text else "\n"
    kept = "".join(lines[:start] + lines[end:]) if op == "move" else text
    return _join_at_end(kept, block, nl)


@dataclass(frozen=True)
class Variant:
    """A file's content as one arm or variant cell will hold it."""

    source: Path
    op: Op = "original"
    selector: Selector | None = None

    def describe(self) -> str:
        if self.op == "original":
            return str(self.source)
        verb = "moved to the end" if self.op == "move" else "duplicated at the end"
        return f"{self.source} with block {str(self.selector)!r} {verb}"

    def render(self) -> Rendered:
        """Read the source now and build the bytes; the result carries both fingerprints."""
        try:
            raw = self.source.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"{self.source}: no such file") from None
        except IsADirectoryError:
            raise UsageError(f"{self.source} is a folder; a variant is one file") from None
        if self.op == "original":
            data = raw
        else:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SpecError.single(
                    self.source, "", f"not UTF-8 text ({exc.reason} at byte {exc.start}); cannot find blocks"
                ) from None
            data = transform(text, self.op, self.selector, source=str(self.source)).encode("utf-8")
        return Rendered(self, data, sha256_bytes(data), sha256_bytes(raw))


@dataclass(frozen=True)
class Rendered:
    """The bytes of a variant, read once: every session of a run gets exactly these."""

    variant: Variant
    data: bytes
    fingerprint: str
    """sha256 of ``data``: the bytes the cell holds."""
    source_sha256: str
    """sha256 of the source file when it was read."""

    def source_changed(self) -> bool:
        """True when the source file's bytes differ now from when this variant was rendered."""
        try:
            return sha256_bytes(self.variant.source.read_bytes()) != self.source_sha256
        except OSError:
            return True

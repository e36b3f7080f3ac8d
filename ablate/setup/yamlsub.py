"""A small, safe reader for the YAML subset plugin-eval suites use (docs/CLAUDE-CODE.md#plugin-eval; PyYAML is
not a dependency): the rest is refused with a :class:`YamlSubsetError` naming the line. Plain scalars follow
YAML 1.2's core schema (``yes``, ``on``: strings)."""

from __future__ import annotations

import json
import re

_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_KEY = re.compile(
    r"^(?P<key>\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^\s#'\"\[\]{},&*!|>?@`%-][^#]*?|-[^\s#][^#]*?)\s*:(?:\s+|$)"
)


class YamlSubsetError(ValueError):
    """Text outside the supported subset, or malformed: ``line`` is 1-based within the parsed text."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


def _strip_comment(text: str) -> str:
    """``text`` without a trailing ``# comment`` (a ``#`` after whitespace, outside quotes)."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'" and (i == 0 or text[i - 1] in " \t[{,:"):
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
    return text.rstrip()


def _plain(text: str, line: int) -> object:
    if text[:1] in ("&", "*", "!"):
        raise YamlSubsetError(
            line, f"{text!r}: anchors, aliases and tags are not supported; write the value out"
        )
    if text[:1] in ("@", "`", "%"):
        raise YamlSubsetError(line, f"{text!r}: a plain value cannot start with {text[0]!r}; quote it")
    low = text.lower()
    if low in ("", "~", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


def _quoted(text: str, line: int) -> tuple[str, str]:
    """(value, rest) of a quoted scalar at the start of ``text``."""
    if text[0] == '"':
        m = re.match(r'"((?:[^"\\]|\\.)*)"', text)
        if not m:
            raise YamlSubsetError(line, "unterminated double-quoted string (it must close on the same line)")
        try:
            value = json.loads(m.group(0))
        except ValueError as exc:
            raise YamlSubsetError(line, f"bad escape in a double-quoted string: {exc}") from exc
        return str(value), text[m.end() :]
    m = re.match(r"'((?:[^']|'')*)'", text)
    if not m:
        raise YamlSubsetError(line, "unterminated single-quoted string (it must close on the same line)")
    return m.group(1).replace("''", "'"), text[m.end() :]


def _scalar(text: str, line: int) -> object:
    text = text.strip()
    if text[:1] in ("'", '"'):
        value, rest = _quoted(text, line)
        if rest.strip():
            raise YamlSubsetError(line, f"unexpected text after a quoted string: {rest.strip()!r}")
        return value
    if text[:1] in ("[", "{"):
        collection, rest = _flow(text, line)
        if rest.strip():
            raise YamlSubsetError(line, f"unexpected text after a flow collection: {rest.strip()!r}")
        return collection
    return _plain(text, line)


def _flow(text: str, line: int) -> tuple[object, str]:
    """A one-line flow sequence or mapping at the start of ``text``: (value, rest)."""
    close = "]" if text[0] == "[" else "}"
    items: list[object] = []
    mapping: dict[str, object] = {}
    rest = text[1:].lstrip()
    while True:
        if not rest:
            raise YamlSubsetError(line, f"unterminated flow collection (no {close!r} on this line)")
        if rest[0] == close:
            return (items if close == "]" else mapping), rest[1:]
        if close == "}":
            m = re.match(r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^:,{}\[\]]+?)\s*:\s*", rest)
            if not m:
                raise YamlSubsetError(line, f"expected 'key: value' in a flow mapping at {rest!r}")
            key = _scalar(m.group(1), line)
            if not isinstance(key, str):
                key = str(key)
            if key in mapping:
                raise YamlSubsetError(line, f"duplicate key {key!r}")
            value, rest = _flow_item(rest[m.end() :], line)
            mapping[key] = value
        else:
            value, rest = _flow_item(rest, line)
            items.append(value)
        rest = rest.lstrip()
        if not rest:
            raise YamlSubsetError(line, f"unterminated flow collection (no {close!r} on this line)")
        if rest[:1] == ",":
            rest = rest[1:].lstrip()
        elif rest[:1] != close:
            raise YamlSubsetError(line, f"expected ',' or {close!r} at {rest!r}")


def _flow_item(text: str, line: int) -> tuple[object, str]:
    text = text.lstrip()
    if text[:1] in ("[", "{"):
        return _flow(text, line)
    if text[:1] in ("'", '"'):
        return _quoted(text, line)
    m = re.match(r"[^,\]}]*", text)
    assert m is not None
    return _plain(m.group(0).strip(), line), text[m.end() :]


class _Reader:
    def __init__(self, text: str, first_line: int) -> None:
        self.lines = text.splitlines()
        self.first = first_line
        self.i = 0

    def lineno(self) -> int:
        return self.first + self.i

    def skip_blank(self) -> None:
        while self.i < len(self.lines) and not _strip_comment(self.lines[self.i]).strip():
            self.i += 1

    def indent_of(self, raw: str) -> int:
        body = raw.lstrip(" ")
        if body.startswith("\t"):
            raise YamlSubsetError(self.lineno(), "tab indentation is not allowed in YAML; indent with spaces")
        return len(raw) - len(body)

    def next_line(self) -> tuple[int, str] | None:
        """(indentation, content without comment) of the next non-blank line, or None at the end."""
        self.skip_blank()
        if self.i >= len(self.lines):
            return None
        raw = self.lines[self.i]
        return self.indent_of(raw), _strip_comment(raw).strip()

    def node(self, indent: int) -> object:
        """The block node whose lines are indented exactly ``indent``."""
        self.skip_blank()
        raw = self.lines[self.i]
        content = _strip_comment(raw).strip()
        if content == "-" or content.startswith("- "):
            return self.sequence(indent)
        return self.mapping(indent)

    def block_scalar(self, header: str, parent: int) -> str:
        if header not in ("|", "|-", ">", ">-"):
            raise YamlSubsetError(
                self.lineno(), f"block scalar header {header!r}: only |, |-, > and >- are supported"
            )
        self.i += 1
        body: list[str] = []
        indent: int | None = None
        while self.i < len(self.lines):
            raw = self.lines[self.i]
            if raw.strip():
                ind = self.indent_of(raw)
                if ind <= parent:
                    break
                indent = ind if indent is None else indent
                if ind < indent:
                    raise YamlSubsetError(
                        self.lineno(), "a block scalar line is less indented than its first"
                    )
                body.append(raw[indent:])
            else:
                body.append("")
            self.i += 1
        while body and not body[-1]:
            body.pop()
        text = re.sub(r"(?<=[^\n])\n(?=[^\n])", " ", "\n".join(body)) if header[0] == ">" else "\n".join(body)
        return text if header.endswith("-") else text + "\n"

    def value(self, rest: str, indent: int) -> object:
        """The value after ``key:`` or ``- ``: inline, a block scalar or a nested block."""
        rest = _strip_comment(rest).strip()
        if rest.startswith(("|", ">")):
            return self.block_scalar(rest, indent)
        self.i += 1
        if rest:
            return _scalar(rest, self.lineno() - 1)
        self.skip_blank()
        if self.i >= len(self.lines):
            return None
        child = self.indent_of(self.lines[self.i])
        content = _strip_comment(self.lines[self.i]).strip()
        # a sequence may sit at its key's own indentation (``key:\n- a``)
        if child > indent or (child == indent and (content == "-" or content.startswith("- "))):
            return self.node(child)
        return None

    def mapping(self, indent: int) -> dict[str, object]:
        out: dict[str, object] = {}
        while (line := self.next_line()) is not None:
            ind, content = line
            if ind < indent:
                return out
            if ind > indent:
                raise YamlSubsetError(self.lineno(), f"unexpected indentation: {content!r}")
            if content == "---" or content == "...":
                raise YamlSubsetError(self.lineno(), "several YAML documents in one file are not supported")
            if content.startswith("? "):
                raise YamlSubsetError(self.lineno(), "complex mapping keys ('? ') are not supported")
            if content == "-" or content.startswith("- "):
                raise YamlSubsetError(self.lineno(), "a sequence item where a 'key: value' line was expected")
            m = _KEY.match(content)
            if not m:
                raise YamlSubsetError(
                    self.lineno(),
                    f"expected 'key: value', got {content!r} (values continued on the next line are not "
                    "supported: quote the value on one line or use a | block)",
                )
            key = _scalar(m.group("key"), self.lineno())
            key = key if isinstance(key, str) else str(key).lower() if isinstance(key, bool) else str(key)
            if key in out:
                raise YamlSubsetError(self.lineno(), f"duplicate key {key!r}")
            out[key] = self.value(content[m.end() :], indent)
        return out

    def sequence(self, indent: int) -> list[object]:
        out: list[object] = []
        while (line := self.next_line()) is not None:
            ind, content = line
            if ind > indent:
                raise YamlSubsetError(self.lineno(), f"unexpected indentation: {content!r}")
            if ind < indent or not (content == "-" or content.startswith("- ")):
                return out
            item = content[1:].lstrip()
            if item and _KEY.match(item) and item[:1] not in ("'", '"', "[", "{"):
                # ``- key: value`` starts a mapping whose keys sit two columns right of the dash
                child = ind + (len(content) - len(item))
                self.lines[self.i] = " " * child + item
                out.append(self.mapping(child))
            else:
                out.append(self.value(item, indent))
        return out


def loads(text: str, *, first_line: int = 1) -> object:
    """Parse ``text`` (``first_line``: its first line's number in its file); empty is ``None``."""
    reader = _Reader(text.replace("\r\n", "\n"), first_line)
    reader.skip_blank()
    if reader.i >= len(reader.lines):
        return None
    if reader.indent_of(reader.lines[reader.i]) != 0:
        raise YamlSubsetError(reader.lineno(), "the document must start at column 0")
    first = _strip_comment(reader.lines[reader.i]).strip()
    if first.startswith(("[", "{", "'", '"')):
        value = _scalar(first, reader.lineno())
        reader.i += 1
    else:
        value = reader.node(0)
    reader.skip_blank()
    if reader.i < len(reader.lines):
        raise YamlSubsetError(reader.lineno(), f"unexpected text: {reader.lines[reader.i].strip()!r}")
    return value

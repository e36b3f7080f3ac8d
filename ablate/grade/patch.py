"""Reading and applying the unified diffs ablate saves per session (``git diff-tree -p``, no renames)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FilePatch:
    """One file's section of a ``git diff``."""

    path: str
    old_path: str | None
    """None: the file was added."""
    new_path: str | None
    """None: the file was deleted."""
    hunks: list[tuple[int, list[str]]] = field(default_factory=list)
    """(old start line, lines with their ``' '``/``'-'``/``'+'`` prefix); ``'\\'`` marks no final newline."""
    binary: bool = False


def _unquote(name: str) -> str:
    if not (name.startswith('"') and name.endswith('"')):
        return name
    raw = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1", "replace").decode("utf-8", "replace")


def _strip_prefix(name: str) -> str | None:
    name = _unquote(name.split("\t")[0])
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def parse_patch(text: str) -> list[FilePatch]:
    """Parse the unified diff ``git diff-tree -p`` writes (no renames) into per-file sections."""
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            cur = FilePatch(path="", old_path="", new_path="")
            files.append(cur)
        elif cur is not None and line.startswith("--- "):
            cur.old_path = _strip_prefix(line[4:])
        elif cur is not None and line.startswith("+++ "):
            cur.new_path = _strip_prefix(line[4:])
            cur.path = cur.new_path or cur.old_path or ""
        elif cur is not None and line.startswith("Binary files "):
            cur.binary = True
        elif cur is not None and line.startswith("@@ "):
            head = line.split("@@")[1].strip()
            old = head.split(" ")[0]
            start = int(old[1:].split(",")[0])
            body: list[str] = []
            i += 1
            while (
                i < len(lines)
                and lines[i][:1] in (" ", "-", "+", "\\")
                and not lines[i].startswith(("--- ", "+++ "))
            ):
                body.append(lines[i])
                i += 1
            cur.hunks.append((start, body))
            continue
        i += 1
    for f in files:
        if not f.path:  # a mode-only change or binary file with no ---/+++ lines: name from the header
            f.path = f.new_path or f.old_path or ""
    return files


def apply_file_patch(before: str | None, patch: FilePatch) -> str | None:
    """The file's content after ``patch`` (None: deleted). Raises ValueError when the patch does not apply."""
    if patch.binary:
        raise ValueError("binary change")
    if patch.new_path is None:
        return None
    old = (before or "").splitlines(keepends=True) if patch.old_path is not None else []
    out: list[str] = []
    pos = 0
    for k, (start, body) in enumerate(patch.hunks, 1):
        begin = max(start - 1, 0) if any(b[:1] in (" ", "-") for b in body) else start
        if begin < pos or begin > len(old):
            raise ValueError(f"hunk {k} (@@ -{start}): out of order or past the end of the file")
        out.extend(old[pos:begin])
        pos = begin
        for j, b in enumerate(body):
            tag, content = b[:1], b[1:]
            no_eol = j + 1 < len(body) and body[j + 1].startswith("\\")
            if tag == "\\":
                continue
            text = content if no_eol else content + "\n"
            if tag in (" ", "-"):
                if pos >= len(old) or old[pos].rstrip("\n") != content:
                    got = old[pos].rstrip("\n") if pos < len(old) else "(the end of the file)"
                    raise ValueError(
                        f"hunk {k} (@@ -{start}): line {pos + 1} is {got!r}, the patch expects {content!r}"
                    )
                pos += 1
            if tag in (" ", "+"):
                out.append(text)
    out.extend(old[pos:])
    return "".join(out)

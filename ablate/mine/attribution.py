"""Which layer of the catalog a path named in a transcript belongs to (for ``ablate usage``).

A transcript names files as the CLI saw them: absolute instruction-file paths, and the model's tool inputs
(Read ``file_path``, Grep ``path``, Glob ``pattern``/``path``, words of a Bash command), absolute or relative
to the session's cwd. A path under the config dir is matched against the config-side globs of the catalog,
one under the session's repo against the repo-side globs; the first layer in catalog order wins (so a root
``CLAUDE.md`` is ``repo-claude-md``, never ``nested-claude-md``)."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ablate.setup.layers import MEMORY_SLUG, Catalog


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A catalog glob as a regex over a relative POSIX path: ``*`` and ``?`` stay inside one folder,
    ``**/`` spans any number of folders, a trailing ``/`` (a folder) matches everything under it."""
    folder = pattern.endswith("/")
    pat = pattern.rstrip("/").replace(MEMORY_SLUG, "*")
    out, i = [], 0
    while i < len(pat):
        if pat.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
            continue
        c = pat[i]
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out) + ("(?:/.*)?" if folder else "") + r"\Z")


@dataclass(frozen=True)
class LayerMatcher:
    """The catalog's globs, compiled per side, in catalog order."""

    config: tuple[tuple[str, re.Pattern[str]], ...]
    repo: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def from_catalog(cls, catalog: Catalog) -> LayerMatcher:
        sides: dict[str, list[tuple[str, re.Pattern[str]]]] = {"config": [], "repo": []}
        for layer in catalog:
            sides[layer.side].extend((layer.id, glob_regex(p)) for p in layer.paths)
        return cls(tuple(sides["config"]), tuple(sides["repo"]))

    def layer_of(self, path: str, *, config_dir: str, cwd: str | None) -> tuple[str, str] | None:
        """``(layer id, path relative to its side)`` for an absolute or cwd-relative path, or None."""
        full = _absolute(path, cwd)
        if full is None:
            return None
        for base, rules in ((config_dir, self.config), (cwd, self.repo)):
            rel = _under(full, base)
            if rel is None:
                continue
            for layer_id, rx in rules:
                if rx.match(rel):
                    return layer_id, rel
        return None


def _absolute(path: str, cwd: str | None) -> str | None:
    path = path.strip().strip("'\"")
    if not path or "\n" in path:
        return None
    if path.startswith("~"):
        return None  # the session's HOME is not recorded: never guess
    if not path.startswith("/"):
        if not cwd:
            return None
        path = posixpath.join(cwd, path)
    return posixpath.normpath(path)


def _under(full: str, base: str | None) -> str | None:
    if not base:
        return None
    base = base.rstrip("/")
    if full == base or not full.startswith(base + "/"):
        return None
    return full[len(base) + 1 :]


#: Glob characters a Glob pattern may end in: the folder before them is what the model looked at.
_GLOB_TAIL = re.compile(r"/?[^/]*[*?\[].*\Z")
_PATHISH = re.compile(r"[A-Za-z0-9_.~-]*/|\.[A-Za-z0-9]+\Z|\A[A-Z][A-Z0-9_-]*\.md\Z")


def paths_in_tool_input(tool: str, inp: dict[str, Any]) -> Iterator[str]:
    """The paths a Read/Grep/Glob/Bash call names (a Glob pattern counts as its folder part)."""
    if tool in ("Read", "NotebookRead"):
        for key in ("file_path", "notebook_path", "path"):
            v = inp.get(key)
            if isinstance(v, str):
                yield v
    elif tool == "Grep":
        v = inp.get("path")
        if isinstance(v, str):
            yield v
    elif tool == "Glob":
        base = inp.get("path")
        pattern = inp.get("pattern")
        if isinstance(pattern, str):
            if folder := _GLOB_TAIL.sub("", pattern):
                yield posixpath.join(base, folder) if isinstance(base, str) else folder
            elif isinstance(base, str):
                yield base
        elif isinstance(base, str):
            yield base
    elif tool == "Bash":
        cmd = inp.get("command")
        if isinstance(cmd, str):
            yield from _words(cmd)


def _words(command: str) -> Iterable[str]:
    """Words of a shell command that look like paths (``cat docs/runbooks/deploy.md``, ``ls docs/adr``)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:  # an unbalanced quote: fall back to whitespace
        words = command.split()
    for w in words:
        if "=" in w and not w.startswith(("/", ".")):
            w = w.split("=", 1)[1]  # --file=docs/x.md
        if w and not w.startswith("-") and _PATHISH.search(w):
            yield _GLOB_TAIL.sub("", w) or w

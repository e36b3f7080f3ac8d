"""Detect a session that read a stripped repo layer back through git (docs/ARCHITECTURE.md#repo-side).

History cannot be stripped without changing every commit id the model sees, so a session's Bash commands
(sub-agents included) are read, and items flagged ``read-stripped-via-git`` (a reading git command names a
stripped path) or ``read-history-via-git`` (``git log -p``, ``format-patch``: whole history) are excluded.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import orjson

STRIPPED_FLAG = "read-stripped-via-git"
HISTORY_FLAG = "read-history-via-git"

#: git subcommands that can print or restore file content from the object store.
READERS = frozenset({
    "show", "log", "whatchanged", "diff", "difftool", "cat-file", "checkout", "restore", "switch", "reset",
    "grep", "blame", "annotate", "archive", "stash", "ls-tree", "read-tree", "checkout-index", "format-patch",
    "rev-parse", "clone", "worktree", "fast-export", "bundle", "cherry-pick", "revert", "merge", "rebase",
    "apply", "am", "update-index", "sparse-checkout",
})  # fmt: skip
#: Subcommands that dump whole commits or the whole history when no path is named.
_WHOLE = frozenset({"format-patch", "clone", "archive", "fast-export", "bundle"})
_PATCH_OPTS = frozenset({"-p", "-u", "--patch", "--full-diff", "--patch-with-stat", "--patch-with-raw"})
#: git options that take a separate value (skipped when finding the subcommand).
_GLOBAL_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
_SEGMENT_SPLIT = re.compile(r"\|\||&&|[;|\n()`]|\$\(")


def bash_commands(transcript: Path) -> Iterator[str]:
    """Every Bash tool command of a session (main thread, then its sub-agents), in order."""
    side = transcript.with_suffix("") / "subagents"
    for path in [transcript, *(sorted(side.glob("agent-*.jsonl")) if side.is_dir() else [])]:
        if not path.is_file():
            continue
        with path.open("rb") as fh:
            for line in fh:
                if b'"tool_use"' not in line:
                    continue
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                msg = rec.get("message") if isinstance(rec, dict) else None
                content = msg.get("content") if isinstance(msg, dict) else None
                for block in content if isinstance(content, list) else []:
                    if not isinstance(block, dict) or block.get("type") != "tool_use":
                        continue
                    inp = block.get("input") if block.get("name") == "Bash" else None
                    cmd = inp.get("command") if isinstance(inp, dict) else None
                    if isinstance(cmd, str):
                        yield cmd


def _git_calls(command: str) -> Iterator[tuple[str, list[str]]]:
    """(subcommand, its arguments) of every ``git`` call in a shell command line (a best-effort split)."""
    for segment in _SEGMENT_SPLIT.split(command):
        try:
            tokens = shlex.split(segment, comments=True)
        except ValueError:
            tokens = segment.split()
        while tokens and ("=" in tokens[0] and not tokens[0].startswith("-")):
            tokens = tokens[1:]  # VAR=value prefixes
        idx = next((i for i, t in enumerate(tokens) if t == "git" or t.endswith("/git")), None)
        if idx is None:
            continue
        rest = tokens[idx + 1 :]
        i = 0
        while i < len(rest) and rest[i].startswith("-"):
            i += 2 if rest[i] in _GLOBAL_WITH_VALUE else 1
        if i < len(rest):
            yield rest[i], rest[i + 1 :]


def _names(arg: str, roots: Sequence[str]) -> bool:
    """Whether a git argument (path, ``REV:path``, pathspec) names a stripped path or a folder holding one."""
    candidates = {arg, arg.split(":", 1)[1] if ":" in arg else arg}
    for cand in candidates:
        cand = cand.strip().strip("'\"").lstrip("./").rstrip("/")
        if not cand:
            continue
        for root in roots:
            if cand == root or cand.startswith(root + "/") or root.startswith(cand + "/"):
                return True
            if "*" in cand or "?" in cand:
                prefix = cand.split("*", 1)[0].split("?", 1)[0].rstrip("/")
                if prefix and (root.startswith(prefix) or prefix.startswith(root)):
                    return True
    return False


def _has_path(args: Sequence[str]) -> bool:
    if "--" in args:
        return len(args) > list(args).index("--") + 1
    return any(":" in a and not a.startswith("-") for a in args)


_NO_PATCH = frozenset({"--stat", "--name-only", "--name-status", "--no-patch", "-s"})


def _dumps_content(sub: str, args: Sequence[str]) -> bool:
    """Whether a path-less git call prints whole commits' or the whole history's content."""
    if sub in _WHOLE or (sub == "worktree" and args[:1] == ["add"]):
        return True
    if sub in ("log", "whatchanged"):
        return bool(_PATCH_OPTS.intersection(args))
    if sub == "show":
        return not _NO_PATCH.intersection(args)
    return sub == "stash" and args[:1] == ["show"] and bool(_PATCH_OPTS.intersection(args))


def classify(command: str, stripped_paths: Sequence[str]) -> set[str]:
    """The flags one Bash command earns."""
    roots = [p.strip("/") for p in stripped_paths if p.strip("/")]
    flags: set[str] = set()
    if not roots:
        return flags
    for sub, args in _git_calls(command):
        if sub not in READERS:
            continue
        if any(_names(a, roots) for a in args if not a.startswith("-")):
            flags.add(STRIPPED_FLAG)
            continue
        if _has_path(args):
            continue
        if _dumps_content(sub, args):
            flags.add(HISTORY_FLAG)
    return flags


def git_history_reads(session_json: Path | None, stripped_paths: Iterable[str]) -> list[str]:
    """The flags of a session (its transcript, sub-agents too) that read stripped content back through git."""
    roots = sorted({p for p in stripped_paths if p})
    if session_json is None or not roots:
        return []
    flags: set[str] = set()
    for cmd in bash_commands(session_json):
        flags |= classify(cmd, roots)
    return sorted(flags)

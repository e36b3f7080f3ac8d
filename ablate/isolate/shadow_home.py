"""The config side of a cell (docs/ARCHITECTURE.md#environments, 3.6, 3.7): a shadow home whose ``.claude`` is
a fresh config dir.

What goes where: docs/ARCHITECTURE.md#config-table. The shadow home holds the config dir as ``.claude``, the
account state as ``.claude.json``, and a symlink to every other entry of the real home.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ablate.core import links
from ablate.isolate import shadowfs
from ablate.setup.layers import hook_entries, json_keys, walk_files
from ablate.setup.load import Leak, Setup, linked_state

#: Folders the CLI writes (docs/CLAUDE-CODE.md#writes-config-dir, docs/CLAUDE-CODE.md#startup-paths): always real, empty folders in a cell; never links.
WRITTEN_DIRS = (
    "projects", "backups", "sessions", "session-env", "shell-snapshots", "telemetry", "todos", "statsig",
    "plugins/store", "file-history", "debug", "cache", "state", "plans", "paste-cache", "ide",
)  # fmt: skip
#: Large read-only trees: a real folder in the cell whose entries are links to the real entries.
LINKED_TREES = ("skills", "agents", "commands", "output-styles", "hooks", "marketplaces")
#: Instruction trees: copied, so stripping or editing them never reaches the real files.
COPIED_TREES = ("rules",)
#: JSON files copied with the real config path rewritten to the cell's.
REWRITTEN_FILES = ("settings.json", "settings.local.json")
CREDENTIALS = ".credentials.json"
ACCOUNT = ".claude.json"
#: CLI-written top-level files of the user's config dir that a cell does not take over.
SKIPPED_FILES = ("history.jsonl",)
#: Unknown top-level entries up to this size are copied, larger ones linked as shared state.
STATE_COPY_LIMIT = 10 * 1024 * 1024
#: Read-only trees (skills, agents, ...) up to this size are copied into a ``links`` cell; larger ones are
#: linked per entry and reported as write-through (a model's append to a linked SKILL.md reaches the real one).
TREE_COPY_LIMIT = 10 * 1024 * 1024
#: Largest hook script scanned for a hard-coded config path.
HOOK_SCAN_LIMIT = 1024 * 1024


@dataclass
class ConfigReport:
    """What populating a cell's config dir had to say."""

    notes: list[str] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)
    """Top-level entries linked to the real config dir because they were too large to copy."""


def path_rewrites(setup: Setup, shadow_config: Path) -> list[tuple[str, str]]:
    """(real, shadow) path pairs rewritten in copied JSON files, longest first."""
    shadow = str(shadow_config)
    reals = {str(setup.config_dir), str(setup.home / ".claude")}
    return sorted(((r, shadow) for r in reals if r != shadow), key=lambda p: -len(p[0]))


def rewrite_text(text: str, pairs: Iterable[tuple[str, str]]) -> tuple[str, int]:
    """Replace each real path (only where the path ends: not followed by a name character)."""
    total = 0
    for real, shadow in pairs:
        pattern = re.compile(re.escape(real) + r"(?![A-Za-z0-9_\-])")
        text, n = pattern.subn(shadow.replace("\\", "\\\\"), text)
        total += n
    return text, total


def account_file(config_dir: Path) -> Path | None:
    """``<config>/.claude.json``, else ``<home>/.claude.json`` next to a ``<home>/.claude`` config dir."""
    inside = config_dir / ACCOUNT
    if inside.is_file():
        return inside
    beside = config_dir.parent / ACCOUNT
    return beside if config_dir.name == ".claude" and beside.is_file() else None


#: The key ``/login`` keeps in the account state; the CLI takes it after the environment's key and an
#: ``apiKeyHelper`` ("/login managed key"). A cell's copy never holds it (:func:`copy_account_state`): the
#: run moves it into ``ANTHROPIC_API_KEY`` (:func:`ablate.isolate.auth.moved_login_key`), which is swapped.
LOGIN_KEY = "primaryApiKey"


def login_key(config_dir: Path) -> tuple[Path, str] | None:
    """The account state holding a ``/login`` key, and the key; None without one."""
    path = account_file(config_dir)
    key = (json_keys(path) or {}).get(LOGIN_KEY) if path else None
    return (path, key) if path and isinstance(key, str) and key else None


def _copy_rewritten(src: Path, dst: Path, pairs: list[tuple[str, str]], report: ConfigReport) -> None:
    text = src.read_text(encoding="utf-8", errors="surrogateescape")
    new, n = rewrite_text(text, pairs)
    dst.write_text(new, encoding="utf-8", errors="surrogateescape")
    shutil.copymode(src, dst)
    if n:
        report.notes.append(f"{dst.name}: rewrote {n} occurrence(s) of the real config path to the cell's")


def _populate_plugins(
    src: Path,
    dst: Path,
    pairs: list[tuple[str, str]],
    report: ConfigReport,
    *,
    link_trees: bool = True,
    keep: Path | None = None,
) -> None:
    dst.mkdir()
    for child in sorted(src.iterdir(), key=lambda p: p.name):
        target = dst / child.name
        if child.name == "store":
            continue  # CLI-written: created empty below
        if links.follow(child) is None:  # dangling: stays so (a loop or an unreadable target raises)
            target.symlink_to(links.dangling_target(child))
        elif child.is_file() and child.suffix == ".json":
            _copy_rewritten(child, target, pairs, report)
        elif child.is_dir() and link_trees:
            shadowfs.link_per_entry(child, target)
        elif child.is_dir() or child.is_file():
            shadowfs.copy_entry(child, target, keep_links_outside=keep)
        else:
            target.symlink_to(child)


def populate_config(
    setup: Setup, shadow_config: Path, *, isolate_state: bool, at_real_path: bool = False
) -> ConfigReport:
    """Fill the new ``shadow_config`` from the user's config dir (docs/ARCHITECTURE.md#config-table); seen
    ``at_real_path``, nothing is rewritten or linked (a link to the real path would be the cell itself)."""
    report = ConfigReport()
    pairs = [] if at_real_path else path_rewrites(setup, shadow_config)
    link_trees = not at_real_path
    # seen at the real path, a link out of the config dir leads where the user's does: kept (see copy_entry)
    keep = setup.config_dir if at_real_path else None
    written_tops = {d.split("/")[0] for d in WRITTEN_DIRS} - {"plugins"}
    linked = linked_state(setup.config_dir, tuple(sorted(written_tops)))  # e.g. projects -> data/projects
    for entry in sorted(setup.config_dir.iterdir(), key=lambda p: p.name):
        name = entry.name
        dst = shadow_config / name
        if name in written_tops or name in SKIPPED_FILES or name == ACCOUNT or name.startswith(ACCOUNT + "."):
            continue
        if name == CREDENTIALS:
            if entry.is_file():
                shutil.copyfile(entry, dst)
                os.chmod(dst, 0o600)
        elif links.follow(entry) is None:  # a loop or an unreadable target raises, located
            dst.symlink_to(links.dangling_target(entry))  # dangling: the CLI reads nothing there, nor here
        elif name in REWRITTEN_FILES and entry.is_file():
            _copy_rewritten(entry, dst, pairs, report)
        elif name in COPIED_TREES:
            walk_files(setup.config_dir, name)  # raises on a symlink loop
            shadowfs.copy_entry(entry, dst, keep_links_outside=keep)
        elif name in LINKED_TREES and entry.is_dir():
            walk_files(setup.config_dir, name)  # raises on a symlink loop
            if not link_trees or shadowfs.tree_size(entry, TREE_COPY_LIMIT) <= TREE_COPY_LIMIT:
                shadowfs.copy_entry(entry, dst, keep_links_outside=keep)
            else:
                shadowfs.link_per_entry(entry, dst)
                report.shared.append(name)
                report.notes.append(
                    f"{name}/: larger than {TREE_COPY_LIMIT // (1024 * 1024)} MB, linked per entry: "
                    "write-through (a session that edits these files changes your real ones)"
                )
        elif name == "plugins" and entry.is_dir():
            _populate_plugins(entry, dst, pairs, report, link_trees=link_trees, keep=keep)
        elif entry.is_file() and name.endswith(".md"):
            shadowfs.copy_entry(entry, dst, keep_links_outside=keep)
        elif hidden := [t for t in linked.values() if shadowfs.is_inside(str(t), os.path.realpath(entry))]:
            _copy_without(entry, dst, hidden, report)
        else:
            size = shadowfs.tree_size(entry, STATE_COPY_LIMIT)
            if isolate_state or at_real_path or size <= STATE_COPY_LIMIT:
                shadowfs.copy_entry(entry, dst, keep_links_outside=keep)
            else:
                dst.symlink_to(entry)
                report.shared.append(name)
                report.notes.append(
                    f"{name}: larger than {STATE_COPY_LIMIT // (1024 * 1024)} MB, linked to the real config dir: "
                    "shared state, written through by every cell (use --isolate-state to copy it)"
                )
    ensure_written_dirs(shadow_config)
    report.leaks.extend(scan_hooks(setup))
    settings = json_keys(setup.config_dir / "settings.json") or {}
    env = settings.get("env")
    if isinstance(env, dict):
        risky = sorted(k for k in env if k.startswith(("ANTHROPIC_", "CLAUDE_")) or k in ("HOME", "PATH"))
        if risky:
            report.notes.append(
                "settings.json `env` sets " + ", ".join(risky) + ": the CLI applies it inside every cell"
            )
    if settings.get("apiKeyHelper"):
        report.notes.append("settings.json has an apiKeyHelper: the CLI runs it in every cell")
    return report


def _copy_without(src: Path, dst: Path, hidden: list[Path], report: ConfigReport) -> None:
    """Copy ``src`` (links followed) without the CLI-written trees behind links (``projects/`` ->
    ``data/projects``): history is never copied, the auto-memory once, where C5 strips it."""
    hidden_real = {os.path.realpath(h) for h in hidden}

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if os.path.realpath(os.path.join(folder, n)) in hidden_real]

    shadowfs.copy_entry(src, dst, ignore=ignore)
    for h in sorted(hidden_real):
        report.notes.append(
            f"{src.name}: left out {h} (CLI-written history behind a link; its auto-memory is copied once)"
        )


def ensure_written_dirs(shadow_config: Path) -> None:
    """Make every CLI-written folder a real, empty one (a nested one only where its parent is)."""
    for rel in WRITTEN_DIRS:
        if "/" in rel and not (shadow_config / rel).parent.is_dir():
            continue
        path = shadowfs.detach(shadow_config, rel)
        if path.is_symlink():
            path.unlink()
        path.mkdir(parents=True, exist_ok=True)


def copy_memory(setup: Setup, shadow_config: Path, cell_slug: str) -> None:
    """Copy (never link) the user's auto-memory to ``projects/<cell_slug>/memory``, where the cell has it."""
    rel = Path("projects") / setup.memory_slug / "memory"
    if (src := setup.config_dir / rel).exists():
        walk_files(setup.config_dir, rel.as_posix())  # raises on a symlink loop
        dst = shadow_config / "projects" / cell_slug / "memory"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shadowfs.copy_entry(src, dst)


def copy_account_state(setup: Setup, shadow_home: Path | None, shadow_config: Path) -> Path | None:
    """Copy the account state into the cell as ``.claude.json`` (config dir, and home when given), 0600."""
    src = account_file(setup.config_dir)
    if src is None:
        return None
    state = json_keys(src)
    for dst in (shadow_config / ACCOUNT, *([shadow_home / ACCOUNT] if shadow_home else [])):
        if state is not None and LOGIN_KEY in state:  # the key goes to the environment, where it is swapped
            dst.write_text(json.dumps({k: v for k, v in state.items() if k != LOGIN_KEY}, indent=2))
        else:
            shutil.copyfile(src, dst)
        os.chmod(dst, 0o600)
    return src


def link_home(setup: Setup, shadow_home: Path) -> None:
    """Link every entry of the real home except ``.claude`` and ``.claude.json``."""
    for entry in sorted(setup.home.iterdir(), key=lambda p: p.name) if setup.home.is_dir() else []:
        if entry.name not in (".claude", ACCOUNT):
            (shadow_home / entry.name).symlink_to(entry)


# ---------------------------------------------------------------------------------------------------------
# Hook scripts that hard-code the real config path


def _command_files(command: str, setup: Setup) -> list[Path]:
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    files = []
    for tok in tokens:
        for var in ("${HOME}", "$HOME"):
            tok = tok.replace(var, str(setup.home))
        for var in ("${CLAUDE_CONFIG_DIR}", "$CLAUDE_CONFIG_DIR"):
            tok = tok.replace(var, str(setup.config_dir))
        if tok.startswith("~/"):
            tok = str(setup.home) + tok[1:]
        if tok.startswith("/") and Path(tok).is_file():
            files.append(Path(tok))
    return files


def scan_hooks(setup: Setup) -> list[Leak]:
    """Hook scripts (named by settings.json hooks, and every file under hooks/) naming the real config path:
    the copied settings.json is rewritten, a script's text cannot be, so each such script is a leak."""
    needles = sorted({str(setup.config_dir), str(setup.home / ".claude")}, key=len, reverse=True)
    candidates: list[Path] = []
    settings = json_keys(setup.config_dir / "settings.json") or {}
    for *_, hook in hook_entries(settings.get("hooks")):
        if isinstance(command := hook.get("command"), str):
            candidates.extend(_command_files(command, setup))
    hooks_dir = setup.config_dir / "hooks"
    if hooks_dir.is_dir():
        candidates.extend(setup.config_dir / rel for rel in walk_files(setup.config_dir, "hooks"))
    leaks: list[Leak] = []
    seen: set[str] = set()
    for path in candidates:
        real = os.path.realpath(path)
        if real in seen or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue  # compiled caches record their source's path; they are not what a hook runs
        seen.add(real)
        try:
            if os.path.getsize(real) > HOOK_SCAN_LIMIT:
                continue
            text = Path(real).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for needle in needles:
            if re.search(re.escape(needle) + r"(?![A-Za-z0-9_\-])", text):
                leaks.append(
                    Leak(
                        "hardcoded-config-path",
                        str(path),
                        f"hook script spells the real config path {needle}: it reads and writes the real "
                        "config dir from every cell (use $HOME/.claude or $CLAUDE_CONFIG_DIR instead)",
                    )
                )
                break
    return leaks

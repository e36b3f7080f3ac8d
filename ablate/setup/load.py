"""The user's setup as ablate sees it: a Claude config dir plus a git repository, resolved and checked."""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

from ablate.core.errors import NotARepo, NotFound, UsageError
from ablate.core.gitutil import live_changes, run_git
from ablate.core.slug import slug
from ablate.setup.kinds import layer_kind
from ablate.setup.layers import Catalog, LayerFiles, json_keys, resolve_layer
from ablate.setup.plugins import plugins_of

#: Files the CLI loads from every ancestor of the cwd (docs/CLAUDE-CODE.md#startup-paths): a leak when found above a worktree.
ANCESTOR_FILES = ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", ".claude", ".mcp.json")
MANAGED_DIR = Path("/etc/claude-code")


@dataclass(frozen=True)
class Setup:
    """A resolved config dir + repository pair."""

    config_dir: Path
    """The config dir, absolute and resolved."""
    repo: Path
    """The repository's working-tree root, absolute and resolved."""
    main_root: Path
    """The git *main* worktree root (auto-memory is keyed by it, docs/CLAUDE-CODE.md#memory-vs-transcript)."""
    home: Path
    """The real home folder whose other entries the shadow homes link to."""
    head: str
    dirty_files: tuple[str, ...] = ()
    """Tracked files with uncommitted changes, and untracked files (not ignored)."""

    @property
    def memory_slug(self) -> str:
        return slug(str(self.main_root))

    @property
    def account_state(self) -> Path | None:
        """The account-state file (``.claude.json``): inside the config dir, or ``~/.claude.json`` when the
        config dir is the default ``~/.claude`` (the CLI keeps it in HOME then, docs/CLAUDE-CODE.md#writes-outside)."""
        inside = self.config_dir / ".claude.json"
        if inside.exists():
            return inside
        beside = self.home / ".claude.json"
        if self.config_dir == (self.home / ".claude").resolve() and beside.exists():
            return beside
        return None

    @property
    def dirty(self) -> bool:
        return bool(self.dirty_files)

    def base(self, side: str) -> Path:
        return self.config_dir if side == "config" else self.repo


def load_setup(config_dir: Path, repo: Path, *, home: Path | None = None) -> Setup:
    """Check and resolve the inputs: an existing config dir, and a non-bare git work tree with commits."""
    config_dir = config_dir.expanduser()
    if not config_dir.exists():
        raise NotFound(
            f"{config_dir}: config dir does not exist",
            hint="pass --config-dir with your Claude config dir (usually ~/.claude)",
        )
    if not config_dir.is_dir():
        raise UsageError(f"{config_dir}: config dir is not a folder", hint="pass --config-dir DIR")
    repo = repo.expanduser()
    if not repo.exists():
        raise NotFound(f"{repo}: repository does not exist", hint="pass --repo with a git work tree")
    if not repo.is_dir():
        raise NotARepo(f"{repo}: not a folder", hint="pass --repo with a git work tree")
    # ablate's own git runner, never GitPython: it scrubs GIT_DIR & co. (which would point at another
    # repository) and never refreshes the user's index
    bare = run_git(repo, "rev-parse", "--is-bare-repository", check=False)
    if bare.returncode != 0:
        raise NotARepo(
            f"{repo}: not a git repository",
            hint="ablate runs tasks in private checkouts of HEAD; pass the repository's root, or `git init` it",
        )
    toplevel = run_git(repo, "rev-parse", "--show-toplevel", check=False)
    if bare.stdout.strip() == "true" or toplevel.returncode != 0 or not toplevel.stdout.strip():
        raise NotARepo(f"{repo}: a bare repository has no working tree", hint="pass a clone with a work tree")
    head_proc = run_git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False)
    if head_proc.returncode != 0:
        raise NotARepo(
            f"{repo}: the repository has no commits", hint="commit something first: ablate checks out HEAD"
        )
    head = head_proc.stdout.strip()
    top = Path(toplevel.stdout.strip()).resolve()
    if top != repo.resolve():
        raise NotARepo(f"{repo}: not the top of the work tree (that is {top})", hint=f"pass --repo {top}")
    common = Path(run_git(top, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout.strip())
    main_root = common.parent.resolve() if common.name == ".git" else top
    # through ablate's own git runner: GitPython's status may refresh (rewrite) the user's index
    dirty = tuple(live_changes(top))
    return Setup(
        config_dir=config_dir.resolve(),
        repo=top,
        main_root=main_root,
        home=(home or Path.home()).resolve(),
        head=head,
        dirty_files=dirty,
    )


def resolve_layers(setup: Setup, catalog: Catalog) -> dict[str, LayerFiles]:
    """Resolve every catalog layer against the setup's config dir or live working tree."""
    aliases = {".claude.json": setup.account_state} if setup.account_state else {}
    return {
        layer.id: resolve_layer(
            layer,
            setup.base(layer.side),
            memory_slug=setup.memory_slug,
            aliases=aliases if layer.side == "config" else None,
        )
        for layer in catalog
    }


_IMPORT_RE = re.compile(r"(?:^|\s)@((?:~/|\./|\.\./|/)?[A-Za-z0-9_./~-]+\.[A-Za-z0-9]+)")


def parse_imports(text: str) -> list[str]:
    """``@path`` imports in a CLAUDE.md (outside fenced code blocks), in order."""
    out: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for m in _IMPORT_RE.finditer(line):
            if m.group(1) not in out:
                out.append(m.group(1))
    return out


#: The CLI follows @imports recursively, at most this many hops from the file it loaded.
MAX_IMPORT_DEPTH = 5


@dataclass
class ImportReport:
    """What the instruction files of one layer ``@import``, followed recursively (cycles stop the walk)."""

    files: list[str] = field(default_factory=list)
    """Imported files (absolute), in the order found, the layer's own files excluded."""
    missing: list[str] = field(default_factory=list)
    """``importing file -> @target`` for targets that do not exist (the CLI skips them silently)."""
    cycles: list[str] = field(default_factory=list)
    """``a -> b -> a`` for imports that lead back to a file already on the path."""
    too_deep: list[str] = field(default_factory=list)
    """Imports beyond MAX_IMPORT_DEPTH hops (the CLI does not load them)."""
    bytes: int = 0
    """Bytes of the imported files that belong to no other layer (they go with this layer when stubbed)."""
    edges: list[tuple[str, str]] = field(default_factory=list)
    """``(importing file, imported file)``, real paths, in the order found."""


def _import_target(imp: str, importer: Path, home: Path) -> Path:
    if imp.startswith("~/"):
        return home / imp[2:]
    return Path(imp) if imp.startswith("/") else importer.parent / imp


def follow_imports(entry: Path, home: Path) -> ImportReport:
    """Follow ``@imports`` from ``entry`` recursively (depth-first, as the CLI inlines them)."""
    rep = ImportReport()
    seen: set[Path] = set()

    def visit(f: Path, path: list[Path]) -> None:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        for imp in parse_imports(text):
            target = _import_target(imp, f, home)
            real = Path(os.path.realpath(target))
            if real in path:
                rep.cycles.append(" -> ".join([*(str(p) for p in path[path.index(real) :]), str(real)]))
                continue
            if not target.is_file():
                rep.missing.append(f"{f} -> @{imp}")
                continue
            if len(path) > MAX_IMPORT_DEPTH:
                rep.too_deep.append(f"{f} -> @{imp}")
                continue
            rep.edges.append((str(f), str(real)))
            if real not in seen:
                seen.add(real)
                rep.files.append(str(real))
                visit(real, [*path, real])

    root = Path(os.path.realpath(entry))
    visit(root, [root])
    return rep


def _owners(layers: dict[str, LayerFiles]) -> dict[str, str]:
    """Each layer file's real path → the layer it belongs to."""
    return {os.path.realpath(lf.base / rel): lid for lid, lf in layers.items() for rel in lf.files}


def layer_import_reports(setup: Setup, layers: dict[str, LayerFiles]) -> dict[str, ImportReport]:
    """For each instruction layer, what its Markdown files import (recursively), missing targets and cycles."""
    owner = _owners(layers)
    out: dict[str, ImportReport] = {}
    for lid, lf in layers.items():
        if lf.layer.shows not in ("instructions", "memory") or not lf.files:
            continue
        total = ImportReport()
        own = {os.path.realpath(lf.base / rel) for rel in lf.files}
        for rel in lf.files:
            if not rel.endswith(".md"):
                continue
            rep = follow_imports(lf.base / rel, setup.home)
            for f in rep.files:
                if f not in own and f not in total.files:
                    total.files.append(f)
                    if f not in owner:
                        with contextlib.suppress(OSError):
                            total.bytes += os.path.getsize(f)
            for name in ("edges", "missing", "cycles", "too_deep"):
                merged = getattr(total, name)
                merged += [item for item in dict.fromkeys(getattr(rep, name)) if item not in merged]
        if total.files or total.missing or total.cycles or total.too_deep:
            out[lid] = total
    return out


def shown_path(path: str, base: Path, home: Path) -> str:
    """``path`` relative to ``base`` when inside it, ``~/...`` under the home, else absolute."""
    for root, prefix in ((os.path.realpath(base), ""), (os.path.realpath(home), "~/")):
        if path.startswith(root + os.sep):
            return prefix + os.path.relpath(path, root)
    return path


def import_lines(setup: Setup, lf: LayerFiles, rep: ImportReport) -> list[str]:
    """``axioms.md imports deep/more.md``: every import edge of a layer, by name."""
    return [
        f"{shown_path(a, lf.base, setup.home)} imports {shown_path(b, lf.base, setup.home)}"
        for a, b in rep.edges
    ]


def layer_imports(setup: Setup, layers: dict[str, LayerFiles]) -> dict[str, list[str]]:
    """For each layer, the other layers its files ``@import`` (followed transitively)."""
    owner = _owners(layers)
    result: dict[str, list[str]] = {}
    for lid, rep in layer_import_reports(setup, layers).items():
        found: list[str] = []
        for f in rep.files:
            other = owner.get(f)
            if other and other != lid and other not in found:
                found.append(other)
        if found:
            result[lid] = found
    return result


# ---------------------------------------------------------------------------------------------------------
# On disk vs loaded by the CLI

#: Instruction files the CLI loads by itself (docs/CLAUDE-CODE.md#layers-reach), per side; everything else only when @imported.
AUTO_LOADED = {
    "config": ("CLAUDE.md", "rules/**/*.md"),
    "repo": ("CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md", ".claude/rules/**/*.md"),
}
#: Settings files that may select an output style, per side (the last one that sets it wins).
STYLE_SETTINGS = {
    "config": ("settings.json", "settings.local.json"),
    "repo": (".claude/settings.json", ".claude/settings.local.json"),
}


def _matches(rel: str, pattern: str) -> bool:
    from fnmatch import fnmatchcase

    if "/**/" in pattern:
        head, tail = pattern.split("/**/", 1)
        return rel.startswith(head + "/") and fnmatchcase(rel.rsplit("/", 1)[-1], tail)
    return rel == pattern


def selected_output_style(setup: Setup) -> tuple[str | None, str]:
    """The ``outputStyle`` the CLI applies (repo local > repo > user local > user settings) and where it is set."""
    chosen: tuple[str | None, str] = (None, "")
    for side in ("config", "repo"):
        for rel in STYLE_SETTINGS[side]:
            data = json_keys(setup.base(side) / rel) or {}
            value = data.get("outputStyle")
            if isinstance(value, str) and value.strip():
                chosen = (value.strip(), str(setup.base(side) / rel))
    return chosen


def frontmatter_field(text: str, key: str) -> str:
    """A one-line ``key: value`` of a Markdown file's YAML front matter ("" when there is none)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return ""
    for line in lines[1:]:
        if line.strip() == "---":
            break
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return value.strip().strip("'\"")
    return ""


def style_name(path: Path) -> str:
    """The name an output style is selected by: its front-matter ``name``, else the file's stem."""
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return path.stem
    return frontmatter_field(head, "name") or path.stem


def skill_loaded(rel: str) -> bool | None:
    """Whether a skill-listing file is listed by the CLI (None: not decided here, e.g. plugins)."""
    parts = rel.split("/")
    if parts[0] == ".claude":
        parts = parts[1:]
    if not parts:
        return False
    if parts[0] == "skills":
        # skills/<name>/SKILL.md only: skills/_internal/<n>/SKILL.md and flat skills/*.md are not skills
        return len(parts) == 3 and parts[2] == "SKILL.md" and not parts[1].startswith(("_", "."))
    if parts[0] in ("commands", "agents"):
        return rel.endswith(".md")
    if parts[0] == "plugins":
        return None  # installed plugins load by their own registry: left to the probe
    return False  # marketplaces/: catalogs, loaded only once installed into plugins/


def listed(lf: LayerFiles, rel: str, setup: Setup | None = None) -> bool:
    """Whether a file of a skill/command/agent layer is in the CLI's listings: by its place
    (:func:`skill_loaded`), and under ``plugins/`` only inside an installed and enabled plugin."""
    if rel.split("/", 1)[0] == "plugins" and lf.layer.side == "config":
        inside = plugins_of(lf.base, setup.repo if setup else None).loads(lf.base / rel)
        return inside is not None and skill_loaded(inside) is True
    return skill_loaded(rel) is True


def loaded_files(setup: Setup, layers: dict[str, LayerFiles]) -> dict[str, list[str] | None]:
    """For each present layer, the files the CLI loads by itself (None: not applicable)."""
    reachable: set[str] = set()
    for side, patterns in AUTO_LOADED.items():
        for lf in layers.values():
            if lf.layer.side != side:
                continue
            for rel in lf.files:
                if any(_matches(rel, p) for p in patterns):
                    real = os.path.realpath(lf.base / rel)
                    reachable.add(real)
                    reachable.update(follow_imports(lf.base / rel, setup.home).files)
    style, _where = selected_output_style(setup)
    out: dict[str, list[str] | None] = {}
    for lid, lf in layers.items():
        if not lf.present:
            continue
        loaded_by = layer_kind(lf.layer.shows).loaded
        if not lf.files:
            out[lid] = None
            continue
        match loaded_by:
            case "not_applicable":
                out[lid] = None
            case "imports":
                out[lid] = [r for r in lf.files if os.path.realpath(lf.base / r) in reachable]
            case "listing":
                out[lid] = [r for r in lf.files if listed(lf, r, setup)]
            case "style":
                out[lid] = [
                    r
                    for r in lf.files
                    if r.endswith(".md") and style is not None and style_name(lf.base / r) == style
                ]
            case "memory":  # the model is told where it is and reads it
                out[lid] = list(lf.files)
            case _:
                assert_never(loaded_by)
    return out


def linked_state(config_dir: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """CLI-written folders of the config dir (``projects``…) that are links, name → the real folder behind.
    Hook-state setups keep ``projects/`` as a link into their own folder (``data/projects``): whatever copies
    that folder must leave the target out, or it carries every transcript and a second copy of the
    auto-memory into each cell (docs/ARCHITECTURE.md#auto-memory)."""
    links = {name: config_dir / name for name in names}
    return {n: Path(os.path.realpath(e)) for n, e in links.items() if e.is_symlink() and e.exists()}


@dataclass(frozen=True)
class Leak:
    """Something outside ablate's control that reaches the model in every cell alike."""

    kind: str
    """ancestor-file, managed-settings, repo-agents-md, bashrc, git-identity, hardcoded-config-path, ..."""
    path: str
    detail: str
    removable: bool = False
    """True when ablate could remove it (e.g. by choosing another worktree root)."""


def ancestor_leaks(start: Path, *, config_dir: Path | None = None) -> list[Leak]:
    """Instruction files in every ancestor folder of ``start`` (the CLI loads them, docs/CLAUDE-CODE.md#startup-paths),
    but ``config_dir``, which each cell holds its own copy of."""
    leaks = []
    own = os.path.realpath(config_dir) if config_dir is not None else None
    for parent in start.resolve().parents:
        for name in ANCESTOR_FILES:
            p = parent / name
            if p.exists() and os.path.realpath(p) != own:
                said = f"{name} in an ancestor of {start}: the CLI loads it in every cell"
                leaks.append(Leak("ancestor-file", str(p), said, removable=True))
    return leaks


def fixed_leaks(setup: Setup, *, managed_dir: Path = MANAGED_DIR) -> list[Leak]:
    """The leaks of docs/ARCHITECTURE.md#leaks that no shadow can remove; reported in every cell alike."""
    leaks: list[Leak] = []
    if managed_dir.exists():
        entries = (
            sorted(p.name for p in managed_dir.iterdir()) if managed_dir.is_dir() else [managed_dir.name]
        )
        said = f"managed settings loaded in every cell: {', '.join(entries)}"
        leaks.append(Leak("managed-settings", str(managed_dir), said))
    agents = setup.repo / "AGENTS.md"
    if agents.exists():
        now = (
            "it has one, so it is not loaded now"
            if (setup.repo / "CLAUDE.md").exists()
            else "it has none, so it is loaded"
        )
        said = f"AGENTS.md in the repo: loaded when the repo has no CLAUDE.md ({now})"
        leaks.append(Leak("repo-agents-md", str(agents), said))
    bashrc = setup.home / ".bashrc"
    if bashrc.exists():
        leaks.append(Leak("bashrc", str(bashrc), "the Bash tool sources ~/.bashrc in every cell"))
    for name in (".gitconfig", ".config/git/config"):
        gc = setup.home / name
        if gc.exists():
            leaks.append(
                Leak("git-identity", str(gc), "git config (user name) appears in the prompt of every cell")
            )
    return leaks


#: Repo folders where knowledge files live; Markdown there that no layer claims is listed as unclassified.
KNOWLEDGE_DIRS = ("docs", "notes", ".claude")
#: Folders never walked for knowledge files (build products, dependencies, VCS).
PRUNED_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", "dist", "build", "target"})


def unclassified_files(setup: Setup, layers: dict[str, LayerFiles], *, limit: int = 500) -> list[str]:
    """Markdown under docs/, notes/ and .claude/ of the repo that no repo-side layer claims (at most ``limit``)."""
    claimed = {rel for lf in layers.values() if lf.layer.side == "repo" for rel in lf.files}
    out: list[str] = []
    for top in KNOWLEDGE_DIRS:
        root = setup.repo / top
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in PRUNED_DIRS)
            for name in sorted(filenames):
                if not name.lower().endswith((".md", ".markdown", ".mdx")):
                    continue
                rel = (Path(dirpath) / name).relative_to(setup.repo).as_posix()
                if rel not in claimed:
                    out.append(rel)
                    if len(out) >= limit:
                        return out
    return out


def mapping_hint(files: list[str]) -> list[str]:
    """One line per folder of unclassified files: the ``[[layer]]`` table that maps it in ablate.toml."""
    folders = Counter(rel.rsplit("/", 1)[0] if "/" in rel else rel for rel in files)
    hints = []
    for folder, n in sorted(folders.items()):
        lid = re.sub(r"[^a-z0-9]+", "-", folder.lower()).strip("-") or "docs"
        hints.append(
            f'{folder}/ ({n} file{"s" if n != 1 else ""}): add to ablate.toml: [[layer]] id = "{lid}" '
            f'side = "repo" paths = ["{folder}/"] strip = "absent" shows = "files"'
        )
    return hints


@dataclass
class Inventory:
    """Everything ``ablate layers`` reports for one setup."""

    setup: Setup
    layers: dict[str, LayerFiles]
    imports: dict[str, list[str]]
    leaks: list[Leak] = field(default_factory=list)
    import_reports: dict[str, ImportReport] = field(default_factory=dict)
    """Per instruction layer: files imported recursively, missing targets, cycles."""
    loaded: dict[str, list[str] | None] = field(default_factory=dict)
    """Per present layer: the files the CLI loads by itself (None: not applicable)."""
    unclassified: list[str] = field(default_factory=list)
    """Repo Markdown under docs/, notes/, .claude/ that no layer claims."""


def inventory(setup: Setup, catalog: Catalog) -> Inventory:
    layers = resolve_layers(setup, catalog)
    leaks = ancestor_leaks(setup.repo, config_dir=setup.config_dir) + fixed_leaks(setup)
    return Inventory(
        setup,
        layers,
        layer_imports(setup, layers),
        leaks,
        import_reports=layer_import_reports(setup, layers),
        loaded=loaded_files(setup, layers),
        unclassified=unclassified_files(setup, layers),
    )

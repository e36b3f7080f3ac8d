"""The user's setup as ablate sees it: a Claude config dir plus a git repository, resolved and checked.

Nothing here writes anything. Bad inputs raise located errors (see ablate.core.errors).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ablate.core.errors import NotARepo, NotFound, UsageError
from ablate.core.gitutil import live_changes, run_git
from ablate.core.slug import slug
from ablate.setup.layers import Catalog, LayerFiles, resolve_layer

#: Files the CLI loads from every ancestor of the cwd (FACTS §3.8): a leak when found above a worktree.
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
    """The git *main* worktree root (auto-memory is keyed by it, FACTS §1.3)."""
    home: Path
    """The real home folder whose other entries the shadow homes link to."""
    head: str
    """The commit HEAD points at."""
    dirty_files: tuple[str, ...] = ()
    """Tracked files with uncommitted changes, and untracked files (not ignored)."""

    @property
    def memory_slug(self) -> str:
        return slug(str(self.main_root))

    @property
    def account_state(self) -> Path | None:
        """The account-state file (``.claude.json``): inside the config dir, or ``~/.claude.json`` when the
        config dir is the default ``~/.claude`` (the CLI keeps it in HOME then, FACTS §2.2)."""
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


def layer_imports(setup: Setup, layers: dict[str, LayerFiles]) -> dict[str, list[str]]:
    """For each layer, the other layers its files ``@import`` (followed transitively)."""
    owner: dict[Path, str] = {}
    for lid, lf in layers.items():
        for rel in lf.files:
            owner[(lf.base / rel).resolve()] = lid
    result: dict[str, list[str]] = {}
    for lid, lf in layers.items():
        found: list[str] = []
        queue = [lf.base / rel for rel in lf.files if rel.endswith(".md")]
        seen: set[Path] = set()
        while queue:
            f = queue.pop(0)
            if f in seen or not f.is_file():
                continue
            seen.add(f)
            try:
                text = f.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for imp in parse_imports(text):
                target = Path(os.path.expanduser(imp)) if imp.startswith("~") else (f.parent / imp)
                target = target.resolve()
                other = owner.get(target)
                if other and other != lid and other not in found:
                    found.append(other)
                if target.is_file() and target.suffix == ".md":
                    queue.append(target)
        if found:
            result[lid] = found
    return result


@dataclass(frozen=True)
class Leak:
    """Something outside ablate's control that reaches the model in every cell alike."""

    kind: str
    """ancestor-file, managed-settings, repo-agents-md, bashrc, git-identity, hardcoded-config-path, ..."""
    path: str
    detail: str
    removable: bool = False
    """True when ablate could remove it (e.g. by choosing another worktree root)."""


def ancestor_leaks(start: Path) -> list[Leak]:
    """Instruction files in every ancestor folder of ``start`` (the CLI loads them, FACTS §0.3)."""
    leaks = []
    for parent in start.resolve().parents:
        for name in ANCESTOR_FILES:
            p = parent / name
            if p.exists():
                leaks.append(
                    Leak(
                        "ancestor-file",
                        str(p),
                        f"{name} in an ancestor of {start}: the CLI loads it in every cell",
                        removable=True,
                    )
                )
    return leaks


def fixed_leaks(setup: Setup, *, managed_dir: Path = MANAGED_DIR) -> list[Leak]:
    """The leaks of DESIGN §3.8 that no shadow can remove; reported in every cell alike."""
    leaks: list[Leak] = []
    if managed_dir.exists():
        entries = (
            sorted(p.name for p in managed_dir.iterdir()) if managed_dir.is_dir() else [managed_dir.name]
        )
        leaks.append(
            Leak(
                "managed-settings",
                str(managed_dir),
                f"managed settings loaded in every cell: {', '.join(entries)}",
            )
        )
    agents = setup.repo / "AGENTS.md"
    if agents.exists():
        has_claude = (setup.repo / "CLAUDE.md").exists()
        leaks.append(
            Leak(
                "repo-agents-md",
                str(agents),
                "AGENTS.md in the repo: loaded when the repo has no CLAUDE.md"
                + (
                    " (it has one, so it is not loaded now)"
                    if has_claude
                    else " (it has none, so it is loaded)"
                ),
            )
        )
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


@dataclass
class Inventory:
    """Everything ``ablate layers`` reports for one setup."""

    setup: Setup
    layers: dict[str, LayerFiles]
    imports: dict[str, list[str]]
    leaks: list[Leak] = field(default_factory=list)


def inventory(setup: Setup, catalog: Catalog) -> Inventory:
    layers = resolve_layers(setup, catalog)
    leaks = ancestor_leaks(setup.repo) + fixed_leaks(setup)
    return Inventory(setup, layers, layer_imports(setup, layers), leaks)

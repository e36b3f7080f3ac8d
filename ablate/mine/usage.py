"""``ablate usage``: what the user's own session history says about each layer of the catalog (README.md's "Your
own history": loaded and used sessions, uses, never-used layers). Every session in the window is read. Never
mixed into a run's counterfactual numbers (a report cites it under its own heading: :func:`provenance_for`);
the library returns plain data, the CLI renders."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ablate.core.errors import NotFound
from ablate.core.slug import slug
from ablate.core.workers import in_workers
from ablate.mine.attribution import LayerMatcher, paths_in_tool_input
from ablate.mine.history import SessionFacts, history_files, scan
from ablate.setup.layers import Catalog, LayerFiles, load_catalog, resolve_layer

SCHEMA_VERSION = 1

#: How a layer reaches the model when it is loaded (``shows`` in the catalog) and whether a transcript
#: records it: repo docs are never auto-loaded (read on demand), output styles and MCP servers leave no
#: load record in a transcript.
UNRECORDED_LOADS = frozenset({"output_style", "mcp"})
ON_DEMAND = frozenset({"files"})


@dataclass(frozen=True)
class Scope:
    """Which history to read."""

    config_dir: Path
    repo: Path | None
    """The repository whose project(s) are read; None: every project."""
    since: datetime | None = None
    last: int | None = None
    """Only the most recent N sessions in the window (by start time)."""


@dataclass
class _Tally:
    loaded: set[str] = field(default_factory=set)
    used: set[str] = field(default_factory=set)
    uses: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (kind, what) -> [count, sessions]


def _name_map(disk: dict[str, LayerFiles | None]) -> dict[str, str]:
    """Skill, command and agent names on disk -> the layer that holds them."""
    out: dict[str, str] = {}
    for layer_id, lf in disk.items():
        if lf is None or lf.layer.shows not in ("skill_listing", "agent_listing"):
            continue
        for rel in lf.files:
            parts = rel.split("/")
            if parts[0] == ".claude":
                parts = parts[1:]
            if len(parts) == 3 and parts[0] == "skills" and parts[2] == "SKILL.md":
                out.setdefault(parts[1], layer_id)
                out.setdefault(_front_name(lf.base / rel) or parts[1], layer_id)
            elif len(parts) >= 2 and parts[0] in ("commands", "agents") and rel.endswith(".md"):
                name = "/".join(parts[1:]).removesuffix(".md").replace("/", ":")
                out.setdefault(name, layer_id)
                if parts[0] == "agents":
                    out.setdefault(_front_name(lf.base / rel) or name, layer_id)
    return out


_FRONT_NAME = re.compile(r"\A---\s*\n(?:.*\n)*?name:\s*['\"]?([^'\"\n]+?)['\"]?\s*\n", re.M)


def _front_name(path: Path) -> str | None:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return None
    m = _FRONT_NAME.match(head)
    return m.group(1).strip() if m else None


def on_disk(catalog: Catalog, config_dir: Path, repo: Path | None) -> dict[str, LayerFiles | None]:
    """Each layer resolved against the config dir or the repo (None: a repo layer with no repo given)."""
    memory_slug = slug(str(repo)) if repo is not None else "*"
    out: dict[str, LayerFiles | None] = {}
    for layer in catalog:
        base = config_dir if layer.side == "config" else repo
        out[layer.id] = None if base is None else resolve_layer(layer, base, memory_slug=memory_slug)
    return out


def _session_layers(
    f: SessionFacts, matcher: LayerMatcher, names: dict[str, str], config_dir: str
) -> tuple[set[str], dict[tuple[str, str, str], int]]:
    """(layers loaded, {(layer, kind, what): count}) for one session."""
    loaded: set[str] = set()
    uses: dict[tuple[str, str, str], int] = {}

    def use(layer: str, kind: str, what: str) -> None:
        uses[(layer, kind, what)] = uses.get((layer, kind, what), 0) + 1

    for path in f.instruction_files:
        if hit := matcher.layer_of(path, config_dir=config_dir, cwd=f.cwd):
            loaded.add(hit[0])
    for name in (*f.skills_listed, *f.agents_listed):
        if layer := _holder(names, name):
            loaded.add(layer)
    for tool, n in f.mcp_calls.items():
        uses[("mcp", "tool", tool)] = n
    if f.hooks_fired:
        loaded.add("hooks")
        for hook, n in f.hooks_fired.items():
            uses[("hooks", "hook", hook)] = uses.get(("hooks", "hook", hook), 0) + n
    invoked = [("skill", s) for s, _outcome in f.skills_invoked] + [("command", c) for c in f.commands]
    for kind, name in invoked:
        if layer := _holder(names, name):
            use(layer, kind, name)
    for tool, inp in f.tool_inputs:
        if tool in ("Agent", "Task"):
            agent = inp.get("subagent_type")
            if isinstance(agent, str) and agent in names:
                use(names[agent], "agent", agent)
            continue
        for path in paths_in_tool_input(tool, inp):
            if hit := matcher.layer_of(path, config_dir=config_dir, cwd=f.cwd):
                use(hit[0], "read", hit[1])
    return loaded, uses


def _holder(names: dict[str, str], name: str) -> str | None:
    """The layer that holds a skill, command or agent: by its name on disk, else ``skills`` for a plugin's
    (listed and invoked as ``plugin:name``)."""
    return names.get(name) or ("skills" if ":" in name and not name.startswith(":") else None)


def _projects_for(config_dir: Path, repo: Path | None) -> list[str] | None:
    """The project folders of ``repo``: its own slug, and the slugs of its subfolders and worktrees
    (``<slug>-...``; each session's cwd is checked afterwards)."""
    if repo is None:
        return None
    own = slug(str(repo))
    try:
        names = [e.name for e in os.scandir(config_dir / "projects") if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return sorted(n for n in names if n == own or n.startswith(own + "-"))


def _in_repo(f: SessionFacts, repo: Path | None) -> bool:
    if repo is None or f.cwd is None:
        return repo is None or f.project == slug(str(repo))
    cwd = f.cwd.rstrip("/")
    return cwd == str(repo) or cwd.startswith(str(repo) + "/")


def _when(iso: str | None) -> datetime | None:
    if not iso:
        return None
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.astimezone()


def collect(scope: Scope, *, jobs: int = 1) -> tuple[list[SessionFacts], dict[str, Any]]:
    """Read the history of ``scope``: the sessions in it, and what was counted about the files."""
    if not scope.config_dir.is_dir():
        raise NotFound(
            f"{scope.config_dir}: config dir does not exist",
            hint="pass --config-dir with your Claude config dir (usually ~/.claude)",
        )
    files = history_files(scope.config_dir, _projects_for(scope.config_dir, scope.repo))
    counts: dict[str, Any] = {
        "files": 0, "empty_files": 0, "junk_files": 0, "unreadable_files": 0, "other_repos": 0,
        "before_window": 0, "beyond_last": 0, "malformed_lines": 0, "truncated_lines": 0, "versions": {},
    }  # fmt: skip
    kept: list[SessionFacts] = []
    for f in in_workers(scan, files, jobs):  # the workers start while the files are still being listed
        counts["files"] += 1
        counts["malformed_lines"] += f.malformed_lines
        counts["truncated_lines"] += f.truncated_lines
        if f.kind != "session":
            counts[f"{f.kind}_files"] += 1
            continue
        if not _in_repo(f, scope.repo):
            counts["other_repos"] += 1
            continue
        started = _when(f.started)
        if scope.since is not None and (started is None or started < scope.since):
            counts["before_window"] += 1
            continue
        kept.append(f)
    kept.sort(key=lambda f: (f.started or "", str(f.path)))
    if scope.last is not None and len(kept) > scope.last:
        counts["beyond_last"] = len(kept) - scope.last
        kept = kept[-scope.last :]
    for f in kept:
        v = f.version or "unknown"
        counts["versions"][v] = counts["versions"].get(v, 0) + 1
    return kept, counts


@dataclass
class UsageResult:
    """The ``ablate usage --json`` document, and one row per session read (for ``--suggest``)."""

    doc: dict[str, Any]
    sessions: list[dict[str, Any]]
    facts: list[SessionFacts] = field(default_factory=list)
    """The sessions read, in the order of ``sessions``."""


def usage_report(scope: Scope, catalog: Catalog | None = None, *, jobs: int = 1) -> UsageResult:
    """Read the history of ``scope`` and count, per layer and per skill (see the module docstring)."""
    catalog = catalog or load_catalog()
    config_dir = scope.config_dir.resolve() if scope.config_dir.exists() else scope.config_dir
    repo = scope.repo.resolve() if scope.repo is not None else None
    scope = Scope(config_dir, repo, scope.since, scope.last)
    sessions, counts = collect(scope, jobs=jobs)
    disk = on_disk(catalog, config_dir, repo)
    names = _name_map(disk)
    matcher = LayerMatcher.from_catalog(catalog)
    tallies = {layer.id: _Tally() for layer in catalog}
    skills = {n: _skill_row(n, lid) for n, lid in names.items() if catalog.get(lid).shows == "skill_listing"}
    per_session: list[dict[str, Any]] = []
    for f in sessions:
        loaded, uses = _session_layers(f, matcher, names, str(config_dir))
        sid = str(f.path)  # two files may carry one session id (a copied or forked session)
        for layer_id in loaded:
            tallies[layer_id].loaded.add(sid)
        for (layer_id, kind, what), n in uses.items():  # each (layer, kind, what) once per session
            t = tallies[layer_id]
            t.used.add(sid)
            entry = t.uses.setdefault((kind, what), [0, 0])
            entry[0] += n
            entry[1] += 1
        _tally_skills(skills, f, names)
        per_session.append(_session_row(f, sorted({k[0] for k in uses})))
    layers = [_layer_row(layer.id, disk[layer.id], tallies[layer.id], catalog) for layer in catalog]
    doc = {
        "schema_version": SCHEMA_VERSION,
        "sessions": {"count": len(sessions), **counts},
        "projects": _projects(sessions),
        "window": _window(scope, sessions),
        "layers": layers,
        "skills": sorted(skills.values(), key=lambda s: (-s["invoked"], -s["listed_sessions"], s["name"])),
        "never_used": _never_used(layers, catalog),
    }
    return UsageResult(doc, per_session, sessions)


def _skill_row(name: str, layer: str | None) -> dict[str, Any]:
    return {"name": name, "layer": layer, "listed_sessions": 0, "invoked": 0, "invoked_sessions": 0, "outcomes": {},
            "last_used": None}  # fmt: skip


def _tally_skills(skills: dict[str, dict[str, Any]], f: SessionFacts, names: dict[str, str]) -> None:
    for name in dict.fromkeys(f.skills_listed):
        if name in skills:
            skills[name]["listed_sessions"] += 1
    invoked: dict[str, None] = {}
    for name, outcome in f.skills_invoked:
        row = skills.setdefault(name, _skill_row(name, names.get(name)))
        row["invoked"] += 1
        row["outcomes"][outcome] = row["outcomes"].get(outcome, 0) + 1
        invoked[name] = None
    for name in f.commands:
        if name in skills:
            row = skills[name]
            row["invoked"] += 1
            row["outcomes"]["command"] = row["outcomes"].get("command", 0) + 1
            invoked[name] = None
    for name in invoked:
        row = skills[name]
        row["invoked_sessions"] += 1
        if f.started and (row["last_used"] is None or f.started > row["last_used"]):
            row["last_used"] = f.started


def _session_row(f: SessionFacts, layers_used: list[str]) -> dict[str, Any]:
    first = next((ln.strip() for ln in f.first_prompt.splitlines() if ln.strip()), "")
    return {
        "session_id": f.session_id,
        "started": f.started,
        "project": f.project,
        "first_prompt": first[:200],
        "layers_used": layers_used,
    }


def _layer_row(layer_id: str, lf: LayerFiles | None, t: _Tally, catalog: Catalog) -> dict[str, Any]:
    shows = catalog.get(layer_id).shows
    uses = [
        {"kind": kind, "what": what, "count": c, "sessions": s}
        for (kind, what), (c, s) in sorted(t.uses.items(), key=lambda kv: (-kv[1][0], kv[0]))
    ]
    return {
        "id": layer_id,
        # an empty folder (the CLI creates projects/<slug>/memory/ every run) is nothing on disk
        "on_disk": None if lf is None else bool(lf.files or lf.keys),
        # None where a transcript records no load (output styles, MCP servers)
        "loaded_sessions": None if shows in UNRECORDED_LOADS else len(t.loaded),
        "used_sessions": len(t.used),
        "uses": uses,
        "loads": "on demand" if shows in ON_DEMAND else "unrecorded" if shows in UNRECORDED_LOADS else "auto",
    }


def _never_used(layers: list[dict[str, Any]], catalog: Catalog) -> list[dict[str, Any]]:
    out = []
    for row in layers:
        if not row["on_disk"] or row["used_sessions"]:
            continue
        loaded = row["loaded_sessions"]
        no_op = row["loads"] == "auto" and loaded == 0
        where = f"loaded in {loaded} sessions, " if loaded else ""
        why = (
            "on disk but never loaded in the window: stripping it is a no-op for ablation"
            if no_op
            else f"on disk, {where}never the subject of a read, an invocation or a hook in the window"
        )
        out.append({"id": row["id"], "loaded_sessions": loaded, "no_op": no_op, "why": why})
    return out


def _projects(sessions: list[SessionFacts]) -> list[dict[str, Any]]:
    by: dict[str, dict[str, Any]] = {}
    for f in sessions:
        row = by.setdefault(f.project, {"project": f.project, "cwd": f.cwd, "sessions": 0})
        row["sessions"] += 1
    return sorted(by.values(), key=lambda r: (-r["sessions"], r["project"]))


def _window(scope: Scope, sessions: list[SessionFacts]) -> dict[str, Any]:
    starts = [f.started for f in sessions if f.started]
    return {
        "config_dir": str(scope.config_dir),
        "repo": str(scope.repo) if scope.repo is not None else None,
        "since": scope.since.isoformat() if scope.since else None,
        "last": scope.last,
        "first": min(starts) if starts else None,
        "latest": max(starts) if starts else None,
    }


# --------------------------------------------------------------------------------------------------------
# Provenance for reports


def provenance_for(
    layers: Iterable[str], config_dir: Path, *, repo: Path | None = None, last: int = 500, jobs: int = 1
) -> list[dict[str, Any]]:
    """Per layer, what the user's own history says (``"runbooks: used in 12% of your last 500 sessions"``).

    A report prints these under their own heading, never beside the counterfactual figures. Empty when the
    history holds no session of the repo."""
    doc = usage_report(Scope(config_dir, repo, last=last), jobs=jobs).doc
    n = doc["sessions"]["count"]
    if not n:
        return []
    by_id = {row["id"]: row for row in doc["layers"]}
    out = []
    for layer_id in dict.fromkeys(layers):
        row = by_id.get(layer_id)
        if row is None:
            continue
        used, loaded = row["used_sessions"], row["loaded_sessions"]
        sentence = f"{layer_id}: used in {used / n:.0%} of your last {n} sessions ({used} of {n})"
        if loaded is not None and row["loads"] == "auto":
            sentence += f", loaded in {loaded}"
        out.append({"layer": layer_id, "sessions": n, "used_sessions": used, "loaded_sessions": loaded,
                    "sentence": sentence + "."})  # fmt: skip
    return out

"""The layer catalog (docs/ARCHITECTURE.md#layers): named parts of a setup, where they live, and how ablate strips them."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ablate.core import links
from ablate.core.errors import NotFound, Problem, SpecError, UsageError
from ablate.core.resources import data_dir
from ablate.core.specs import Spec, read_spec_data, validate

MEMORY_SLUG = "<memory-slug>"
GLOB_CHARS = set("*?[")

Side = Literal["config", "repo"]
StripOp = Literal["absent", "stub", "drop-key"]
Shows = Literal[
    "instructions", "skill_listing", "agent_listing", "hook", "mcp", "memory", "files", "output_style"
]


class KeyRef(Spec):
    """A top-level key of a JSON file that belongs to a layer (``settings.json`` → ``hooks``)."""

    file: str
    """The JSON file, relative to the layer's side (config dir or repo root)."""
    key: str
    """The top-level key removed when the layer is stripped."""


class Layer(Spec):
    """One named layer of a Claude Code setup."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    """Unique id, lower-case letters, digits and dashes (``user-claude-md``)."""
    side: Side
    """``config``: paths relative to the Claude config dir; ``repo``: relative to the repository root."""
    paths: list[str] = Field(default_factory=list)
    """Globs of files and folders (a trailing ``/`` marks a folder); ``<memory-slug>`` is expanded."""
    strip: StripOp = "absent"
    """How the layer is removed: absent (deleted), stub (each file emptied), drop-key (JSON keys removed)."""
    keys: list[KeyRef] = Field(default_factory=list)
    """JSON keys that belong to the layer; always dropped when the layer is stripped."""
    shows: Shows = "instructions"
    """How the layer's presence reaches the model (what the probe looks for)."""
    description: str = ""

    @field_validator("paths")
    @classmethod
    def _relative(cls, paths: list[str]) -> list[str]:
        for p in paths:
            if not p or p.startswith("/") or ".." in Path(p.rstrip("/")).parts:
                raise ValueError(f"{p!r}: paths must be relative and stay inside their side")
        return paths

    @model_validator(mode="after")
    def _consistent(self) -> Layer:
        if self.strip == "drop-key" and not self.keys:
            raise ValueError("strip = 'drop-key' needs at least one entry in `keys`")
        if self.strip != "drop-key" and not self.paths:
            raise ValueError(f"strip = {self.strip!r} needs at least one entry in `paths`")
        if MEMORY_SLUG in "".join(self.paths) and self.side != "config":
            raise ValueError(f"{MEMORY_SLUG} only makes sense on the config side")
        return self

    def patterns(self, memory_slug: str) -> list[str]:
        return [p.replace(MEMORY_SLUG, memory_slug) for p in self.paths]


class CatalogFile(Spec):
    """A layers file: shadow/layers.toml, or the [[layer]] tables of a user's ablate.toml."""

    schema_version: int = 1
    layer: list[Layer] = Field(default_factory=list)


class Catalog:
    """All known layers, in order: the shipped catalog, then the user's additions."""

    def __init__(self, layers: list[Layer], sources: dict[str, str]) -> None:
        self.layers = layers
        self.sources = sources
        self._by_id = {layer.id: layer for layer in layers}

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def __contains__(self, layer_id: object) -> bool:
        return layer_id in self._by_id

    def get(self, layer_id: str) -> Layer:
        try:
            return self._by_id[layer_id]
        except KeyError:
            known = ", ".join(self._by_id)
            raise UsageError(f"unknown layer {layer_id!r}", hint=f"known layers: {known}") from None

    @property
    def ids(self) -> list[str]:
        return [layer.id for layer in self.layers]


def default_catalog_path() -> Path:
    return data_dir("shadow") / "layers.toml"


def _load_catalog_file(path: Path, *, user: bool) -> CatalogFile:
    data = read_spec_data(path)
    if user:
        # ablate.toml may hold other tables; only [[layer]] (and schema_version) belong to the catalog
        data = {k: v for k, v in data.items() if k in ("layer", "schema_version")}
    spec = validate(CatalogFile, data, path)
    if spec.schema_version != 1:
        raise SpecError.single(
            path, "schema_version", f"unsupported version {spec.schema_version}; expected 1"
        )
    return spec


def load_catalog(ablate_toml: Path | None = None, *, base: Path | None = None) -> Catalog:
    """Load the shipped catalog plus the user's layers from ``ablate_toml`` (if given or ./ablate.toml)."""
    base_path = base or default_catalog_path()
    layers = list(_load_catalog_file(base_path, user=False).layer)
    sources = {layer.id: str(base_path) for layer in layers}
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, layer in enumerate(layers):
        if layer.id in seen:
            problems.append(Problem(str(base_path), f"layer.{i}.id", f"duplicate id {layer.id!r}"))
        seen[layer.id] = i
    user_path = ablate_toml or (Path("ablate.toml") if Path("ablate.toml").is_file() else None)
    if user_path is not None:
        if not user_path.exists():
            raise NotFound(f"{user_path}: no such file", hint="pass --ablate-toml with an existing file")
        for i, layer in enumerate(_load_catalog_file(user_path, user=True).layer):
            if layer.id in sources:
                taken = f"{layer.id!r} is already defined in {sources[layer.id]}; pick another id"
                problems.append(Problem(str(user_path), f"layer.{i}.id", taken))
                continue
            layers.append(layer)
            sources[layer.id] = str(user_path)
    if problems:
        raise SpecError(problems)
    return Catalog(layers, sources)


# ---------------------------------------------------------------------------------------------------------
# Resolving a layer against a real setup


@dataclass(frozen=True)
class KeyPresence:
    """A layer key found in a JSON file."""

    file: str
    key: str
    size: int
    """Bytes of the key's value, re-serialised compactly."""
    path: Path
    """Where the file really is (``.claude.json`` may live in HOME)."""


@dataclass
class LayerFiles:
    """What a layer consists of in one setup."""

    layer: Layer
    base: Path
    """The config dir or repo working tree the layer was resolved against."""
    entries: list[str] = field(default_factory=list)
    """Top-level matched paths, relative to ``base`` (files or folders, possibly symlinks)."""
    files: list[str] = field(default_factory=list)
    """Every file under the entries, relative to ``base``, symlinks followed."""
    keys: list[KeyPresence] = field(default_factory=list)
    bytes: int = 0
    fingerprint: str = ""
    """sha256 over relative paths and contents (files) and key values: equal fingerprints, equal layer."""
    digests: dict[str, str] = field(default_factory=dict)
    """Each file (relative path) and key (``file#key``) → the sha256 of its content: what differs, by name."""
    dangling: dict[str, str] = field(default_factory=dict)
    """Dangling links under the entries (relative path → the absolute path named): nothing the CLI reads."""

    @property
    def present(self) -> bool:
        return bool(self.entries) or bool(self.keys)

    @property
    def est_tokens(self) -> int:
        """A rough token estimate (bytes / 4), for orientation only."""
        return self.bytes // 4


#: Folders a ``**`` pattern never descends into: hidden folders, dependencies, build products.
PRUNED_DIRS = frozenset({"node_modules", "__pycache__", "venv", "dist", "build", "target"})


def _deep_matches(base: Path, pat: str) -> list[Path]:
    """``[*/]**/NAME``: files named NAME (a glob) at any depth (at least one folder down with ``*/``),
    never inside hidden folders or dependency/build folders (a repo may hold millions of files there)."""
    from fnmatch import fnmatchcase

    head, name = pat.split("**/", 1)
    min_depth = head.count("*/")
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in PRUNED_DIRS)
        depth = len(Path(dirpath).relative_to(base).parts)
        if depth < min_depth:
            continue
        out.extend(Path(dirpath) / f for f in sorted(filenames) if fnmatchcase(f, name))
    return out


def _expand(base: Path, pattern: str) -> list[str]:
    folder_only = pattern.endswith("/")
    pat = pattern.rstrip("/")
    if "**/" in pat and "/" not in pat.split("**/", 1)[1] and set(pat.split("**/", 1)[0]) <= set("*/"):
        matches = _deep_matches(base, pat)
    elif GLOB_CHARS & set(pat):
        matches = sorted(base.glob(pat))
    else:
        candidate = base / pat
        matches = [candidate] if (candidate.exists() or candidate.is_symlink()) else []
    return [m.relative_to(base).as_posix() for m in matches if not folder_only or m.is_dir()]


def walk_files(base: Path, rel: str, *, dangling: dict[str, str] | None = None) -> list[str]:
    """Every file under ``base/rel`` (links followed, each against its own folder), relative to ``base``. A
    dangling link is left out and recorded in ``dangling`` (relative path → the absolute path it names); a link
    to a folder that contains it, a loop or an unreadable target is a located :class:`UsageError`."""
    out: list[str] = []

    def walk(rel: str, above: frozenset[tuple[int, int]], via: Path) -> None:
        """``via``: the last link on the way to ``base/rel`` (the one a loop is named by)."""
        path = base / rel
        if not os.path.lexists(path):
            return
        via = path if path.is_symlink() else via
        st = links.follow(path)
        if st is None:
            if dangling is not None:
                dangling[rel] = links.dangling_target(path)
            return
        if not links.is_dir(st):
            out.append(rel)
            return
        names, inside = links.enter(path, st, above, via)
        for name in names:
            walk(f"{rel}/{name}", inside, via)

    walk(rel, frozenset(), base / rel)
    return out


def json_keys(path: Path) -> dict[str, object] | None:
    """Top-level keys of a JSON object file, or None when it is missing or not a JSON object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def hook_entries(hooks: object) -> Iterator[tuple[str, int, int, str, dict[str, Any]]]:
    """(event, group index, hook index, matcher, hook) of every hook of a settings ``hooks`` object."""
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        for gi, group in enumerate(groups if isinstance(groups, list) else []):
            if not isinstance(group, dict):
                continue
            matcher = str(group.get("matcher", ""))
            for hi, hook in enumerate(group.get("hooks") or []):
                if isinstance(hook, dict):
                    yield str(event), gi, hi, matcher, hook


def layer_hash(files: Iterable[tuple[str, bytes]], keys: Iterable[tuple[str, bytes]] = ()) -> str:
    """The fingerprint of a layer: sha256 over each file's relative path, a NUL and the file's sha256, then
    each JSON key's ``file#key``, a NUL and the sha256 of its canonical value. Equal hashes, equal layer."""
    h = hashlib.sha256()
    for name, data in itertools.chain(files, keys):
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def resolve_layer(
    layer: Layer, base: Path, *, memory_slug: str, aliases: dict[str, Path] | None = None
) -> LayerFiles:
    """What ``layer`` consists of under ``base`` (``aliases``: where a key file really lives)."""
    lf = LayerFiles(layer=layer, base=base)
    hashed_files: list[tuple[str, bytes]] = []
    hashed_keys: list[tuple[str, bytes]] = []
    for pattern in layer.patterns(memory_slug):
        for entry in _expand(base, pattern):
            if entry in lf.entries:
                continue
            lf.entries.append(entry)
            for rel in walk_files(base, entry, dangling=lf.dangling):
                full = base / rel
                try:
                    data = full.read_bytes()
                except OSError as exc:
                    raise links.link_error(full, exc) from None
                lf.files.append(rel)
                lf.digests[rel] = hashlib.sha256(data).hexdigest()
                lf.bytes += len(data)
                hashed_files.append((rel, data))
    for ref in layer.keys:
        where = (aliases or {}).get(ref.file) or base / ref.file
        obj = json_keys(where)
        if obj is None or ref.key not in obj or obj[ref.key] in (None, {}, [], ""):
            continue
        value = json.dumps(obj[ref.key], sort_keys=True, separators=(",", ":")).encode()
        lf.keys.append(KeyPresence(ref.file, ref.key, len(value), where))
        lf.digests[f"{ref.file}#{ref.key}"] = hashlib.sha256(value).hexdigest()
        lf.bytes += len(value)
        hashed_keys.append((f"{ref.file}#{ref.key}", value))
    lf.fingerprint = layer_hash(hashed_files, hashed_keys) if lf.present else ""
    return lf

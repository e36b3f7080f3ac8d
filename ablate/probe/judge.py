"""Judging a probe: each cell's layers expected against observed, the static checks of its shadow, and shadow
fidelity (C0's request against the untouched setup's)."""

from __future__ import annotations

import os
from collections.abc import Sequence, Set as AbstractSet
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ablate.isolate import shadowfs
from ablate.isolate.backend import CellEnv
from ablate.isolate.environment import CellEnvironment
from ablate.isolate.forwarder import context_digest
from ablate.isolate.procenv import PROBE_KEY, is_endpoint_or_auth, stray
from ablate.isolate.shadow_home import WRITTEN_DIRS
from ablate.probe.fingerprints import (
    MAX_NEEDLES,
    LayerPrint,
    diff_summary,
    distinctive_lines,
    exact_fidelity,
    normalise_request,
)
from ablate.probe.observe import PROBE_MODEL, Observation
from ablate.setup.cells import CellSet, ResolvedCell, cell_effect
from ablate.setup.layers import Catalog, LayerFiles
from ablate.setup.load import (
    Inventory,
    Setup,
    _import_target,
    ancestor_leaks,
    follow_imports,
    parse_imports,
    skill_loaded,
)

Verdict = Literal["faithful", "leak", "missing", "no-op", "error"]


@dataclass
class LayerCheck:
    expected: Literal["present", "absent"]
    observed: Literal["present", "absent", "unknown", "unprobed"]
    status: Literal["ok", "leak", "missing", "generic", "unprobed", "unobservable", "not-in-setup"]
    evidence: str = ""


@dataclass
class CellProbe:
    id: str
    label: str
    verdict: Verdict
    note: str
    layers: dict[str, LayerCheck]
    foreign_files: list[str]
    session_id: str
    exit_code: int
    duration_s: float
    problems: list[str] = field(default_factory=list)
    writes: dict[str, Any] = field(default_factory=dict)
    """namespace: what the session wrote outside its cell (discarded), :mod:`ablate.isolate.writes`."""
    context_sha256: str | None = None
    """The first request's context digest (:func:`ablate.isolate.forwarder.context_digest`), as the run's
    wire records it: the report compares each cell's sessions with it. None: no request captured."""
    cut_pieces: tuple[str, ...] = ()
    """The piece ids the cell cuts (docs/PIECES.md); checked by :mod:`ablate.probe.pieces`."""
    pieces: dict[str, Any] = field(default_factory=dict)
    """The piece check (:func:`ablate.probe.pieces.verify_piece_cell`); empty for a cell that cuts none."""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if not self.cut_pieces:  # probe.json of a layer cell stays as it was
            del d["cut_pieces"], d["pieces"]
        else:
            d["cut_pieces"] = list(self.cut_pieces)
        return d


def _foreign_files(
    obs: Observation, allowed_roots: Sequence[Path], setup_files: AbstractSet[str] = frozenset()
) -> list[str]:
    """Instruction files loaded from outside the cell, but the untouched setup's (``setup_files``)."""
    out = []
    for f in obs.instruction_files:
        p = f["path"]
        if p in setup_files:
            continue
        if not any(p == str(r) or p.startswith(str(r) + os.sep) for r in allowed_roots):
            out.append(p)
    return out


#: Copied instruction files: a symlinked CLAUDE.md resolves its @imports against the link's target (docs/CLAUDE-CODE.md).
COPIED_FILES = ("CLAUDE.md", "axioms.md", "lessons.md", "settings.json", ".claude.json")


def shadow_problems(cenv: CellEnvironment, setup: Setup) -> list[str]:
    """Static checks of a probe cell: links where the CLI writes, linked instruction files, variables."""
    base_url = cenv.env.get("ANTHROPIC_BASE_URL", "")
    capture_only = {
        "ANTHROPIC_BASE_URL": base_url if base_url.startswith("http://127.0.0.1:") else "",
        "ANTHROPIC_API_KEY": PROBE_KEY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    cfg = cenv.config_dir
    problems = [f"the config dir {cfg} is a symlink"] if cfg.is_symlink() else []
    # the folders the CLI writes (docs/CLAUDE-CODE.md): a link there writes through
    problems += [
        f"{rel}/ is a symlink: the CLI's writes would land in {os.path.realpath(cfg / rel)}"
        for rel in WRITTEN_DIRS
        if (cfg / rel).is_symlink()
    ]
    projects = cfg / "projects"
    if projects.is_dir() and not projects.is_symlink():
        problems += [
            f"{q.relative_to(cfg)} is a symlink: memory writes would land in {os.path.realpath(q)}"
            for sub in projects.iterdir()
            for q in (sub, sub / "memory")
            if q.is_symlink()
        ]
    problems += [
        f"{name} is a symlink (imports resolve against {os.path.realpath(cfg / name)}): it must be a copy"
        for name in COPIED_FILES
        if (cfg / name).is_symlink()
    ]
    for k in cenv.env:
        if stray(k):
            problems.append(f"stray variable {k} in the session environment changes the cell")
        elif is_endpoint_or_auth(k) and cenv.env[k] != capture_only.get(k, cenv.env[k] + "?"):
            problems.append(f"{k} reached a probe session: it could leave the capture endpoint")
    if cenv.env.get("HOME") != str(cenv.home):
        problems.append("HOME does not point at the cell's shadow home")
    if cenv.env.get("CLAUDE_CONFIG_DIR") != str(cfg):
        problems.append("CLAUDE_CONFIG_DIR does not point at the cell's config dir")
    real = str(setup.config_dir)
    settings = cfg / "settings.json"
    if settings.is_file() and real in settings.read_text(encoding="utf-8", errors="replace"):
        problems.append(f"settings.json still names the real config dir {real}")
    return problems


def real_path_problems(env: CellEnv) -> list[str]:
    """Static checks of a cell seen at the real paths: the environment points at them, the cell's config dir
    holds no link into the real one (seen there, that is the cell itself), no stray variables."""
    problems = []
    real_config = env.session_config_dir
    if env.env.get("HOME") != str(env.home):
        problems.append(f"HOME is not the real home {env.home}")
    if env.env.get("CLAUDE_CONFIG_DIR") != str(real_config):
        problems.append(f"CLAUDE_CONFIG_DIR is not the real config dir {real_config}")
    for dirpath, dirnames, filenames in os.walk(env.config_source):
        for name in (*dirnames, *filenames):
            p = Path(dirpath) / name
            if p.is_symlink() and shadowfs.is_inside(os.path.realpath(p), os.path.realpath(real_config)):
                problems.append(
                    f"{p.relative_to(env.config_source)} is a symlink into the real config dir (the cell itself)"
                )
    for k in env.env:
        if stray(k):
            problems.append(f"stray variable {k} in the session environment changes the cell")
    return problems


def _files_check(
    cenv: Any, layer: Any, setup: Setup, live: LayerFiles, expected: Literal["present", "absent"]
) -> LayerCheck:
    """A layer of files (repo docs, never auto-loaded): judged by what the cell's checkout holds."""
    in_cell = cenv.checkout_layer(layer, setup.memory_slug)
    same = in_cell.present and in_cell.fingerprint == live.fingerprint
    observed: Literal["present", "absent"] = "present" if in_cell.present else "absent"
    if expected == "present" and not same:
        ev = "absent from the checkout" if not in_cell.present else "differs from the live tree"
        return LayerCheck(expected, observed, "missing", ev)
    if expected == "absent" and in_cell.present:
        return LayerCheck(expected, observed, "leak", f"still in the checkout: {', '.join(in_cell.entries)}")
    ev = "checkout files match" if expected == "present" else "absent from the checkout"
    return LayerCheck(expected, observed, "ok", ev)


def _needle_check(
    p: LayerPrint, obs: Observation, expected: Literal["present", "absent"], reference: Observation | None
) -> LayerCheck:
    """A layer judged by its fingerprints in what the session sent and recorded."""
    hits = [n for n in p.needles if obs.shows(p, n)]
    observed: Literal["present", "absent"] = "present" if hits else "absent"
    must = p.expected()
    status: Any
    if expected == "present" and not hits and not must:
        status, ev = "unobservable", p.reason
    elif (
        expected == "present"
        and not hits
        and reference is not None
        and not any(reference.shows(p, n) for n in must)
    ):
        status = "unobservable"
        ev = (
            f"not seen in the untouched setup either ({p.reason}): it cannot show in a one-prompt session"
            if p.kind == "hooks"
            else "not seen in the untouched setup either: the CLI does not put it in front of the model"
        )
    elif expected == "present" and not hits:
        status, ev = "missing", f"none of {len(p.needles)} fingerprints reached the model"
    elif expected == "absent" and hits:
        status, ev = "leak", f"fingerprint reached the model: {hits[0][:80]!r}"
    else:
        status = "ok"
        ev = f"{len(hits)}/{len(p.needles)} fingerprints seen" if hits else "no fingerprint seen"
    return LayerCheck(expected, observed, status, ev)


def _layer_check(
    layer: Any,
    p: LayerPrint,
    expected: Literal["present", "absent"],
    cenv: Any,
    obs: Observation,
    live: dict[str, LayerFiles],
    setup: Setup,
    reference: Observation | None,
) -> LayerCheck:
    if p.kind == "absent":
        return LayerCheck("absent", "absent", "not-in-setup")
    if p.kind == "files":
        return _files_check(cenv, layer, setup, live[layer.id], expected)
    if p.kind == "unprobed":
        return LayerCheck(expected, "unprobed", "unprobed", p.reason)
    if p.kind == "unobservable" or not p.needles:
        return LayerCheck(
            expected, "unknown", "generic" if "generic" in p.reason else "unobservable", p.reason
        )
    return _needle_check(p, obs, expected, reference)


def replacement_imports(cell: ResolvedCell, live: dict[str, LayerFiles], home: Path) -> set[str]:
    """The layers a variant cell's replacement files ``@import``, resolved where the CLI loads them."""
    owner = {os.path.realpath(lf.base / rel): lid for lid, lf in live.items() for rel in lf.files}
    found: set[str] = set()
    for lid, path in cell.replace.items():
        lf = live.get(lid)
        if lf is None or not lf.files:
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for imp in parse_imports(text):
            target = _import_target(imp, lf.base / lf.files[0], home)
            if target.is_file():
                files = [os.path.realpath(target), *follow_imports(target, home).files]
                found.update(owner[f] for f in files if f in owner)
    return found


def _replaced_check(p: LayerPrint, replacement: Path, obs: Observation, baseline: str) -> LayerCheck:
    """A layer a variant cell replaces: a fingerprint of the setup's own file (not in ``replacement``) is a
    leak; the replacement's distinctive lines must reach the model, else it is missing."""
    try:
        text = replacement.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return LayerCheck("present", "unknown", "missing", f"the replacement {replacement}: {e.strerror}")
    own = [n for n in p.needles if n not in text] if p.usable else []
    if leaked := [n for n in own if obs.shows(p, n)]:
        return LayerCheck(
            "present", "present", "leak", f"the setup's own file reached the model: {leaked[0][:80]!r}"
        )
    needles = [n for n in distinctive_lines(text) if n not in baseline][:MAX_NEEDLES]
    name = replacement.name
    if not needles:
        return LayerCheck(
            "present", "unknown", "unobservable", f"the replacement {name} has no distinctive line"
        )
    mine = LayerPrint(p.layer, "text", needles)
    if not (hits := [n for n in needles if obs.shows(mine, n)]):
        ev = f"none of {len(needles)} fingerprints of the replacement {name} reached the model"
        return LayerCheck("present", "absent", "missing", ev)
    return LayerCheck(
        "present", "present", "ok", f"{len(hits)}/{len(needles)} fingerprints of the replacement seen"
    )


def _cell_problems(
    cenv: Any,
    obs: Observation,
    setup: Setup,
    reference: Observation | None = None,
    *,
    real_paths: bool = False,
) -> tuple[list[str], list[str]]:
    """Instruction files from outside the cell, and the static problems of its shadow or view."""
    problems: list[str] = []
    if real_paths:
        # at the real paths: the config dir and repository the user's own session would load from, and
        # whatever the untouched setup loaded at the very same paths (the targets of its links)
        setup_files = {f["path"] for f in reference.instruction_files} if reference is not None else set()
        foreign = _foreign_files(obs, [cenv.session_config_dir, cenv.cwd], setup_files)
        problems.extend(real_path_problems(cenv))
    else:
        foreign = _foreign_files(obs, [cenv.config_dir, cenv.cwd])
        problems.extend(shadow_problems(cenv, setup))
        problems.extend(f"ancestor file above the checkout: {lk.path}" for lk in ancestor_leaks(cenv.cwd))
    if obs.models and obs.models != {PROBE_MODEL}:
        problems.append(f"requests used model(s) {sorted(obs.models)}, not {PROBE_MODEL}")
    return foreign, problems


def judge_cell(
    cell: ResolvedCell,
    cenv: Any,
    obs: Observation,
    prints: dict[str, LayerPrint],
    inv: Inventory,
    catalog: Catalog,
    *,
    reference: Observation | None = None,
    baseline: str = "",
    real_paths: bool = False,
) -> CellProbe:
    """Judge one cell. A kept layer the untouched setup's session (``reference``) did not show either cannot
    show in a probe session (a silent hook, an unlisted skill): ``unobservable``, never ``missing``. A
    replaced layer: :func:`_replaced_check` (``baseline``: what a session with no setup sent)."""
    setup, live, imports = inv.setup, inv.layers, inv.imports
    eff = cell_effect(cell, live, imports, inv.loaded)
    gone = set(eff.removes) | set(eff.also_removes) | set(cell.replace)
    if cell.replace:  # what the replaced file imported goes with it, unless the replacement imports it too
        kept = replacement_imports(cell, live, setup.home)
        gone |= {i for lid in cell.replace for i in imports.get(lid, []) if i not in kept}
    checks: dict[str, LayerCheck] = {}
    mismatches: dict[str, list[str]] = cenv.mismatches
    for layer in catalog:
        if layer.id in cell.replace:
            checks[layer.id] = _replaced_check(prints[layer.id], cell.replace[layer.id], obs, baseline)
            continue
        expected: Literal["present", "absent"] = "absent" if layer.id in gone else "present"
        cut = cell.cut_layers
        if layer.id not in gone and (layer.id in cut or any(layer.id in imports.get(c, []) for c in cut)):
            # a cut section takes what it @imports with it: the piece check proves both, line by line
            checks[layer.id] = LayerCheck(expected, "unprobed", "unprobed", "pieces cut: see the piece check")
            continue
        check = _layer_check(layer, prints[layer.id], expected, cenv, obs, live, setup, reference)
        if layer.id in mismatches and check.status != "leak":
            # what reached the model is not the setup's layer, whatever its fingerprints showed
            files = mismatches[layer.id]
            more = f" and {len(files) - 5} more" if len(files) > 5 else ""
            ev = f"the cell's copy differs from the setup's: {', '.join(files[:5])}{more}"
            check = LayerCheck(expected, check.observed, "missing", ev)
        checks[layer.id] = check
    foreign, problems = _cell_problems(cenv, obs, setup, reference, real_paths=real_paths)
    if obs.error:
        verdict: Verdict = "error"
        problems.insert(0, obs.error)
    elif any(c.status == "leak" for c in checks.values()) or foreign:
        verdict = "leak"
    elif any(c.status == "missing" for c in checks.values()):
        verdict = "missing"
    elif problems:
        verdict = "leak"
    elif eff.noop:
        verdict = "no-op"
    else:
        verdict = "faithful"
    return CellProbe(
        id=cell.id,
        label=cell.label,
        verdict=verdict,
        note=eff.note,
        layers=checks,
        foreign_files=foreign,
        session_id=obs.session_id,
        exit_code=obs.exit_code,
        duration_s=round(obs.duration_s, 2),
        problems=problems,
        context_sha256=context_digest(obs.first_request.get("messages")) if obs.first_request else None,
        cut_pieces=cell.pieces,
    )


def _listing_notes(inv: Inventory, obs: Observation | None) -> list[str]:
    """Confirm the on-disk-vs-loaded rule against the captured skill listing of a session with the setup."""
    if obs is None or obs.error:
        return []
    notes = []
    for lid, lf in inv.layers.items():
        if lf.layer.shows != "skill_listing" or not lf.present:
            continue
        on_disk_only = [r for r in lf.files if r.endswith("SKILL.md") and skill_loaded(r) is False]
        names = sorted({Path(r).parent.name for r in on_disk_only})
        listed = [n for n in names if n in obs.listed]
        if listed:
            notes.append(
                f"{lid}: {', '.join(listed)} listed by the CLI although ablate counted them as not loaded"
            )
        elif names:
            notes.append(
                f"{lid}: {len(names)} SKILL.md file(s) on disk are not in the CLI's skill listing, as expected "
                f"(e.g. {on_disk_only[0]})"
            )
    return notes


def _fidelity(
    cells: CellSet,
    envs: dict[str, CellEnvironment],
    observations: dict[str, Observation],
    untouched: Observation,
    untouched_paths: dict[str, str],
    setup: Setup,
    *,
    exact: bool = False,
) -> dict[str, Any]:
    control = cells.control
    if control not in envs or not cells.get(control).is_control:
        return {
            "checked": False,
            "equal": True,
            "reason": f"the set's control {control} strips layers; nothing to compare",
        }
    obs = observations[control]
    if obs.first_request is None or untouched.first_request is None:
        return {"checked": True, "equal": False, "reason": "a session sent no request", "differences": []}
    if exact:
        return exact_fidelity(control, [obs.first_request], [untouched.first_request])
    cenv = envs[control]
    a = normalise_request(
        obs.first_request,
        {
            str(cenv.config_dir): "<CONFIG>",
            str(cenv.home): "<HOME>",
            str(cenv.cwd): "<CWD>",
            cenv.memory_slug: "<SLUG>",
        },
        keep_branch=True,
    )
    b = normalise_request(untouched.first_request, untouched_paths, keep_branch=True)
    diffs = [] if a == b else diff_summary(a, b)
    return {
        "checked": True,
        "equal": a == b,
        "compared": f"{control} against the untouched setup (plain copy of the config dir, real repo path)",
        "ignored": ["paths and project slugs", "billing header", "order of concurrent hook outputs"],
        "differences": diffs,
    }

"""``ablate probe``: prove, for free, which layers reached the model in each cell (DESIGN §6).

The real CLI runs once per cell against the capture endpoint (ablate.sim: no API key, no cost). What it sent
(the captured request bodies) and what it recorded (the transcript's ``instructions``, ``skill_listing``,
``agent_listing_delta`` and ``hook_success`` records) are matched against fingerprints of the user's real
layer content; repo docs, never auto-loaded, are checked in each cell's worktree. Each cell gets a verdict:

- faithful: every stripped layer is gone, every kept layer is there;
- leak: a stripped layer (or a file from outside the cell) reached the model;
- missing: a kept layer did not;
- no-op: faithful, but the cell strips nothing this setup has;
- error: the session failed or wrote no transcript (exit 0 is no proof, FACTS §3.7).

Two extra sessions anchor the comparison: a *baseline* with no setup at all (an empty config dir and an
empty repository: needles seen there are generic), and the *untouched* setup (a plain copy of the config dir
used from the real repo path) whose request C0's must equal, apart from paths, the billing header and the
order of concurrent hook outputs: nothing about git (shadow fidelity).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ablate.core.claude import ClaudeBinary, claude_argv, find_transcript
from ablate.core.fsutil import tree_hash
from ablate.core.proc import run_process
from ablate.core.slug import slug
from ablate.isolate.environment import CellEnvironment, build_environment, teardown_environment
from ablate.isolate.namespace import (
    NamespaceCellEnv,
    NamespaceEnvironments,
    choose_isolation,
    namespace_problems,
    untouched_copy_filter,
    untouched_view,
)
from ablate.isolate.procenv import PROBE_KEY, force_capture, is_endpoint_or_auth, process_env, stray
from ablate.isolate.shadow_home import WRITTEN_DIRS
from ablate.isolate.writes import session_writes, summary_lines
from ablate.mine.attachments import read_load_evidence
from ablate.probe.fingerprints import (
    LayerPrint,
    diff_summary,
    drop_generic,
    exact_fidelity,
    layer_prints,
    needle_in,
    normalise_request,
)
from ablate.setup.cells import CellSet, ResolvedCell, cell_effect
from ablate.setup.examples import git
from ablate.setup.layers import Catalog, LayerFiles, resolve_layer
from ablate.setup.load import (
    Inventory,
    Leak,
    Setup,
    ancestor_leaks,
    inventory,
    selected_output_style,
    skill_loaded,
)
from ablate.sim import SimServer, iter_requests, request_text

PROBE_PROMPT = "ablate probe: reply with the single word OK."
PROBE_MODEL = "claude-sonnet-4-6"
#: settings.json keys that could send the probe's traffic off loopback or run a credential helper.
NEUTRALISED_SETTINGS = ("apiKeyHelper", "awsAuthRefresh", "awsCredentialExport", "otelHeadersHelper")
_ENDPOINT_ENV = re.compile(
    r"^(ANTHROPIC_|CLAUDE_CODE_USE_|AWS_|CLOUD_ML_|VERTEX_|HTTPS?_PROXY|NO_PROXY)", re.I
)

Verdict = Literal["faithful", "leak", "missing", "no-op", "error"]
Builder = Callable[..., CellEnvironment]


@dataclass
class Observation:
    """What one probe session showed."""

    session_id: str
    exit_code: int
    duration_s: float
    transcript: Path | None
    request_text: str = ""
    instruction_files: list[dict[str, str]] = field(default_factory=list)
    listed: set[str] = field(default_factory=set)
    hooks_fired: list[str] = field(default_factory=list)
    models: set[str] = field(default_factory=set)
    requests: int = 0
    first_request: dict[str, Any] | None = None
    error: str = ""

    config_dir: str = ""
    """The session's config dir: hook commands name it where the user's settings named the real one."""

    def hook_seen(self, needle: str) -> bool:
        """Whether a record names the hook command ``needle`` (config paths canonicalised to <CONFIG>)."""
        return any(canon_command(c, [self.config_dir]) == needle for c in self.hooks_fired)

    def shows(self, p: LayerPrint, needle: str) -> bool:
        if p.kind == "hooks":
            return self.hook_seen(needle)
        if p.kind == "names" and not needle.startswith("mcp__") and needle in self.listed:
            return True
        if needle_in(p.kind, needle, self.request_text):
            return True
        return p.kind == "text" and any(needle in f.get("content", "") for f in self.instruction_files)


def canon_command(command: str, config_dirs: Sequence[str]) -> str:
    """A hook command with every spelling of the config dir replaced by ``<CONFIG>`` (cells rewrite it)."""
    for d in sorted((d for d in config_dirs if d), key=len, reverse=True):
        command = re.sub(re.escape(d) + r"(?![A-Za-z0-9_\-])", "<CONFIG>", command)
    return command


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

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return d


@dataclass
class ProbeResult:
    cells: list[CellProbe]
    leaks: list[Leak]
    fidelity: dict[str, Any]
    fingerprints: dict[str, dict[str, Any]]
    claude: dict[str, Any]
    notes: list[str]
    real_setup_unchanged: bool
    duration_s: float
    isolation: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            all(c.verdict in ("faithful", "no-op") for c in self.cells)
            and bool(self.fidelity.get("equal"))
            and self.real_setup_unchanged
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "cells": [c.to_json() for c in self.cells],
            "leaks": [asdict(leak) for leak in self.leaks],
            "fidelity": self.fidelity,
            "fingerprints": self.fingerprints,
            "claude": self.claude,
            "notes": self.notes,
            "real_setup_unchanged": self.real_setup_unchanged,
            "isolation": self.isolation,
            "duration_s": round(self.duration_s, 2),
        }


# ---------------------------------------------------------------------------------------------------------
# Running one session and reading what it showed


def _session_env(config_dir: Path, home: Path, base_url: str) -> dict[str, str]:
    """The env of the baseline and untouched sessions: the one allow-list, forced to the capture endpoint."""
    return force_capture(process_env(os.environ, home=home, config_dir=config_dir), base_url)


def _run(
    claude: ClaudeBinary,
    *,
    cwd: Path,
    env: dict[str, str],
    config_dir: Path,
    log: Path,
    out_dir: Path,
    wrap: Callable[[list[str]], list[str]] | None = None,
    shown_config: Path | None = None,
) -> Observation:
    sid = str(uuid.uuid4())
    argv = claude_argv(claude.path, prompt=PROBE_PROMPT, model=PROBE_MODEL, session_id=sid, max_turns=1)
    if wrap is not None:
        argv = wrap(argv)  # the namespace backend: the session runs in its own copy-on-write view
    res = run_process(argv, cwd=cwd, env=env, timeout=120, stdout_path=out_dir / f"{sid}.stdout.json")
    transcript = find_transcript(config_dir, sid)
    obs = Observation(
        sid, res.returncode, res.duration_s, transcript, config_dir=str(shown_config or config_dir)
    )
    if res.timed_out:
        obs.error = "timed out after 120 s"
    elif res.returncode != 0:
        obs.error = f"claude exited {res.returncode}: {res.stderr_tail.strip()[-300:]}"
    if transcript is None:
        obs.error = obs.error or "no transcript was written (exit 0 is no proof: FACTS §3.7)"
    texts = []
    for req in iter_requests(log):
        if req.session_id == sid and req.is_messages and isinstance(req.body, dict):
            obs.requests += 1
            texts.append(request_text(req.body))
            if req.model:
                obs.models.add(req.model)
            if obs.first_request is None:
                obs.first_request = req.body
    obs.request_text = "\n".join(texts)
    if transcript is not None:
        _read_transcript(transcript, obs)
    if obs.requests == 0 and not obs.error:
        obs.error = "the CLI sent no request to the capture endpoint"
    return obs


def _read_transcript(path: Path, obs: Observation) -> None:
    evidence = read_load_evidence(path)
    obs.hooks_fired.extend(evidence.hook_commands)
    obs.instruction_files.extend(evidence.instruction_files)
    obs.listed.update(evidence.listed)


# ---------------------------------------------------------------------------------------------------------
# Shadows that only the probe needs


def neutralise(config_dir: Path, *, with_mcp: bool) -> list[str]:
    """Keep the probe's traffic on loopback: drop endpoint/auth ``env`` keys and credential helpers from
    settings.json, MCP servers unless ``with_mcp``, and the credentials link (an API key is used)."""
    notes: list[str] = []
    settings = config_dir / "settings.json"
    if settings.is_file() and not settings.is_symlink():
        try:
            data = json.loads(settings.read_text(encoding="utf-8"))
        except ValueError:
            data = None
        if isinstance(data, dict):
            changed = False
            for key in NEUTRALISED_SETTINGS:
                if key in data:
                    del data[key]
                    changed = True
                    notes.append(f"settings.json {key} neutralised for the probe")
            env = data.get("env")
            if isinstance(env, dict):
                for k in [k for k in env if _ENDPOINT_ENV.match(k)]:
                    del env[k]
                    changed = True
                    notes.append(f"settings.json env.{k} neutralised for the probe")
            if not with_mcp and data.pop("mcpServers", None) is not None:
                changed = True
            if changed:
                settings.write_text(json.dumps(data, indent=2), encoding="utf-8")
    account = config_dir / ".claude.json"
    if not with_mcp and account.is_file() and not account.is_symlink():
        try:
            data = json.loads(account.read_text(encoding="utf-8"))
        except ValueError:
            data = None
        if isinstance(data, dict) and data.pop("mcpServers", None) is not None:
            account.write_text(json.dumps(data, indent=2), encoding="utf-8")
    creds = config_dir / ".credentials.json"
    if creds.is_symlink() or creds.is_file():
        creds.unlink()  # the cell's own link or copy (namespace): the probe uses an API key
    return notes


def _plain_copy(setup: Setup, dest: Path) -> Path:
    """The untouched setup's stand-in: a plain copy of the config dir, transcript history left out."""
    home = dest / "home"
    config = home / ".claude"

    ignore, linked = untouched_copy_filter(setup.config_dir)
    shutil.copytree(setup.config_dir, config, symlinks=True, ignore=ignore)
    if "projects" in linked:  # history behind a link stays out; the memory is copied where the CLI reads it
        memory = setup.config_dir / "projects" / setup.memory_slug / "memory"
        if memory.is_dir():
            shutil.copytree(memory, config / "projects" / setup.memory_slug / "memory")
    settings = config / "settings.json"
    if settings.is_file() and not settings.is_symlink():
        # hooks that name the real config dir would otherwise run against (and write into) it
        settings.write_text(settings.read_text(encoding="utf-8").replace(str(setup.config_dir), str(config)))
    account = setup.account_state
    if account is not None and not (config / ".claude.json").exists():
        shutil.copy2(account, config / ".claude.json")
    for entry in setup.home.iterdir():
        if entry.name not in (".claude", ".claude.json"):
            (home / entry.name).symlink_to(entry)
    return config


# ---------------------------------------------------------------------------------------------------------
# Judging


def _foreign_files(obs: Observation, allowed_roots: Sequence[Path]) -> list[str]:
    out = []
    for f in obs.instruction_files:
        p = f["path"]
        if not any(p == str(r) or p.startswith(str(r) + os.sep) for r in allowed_roots):
            out.append(p)
    return out


#: Copied instruction files: a symlinked CLAUDE.md resolves its @imports against the link's target (FACTS §3.5).
COPIED_FILES = ("CLAUDE.md", "axioms.md", "lessons.md", "settings.json", ".claude.json")


def shadow_problems(cenv: CellEnvironment, setup: Setup) -> list[str]:
    """Static checks of a probe cell: links on written paths, linked instruction files, stray variables, and
    any endpoint, provider or credential variable other than the capture endpoint's."""
    base_url = cenv.env.get("ANTHROPIC_BASE_URL", "")
    capture_only = {
        "ANTHROPIC_BASE_URL": base_url if base_url.startswith("http://127.0.0.1:") else "",
        "ANTHROPIC_API_KEY": PROBE_KEY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    problems = []
    cfg = cenv.config_dir
    if cfg.is_symlink():
        problems.append(f"the config dir {cfg} is a symlink")
    for rel in WRITTEN_DIRS:  # the folders the CLI writes (FACTS §2.1): a link there writes through
        p = cfg / rel
        if p.is_symlink():
            problems.append(f"{rel}/ is a symlink: the CLI's writes would land in {os.path.realpath(p)}")
    projects = cfg / "projects"
    if projects.is_dir() and not projects.is_symlink():
        for sub in projects.iterdir():
            for q in (sub, sub / "memory"):
                if q.is_symlink():
                    problems.append(
                        f"{q.relative_to(cfg)} is a symlink: memory writes would land in {os.path.realpath(q)}"
                    )
    for name in COPIED_FILES:
        p = cfg / name
        if p.is_symlink():
            problems.append(
                f"{name} is a symlink (imports resolve against {os.path.realpath(p)}): it must be a copy"
            )
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


def _checkout_layer(cenv: Any, layer: Any, setup: Setup) -> LayerFiles:
    """A repo layer as the cell's session sees it: the namespace backend resolved it in the cell's merged
    view when it built the cell; a links cell's checkout is a plain folder."""
    if isinstance(cenv, NamespaceCellEnv):
        seen = cenv.layers.repo_layers.get(layer.id, {})
        lf = LayerFiles(layer=layer, base=cenv.cwd, entries=list(seen.get("entries", [])))
        lf.fingerprint = str(seen.get("fingerprint", ""))
        if seen.get("present") and not lf.entries:
            lf.entries = ["?"]
        return lf
    return resolve_layer(layer, cenv.cwd, memory_slug=setup.memory_slug)


def judge_cell(
    cell: ResolvedCell,
    cenv: Any,
    obs: Observation,
    prints: dict[str, LayerPrint],
    live: dict[str, LayerFiles],
    imports: dict[str, list[str]],
    catalog: Catalog,
    setup: Setup,
    *,
    loaded: dict[str, list[str] | None] | None = None,
    reference: Observation | None = None,
) -> CellProbe:
    """Judge one cell. ``reference`` is the untouched setup's session: a kept layer it did not show either
    cannot show in a probe session (a silent hook, a skill the CLI does not list) and is ``unobservable``,
    never ``missing``."""
    eff = cell_effect(cell, live, imports, loaded)
    gone = set(eff.removes) | set(eff.also_removes) | set(cell.replace)
    checks: dict[str, LayerCheck] = {}
    problems: list[str] = []
    for layer in catalog:
        p = prints[layer.id]
        expected: Literal["present", "absent"] = "absent" if layer.id in gone else "present"
        if p.kind == "absent":
            checks[layer.id] = LayerCheck("absent", "absent", "not-in-setup")
            continue
        if p.kind == "files":
            in_cell = _checkout_layer(cenv, layer, setup)
            same = in_cell.present and in_cell.fingerprint == live[layer.id].fingerprint
            observed: Literal["present", "absent", "unknown", "unprobed"] = (
                "present" if in_cell.present else "absent"
            )
            if expected == "present" and not same:
                status: Any = "missing"
                ev = "absent from the checkout" if not in_cell.present else "differs from the live tree"
            elif expected == "absent" and in_cell.present:
                status, ev = "leak", f"still in the checkout: {', '.join(in_cell.entries)}"
            else:
                status, ev = (
                    "ok",
                    "checkout files match" if expected == "present" else "absent from the checkout",
                )
            checks[layer.id] = LayerCheck(expected, observed, status, ev)
            continue
        if p.kind == "unprobed":
            checks[layer.id] = LayerCheck(expected, "unprobed", "unprobed", p.reason)
            continue
        if p.kind == "unobservable" or not p.needles:
            checks[layer.id] = LayerCheck(
                expected, "unknown", "generic" if "generic" in p.reason else "unobservable", p.reason
            )
            continue
        hits = [n for n in p.needles if obs.shows(p, n)]
        observed = "present" if hits else "absent"
        must = p.expected()
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
        checks[layer.id] = LayerCheck(expected, observed, status, ev)
    if isinstance(cenv, NamespaceCellEnv):
        # at the real paths: the config dir and repository the user's own session would load from
        foreign = _foreign_files(obs, [cenv.real_config, cenv.cwd])
        problems.extend(namespace_problems(cenv))
    else:
        foreign = _foreign_files(obs, [cenv.config_dir, cenv.cwd])
        problems.extend(shadow_problems(cenv, setup))
        for lk in ancestor_leaks(cenv.cwd):
            problems.append(f"ancestor file above the checkout: {lk.path}")
    if obs.models and obs.models != {PROBE_MODEL}:
        problems.append(f"requests used model(s) {sorted(obs.models)}, not {PROBE_MODEL}")
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
    )


# ---------------------------------------------------------------------------------------------------------
# The probe


def probe(
    setup: Setup,
    catalog: Catalog,
    cells: CellSet,
    claude: ClaudeBinary,
    *,
    work: Path | None = None,
    cell_ids: list[str] | None = None,
    with_mcp: bool = False,
    jobs: int = 2,
    builder: Builder = build_environment,
    on_cell: Callable[[str, str], None] | None = None,
    isolation: str | None = None,
) -> ProbeResult:
    """Build every cell, run the real CLI once per cell against the capture endpoint, and judge each cell.

    ``isolation``: ``namespace`` (default where it works: every session, the untouched one included, in its
    own copy-on-write view at the real paths) or ``links``. ``builder`` is the ``links`` environment builder
    (the probe exists to check it; tests hand it broken ones, which forces ``links``).
    """
    start = time.monotonic()
    chosen = choose_isolation("links" if builder is not build_environment else isolation)
    namespace = chosen.backend == "namespace"
    inv = inventory(setup, catalog)
    prints = layer_prints(catalog, inv.layers, with_mcp=with_mcp, style=selected_output_style(setup))
    for p in prints.values():  # hook commands compared with the cell's config path canonicalised
        if p.kind == "hooks":
            dirs = [str(setup.config_dir), str(setup.home / ".claude")]
            p.needles = [canon_command(n, dirs) for n in p.needles]
            p.expect = None if p.expect is None else [canon_command(n, dirs) for n in p.expect]
    before = (tree_hash(setup.config_dir), tree_hash(setup.repo))
    owned = work is None
    root = Path(tempfile.mkdtemp(prefix="ablate-probe-")) if work is None else work
    root.mkdir(parents=True, exist_ok=True)
    notes: list[str] = [f"isolation: {chosen.backend} ({chosen.reason})"]
    if not claude.is_pinned:
        notes.append(f"claude {claude.version} is not the pinned version; results recorded as such")
    if not with_mcp and prints["mcp"].kind != "absent":
        notes.append("MCP was not probed: servers are real processes (use --with-mcp)")
    selected = cells.select(cell_ids)
    envs: dict[str, Any] = {}
    ns_backend: NamespaceEnvironments | None = None
    writes: dict[str, dict[str, Any]] = {}
    try:
        with SimServer(log_path=root / "requests.jsonl") as sim:
            log = root / "requests.jsonl"

            def build(cell: ResolvedCell) -> CellEnvironment:
                cenv = builder(
                    setup, catalog, cell, root / "cells", extra_env={"ANTHROPIC_BASE_URL": sim.base_url}
                )
                notes.extend(neutralise(cenv.config_dir, with_mcp=with_mcp))
                # whatever the caller's environment: no provider switch, credential or proxy reaches a probe
                # session, only the capture endpoint and a fake key
                cenv.env = force_capture(cenv.env, sim.base_url)
                return cenv

            if namespace:
                ns_backend = NamespaceEnvironments(
                    setup, catalog, root / "ns", extra_env={"ANTHROPIC_BASE_URL": sim.base_url}
                )
                for slot, cell in enumerate(selected):
                    nenv = ns_backend.build(cell, slot)
                    notes.extend(neutralise(nenv.layers.config, with_mcp=with_mcp))
                    nenv.env = force_capture(nenv.env, sim.base_url)
                    envs[cell.id] = nenv
            else:
                with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                    for cell, cenv in zip(selected, pool.map(build, selected), strict=True):
                        envs[cell.id] = cenv

            baseline_obs = _baseline(claude, root, sim.base_url, log)
            untouched_paths: dict[str, str] = {}
            if namespace:
                any_env = next(iter(envs.values()), None)
                untouched_obs = _untouched_namespace(setup, claude, root, sim.base_url, log, any_env)
            else:
                untouched_obs, untouched_paths = _untouched(setup, claude, root, sim.base_url, log)

            def run_cell(cell: ResolvedCell) -> Observation:
                cenv = envs[cell.id]
                obs = _run(
                    claude,
                    cwd=cenv.cwd,
                    env=cenv.env,
                    config_dir=cenv.config_dir,
                    log=log,
                    out_dir=root / "stdout",
                    wrap=cenv.wrap if isinstance(cenv, NamespaceCellEnv) else None,
                    shown_config=cenv.real_config if isinstance(cenv, NamespaceCellEnv) else None,
                )
                if isinstance(cenv, NamespaceCellEnv):
                    writes[cell.id] = session_writes(cenv).to_json()
                if on_cell is not None:
                    on_cell(cell.id, obs.error or "ran")
                return obs

            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                observations = dict(zip([c.id for c in selected], pool.map(run_cell, selected), strict=True))
        # judge while the cells still exist: repo docs and static checks read the built shadows
        drop_generic(prints, baseline_obs.request_text + "\n".join(baseline_obs.listed))
        reference = None if untouched_obs.error else untouched_obs
        results = [
            judge_cell(
                c,
                envs[c.id],
                observations[c.id],
                prints,
                inv.layers,
                inv.imports,
                catalog,
                setup,
                loaded=inv.loaded,
                reference=reference,
            )
            for c in selected
        ]
        notes.extend(_listing_notes(inv, reference or next(iter(observations.values()), None)))
        for r in results:
            r.writes = writes.get(r.id, {})
            notes.extend(summary_lines(r.id, r.writes))
        fidelity = _fidelity(
            cells, envs, observations, untouched_obs, untouched_paths, setup, exact=namespace
        )
    finally:
        if owned:  # --work DIR keeps the cells, requests, stdout and transcripts for inspection
            for cenv in envs.values():
                if isinstance(cenv, NamespaceCellEnv):
                    assert ns_backend is not None
                    ns_backend.teardown(cenv)
                else:
                    teardown_environment(cenv)
            if ns_backend is not None:
                ns_backend.close()
            shutil.rmtree(root, ignore_errors=True)
    after = (tree_hash(setup.config_dir), tree_hash(setup.repo))
    leaks = list(inv.leaks)
    for cenv in envs.values():
        for lk in cenv.leaks:
            if lk not in leaks:
                leaks.append(lk)
    return ProbeResult(
        cells=results,
        leaks=leaks,
        fidelity=fidelity,
        fingerprints={
            k: {"kind": p.kind, "needles": len(p.needles), "reason": p.reason} for k, p in prints.items()
        },
        claude={
            "path": str(claude.path),
            "version": claude.version,
            "sha256": claude.sha256,
            "pinned": claude.is_pinned,
        },
        notes=sorted(set(notes)),
        real_setup_unchanged=before == after,
        duration_s=time.monotonic() - start,
        isolation=chosen.to_json(),
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


def _baseline(claude: ClaudeBinary, root: Path, base_url: str, log: Path) -> Observation:
    """A session with no setup at all: an empty config dir and an empty one-commit repository."""
    base = root / "baseline"
    home, repo = base / "home", base / "repo"
    (home / ".claude").mkdir(parents=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    env = _session_env(home / ".claude", home, base_url)
    return _run(claude, cwd=repo, env=env, config_dir=home / ".claude", log=log, out_dir=root / "stdout")


def _untouched(
    setup: Setup, claude: ClaudeBinary, root: Path, base_url: str, log: Path
) -> tuple[Observation, dict[str, str]]:
    """The untouched setup (``links``): a plain copy of the config dir, used from a plain copy of the
    repository (``.git`` included): ablate never runs the CLI with write access to the real repo."""
    config = _plain_copy(setup, root / "untouched")
    neutralise(config, with_mcp=False)
    repo = root / "untouched" / "repo" / setup.repo.name
    shutil.copytree(setup.repo, repo, symlinks=True)
    copy_slug = slug(str(repo))
    memory = config / "projects" / setup.memory_slug / "memory"
    if memory.is_dir():
        shutil.copytree(memory, config / "projects" / copy_slug / "memory", symlinks=True)
    env = _session_env(config, config.parent, base_url)
    obs = _run(claude, cwd=repo, env=env, config_dir=config, log=log, out_dir=root / "stdout")
    return obs, {
        str(config): "<CONFIG>",
        str(config.parent): "<HOME>",
        str(repo): "<CWD>",
        copy_slug: "<SLUG>",
    }


def _untouched_namespace(
    setup: Setup, claude: ClaudeBinary, root: Path, base_url: str, log: Path, like: Any
) -> Observation:
    """The untouched setup at the real paths in its own copy-on-write view (the live home and repository,
    a plain copy of the config dir, endpoint keys neutralised), with the very environment of the cells."""
    view = untouched_view(setup, root / "untouched")
    neutralise(view.config_copy, with_mcp=False)
    env = dict(like.env) if like is not None else _session_env(setup.config_dir, setup.home, base_url)
    return _run(
        claude,
        cwd=view.cwd,
        env=env,
        config_dir=view.config_dir,
        log=log,
        out_dir=root / "stdout",
        wrap=view.wrap,
        shown_config=setup.config_dir,
    )


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
        return exact_fidelity(control, obs.first_request, untouched.first_request)
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

"""``ablate probe``: prove, for free, which layers reached the model in each cell (README.md's "Proving
isolation"). A *baseline* session with no setup (needles seen there are generic) and the *untouched* setup
(whose request C0's must equal) anchor the comparison; a session that wrote no transcript is an error."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ablate.core.cache import ensure_cache_dir
from ablate.core.claude import ClaudeBinary, StartPurpose
from ablate.core.tempwork import make_work_dir, remove_tree
from ablate.folder.probe import PROBE_SCHEMA_VERSION
from ablate.folder.writes_summary import writes_lines
from ablate.isolate.backend import BackendOptions, EnvBackend
from ablate.isolate.environment import CellEnvironment, build_environment, teardown_environment
from ablate.isolate.guard import changes_and_notes, take as take_snapshot
from ablate.isolate.links import KIND as LINKS
from ablate.isolate.procenv import force_capture
from ablate.isolate.registry import choice_json, choose_isolation, kind_of, open_backend
from ablate.probe.fingerprints import LayerPrint, drop_generic, exact_fidelity, fidelity_lines, layer_prints
from ablate.probe.judge import CellProbe, _fidelity, _listing_notes, judge_cell
from ablate.probe.observe import (
    Capture,
    Observation,
    _run,
    _untouched,
    _untouched_at_real_paths,
    cached_baseline,
    canon_command,
    links_fence,
    neutralise as neutralise,
)
from ablate.setup.cells import CellSet, ResolvedCell
from ablate.setup.inventory import dangling_lines
from ablate.setup.layers import Catalog
from ablate.setup.load import Inventory, Leak, Setup, inventory, selected_output_style
from ablate.sim import SimServer

Builder = Callable[..., CellEnvironment]


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
    isolation: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            all(c.verdict in ("faithful", "no-op") for c in self.cells)
            and bool(self.fidelity.get("equal"))
            and self.real_setup_unchanged
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": PROBE_SCHEMA_VERSION,
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
# The probe


@dataclass
class _Cells:
    """The probe's built cells, their backend (none for a test's own builder), and what building them said."""

    envs: dict[str, Any] = field(default_factory=dict)
    backend: EnvBackend | None = None
    notes: list[str] = field(default_factory=list)
    more: list[Any] = field(default_factory=list)
    """The control's extra session slots (:func:`_more_pairs`)."""

    def teardown(self) -> None:
        for cenv in [*self.envs.values(), *self.more]:
            if self.backend is not None:
                self.backend.teardown(cenv)
            else:
                teardown_environment(cenv)
        if self.backend is not None:
            self.backend.close()


@dataclass
class _Probe:
    """What every step of one probe reads: its inputs, folder, capture endpoint and the cells built so far."""

    setup: Setup
    catalog: Catalog
    cells: CellSet
    selected: Sequence[ResolvedCell]
    claude: ClaudeBinary
    root: Path
    backend: str
    builder: Builder = build_environment
    with_mcp: bool = False
    jobs: int = 2
    on_cell: Callable[[str, str], None] | None = None
    built: _Cells = field(default_factory=_Cells)
    base_url: str = ""

    @property
    def capture(self) -> Capture:
        return Capture(self.claude, self.root, self.base_url)

    @property
    def real_paths(self) -> bool:
        return _real_paths(self.backend)


def _build_cells(p: _Probe, on_first: Callable[[Any], None] | None = None) -> None:
    """Build every selected cell, ``jobs`` at a time, neutralised and forced to the capture endpoint (no
    provider, credential or proxy reaches a probe session); ``on_first`` gets the first one built."""
    extra, into = {"ANTHROPIC_BASE_URL": p.base_url}, p.built
    if p.builder is build_environment:
        # views at the real paths keep their layers under ns/, shadows are the cells/ themselves
        work = p.root / ("ns" if p.real_paths else "cells")
        options = BackendOptions(extra_env=extra, programs=(p.claude.path,))
        into.backend = open_backend(p.backend, p.setup, p.catalog, work, options)
        into.backend.prepare(p.selected)
    slots = {c.id: slot for slot, c in enumerate(p.selected)}
    lock = threading.Lock()

    def build(cell: ResolvedCell) -> None:
        if into.backend is not None:
            cenv = into.backend.build(cell, slots[cell.id])
        else:  # a test's deliberately broken builder
            cenv = p.builder(p.setup, p.catalog, cell, p.root / "cells", extra_env=extra)
        notes = neutralise(cenv.config_source, with_mcp=p.with_mcp)
        cenv.env = force_capture(cenv.env, p.base_url)
        with lock:
            into.notes.extend(notes)
            into.envs[cell.id] = cenv
            first = len(into.envs) == 1
        if first and on_first is not None:
            on_first(cenv)

    with ThreadPoolExecutor(max_workers=max(1, p.jobs)) as pool:
        list(pool.map(build, p.selected))
    into.envs = {c.id: into.envs[c.id] for c in p.selected}


def _real_paths(backend: str) -> bool:
    """Whether ``backend``'s sessions see the user's real paths (the registry's capability)."""
    kind = kind_of(backend)
    return kind is not None and kind.capabilities.real_paths


def _session(
    p: _Probe, cenv: Any, wrap: Callable[[list[str]], list[str]], purpose: StartPurpose = "probe"
) -> Observation:
    """One probe session in the built cell ``cenv``, run through ``wrap`` (its view, or the write fence)."""
    return _run(
        p.capture, purpose=purpose, cwd=cenv.cwd, env=cenv.env, config_dir=cenv.config_dir, wrap=wrap,
        shown_config=cenv.session_config_dir,
    )  # fmt: skip


def _observe_cells(p: _Probe) -> tuple[dict[str, Observation], dict[str, dict[str, Any]]]:
    """One session per cell, ``jobs`` at a time: what each showed, and what each wrote outside its cell."""
    writes: dict[str, dict[str, Any]] = {}
    backend = p.built.backend

    def run_cell(cell: ResolvedCell) -> Observation:
        cenv = p.built.envs[cell.id]
        wrap: Callable[[list[str]], list[str]]
        if backend is not None:
            wrap = functools.partial(backend.command, cenv)
        else:  # a test's deliberately broken builder: fenced as the links backend would
            wrap = links_fence(p.setup, cenv.root, cenv.cwd)
        obs = _session(p, cenv, wrap)
        if backend is not None and (said := backend.after_session(cenv)) is not None:
            writes[cell.id] = said
        if p.on_cell is not None:
            p.on_cell(cell.id, obs.error or "ran")
        return obs

    with ThreadPoolExecutor(max_workers=max(1, p.jobs)) as pool:
        observations = dict(zip([c.id for c in p.selected], pool.map(run_cell, p.selected), strict=True))
    return observations, writes


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
    work_parent: Path | None = None,
) -> ProbeResult:
    """Build every cell, run the real CLI once in each against the capture endpoint, judge each. A backend
    seen at the real paths runs the untouched setup there too (exact fidelity); ``builder``: tests' broken
    ``links`` builders. Any change of the user's real files fails the probe. Without ``work``: a temporary
    folder under ``work_parent``, removed at the end."""
    start = time.monotonic()
    chosen = choose_isolation(LINKS.name if builder is not build_environment else isolation)
    inv = inventory(setup, catalog)
    prints = _prints(setup, catalog, inv, with_mcp=with_mcp)
    owned = work is None
    root = make_work_dir("ablate-probe-", work_parent) if work is None else work
    root.mkdir(parents=True, exist_ok=True)
    ensure_cache_dir()  # before the listing: the baseline's cache is made in it
    before = take_snapshot(setup.config_dir, setup.repo, setup.home, skip=(root,))
    notes = dangling_lines(inv.layers)
    if not claude.pinned:
        notes.append(f"claude {claude.version} is not the pinned version; results recorded as such")
    if not with_mcp and prints["mcp"].kind != "absent":
        notes.append("MCP was not probed: servers are real processes (use --with-mcp)")
    p = _Probe(
        setup, catalog, cells, cells.select(cell_ids), claude, root, chosen.backend, builder, with_mcp, jobs,
        on_cell,
    )  # fmt: skip
    selected, built = p.selected, p.built
    try:
        ran = _sessions(p)
        observations, writes = ran.observations, ran.writes
        # judge while the cells still exist: repo docs and static checks read the built shadows
        drop_generic(prints, ran.baseline.request_text + "\n".join(ran.baseline.listed))
        reference = None if ran.untouched.error else ran.untouched
        results = [
            judge_cell(
                c,
                built.envs[c.id],
                observations[c.id],
                prints,
                inv,
                catalog,
                reference=reference,
                baseline=ran.baseline.request_text,
                real_paths=p.real_paths,
            )
            for c in selected
        ]
        if any(c.pieces for c in selected):
            _check_pieces(p, results, observations)
        notes.extend(built.notes)
        notes.extend(_listing_notes(inv, reference or next(iter(observations.values()), None)))
        for r in results:  # what each session wrote outside its cell, kept per cell; said once per path
            r.writes = writes.get(r.id, {})
        noun = "cells" if len(writes) <= len(selected) else "cell sessions"
        notes.extend(writes_lines(list(writes.values()), max(len(selected), len(writes)), noun=noun))
        notes.extend(fidelity_lines(ran.fidelity))
    finally:
        if owned:  # --work DIR keeps the cells, requests, stdout and transcripts for inspection
            built.teardown()
            remove_tree(root)
    changed, _git_notes = changes_and_notes(before)
    notes.extend(f"ERROR: your real file changed during the probe: {c}" for c in changed[:20])
    return ProbeResult(
        cells=results,
        leaks=list(dict.fromkeys([*inv.leaks, *(lk for cenv in built.envs.values() for lk in cenv.leaks)])),
        fidelity=ran.fidelity,
        fingerprints={
            k: {"kind": lp.kind, "needles": len(lp.needles), "reason": lp.reason} for k, lp in prints.items()
        },
        claude=claude.model_dump(mode="json"),
        notes=sorted(set(notes)),
        real_setup_unchanged=not changed,
        duration_s=time.monotonic() - start,
        isolation=choice_json(chosen),
    )


@dataclass
class _Sessions:
    """What the probe's sessions saw: the baseline (no setup), the untouched setup, and each cell."""

    baseline: Observation
    untouched: Observation
    observations: dict[str, Observation]
    writes: dict[str, dict[str, Any]]
    fidelity: dict[str, Any]


def _sessions(p: _Probe) -> _Sessions:
    """Build the cells and run every session of the probe against one capture endpoint (``root``'s log)."""
    # The baseline session (no setup) and the untouched one (at the real paths: as soon as one cell's
    # environment exists; else a plain copy, at once) run while the cells are built: a CLI start is CPU and waiting,
    # a build is file work. Both end before the cells' sessions start, so the setup's own sessions still
    # run in the order untouched, then cells (a start-up hook that counts sessions sees the same order).
    with (
        SimServer(log_path=p.capture.log) as sim,
        ThreadPoolExecutor(2, thread_name_prefix="probe-side") as side,
    ):
        p.base_url = sim.base_url
        baseline_future = side.submit(cached_baseline, p.capture)
        untouched: list[Future[tuple[Observation, dict[str, str]]]] = []

        def start_untouched(like: Any) -> None:
            if not untouched:
                untouched.append(side.submit(_untouched_first, p, like))

        if not p.real_paths:
            start_untouched(None)
        _build_cells(p, on_first=start_untouched)
        start_untouched(None)  # no cell was built
        baseline_obs = baseline_future.result()
        untouched_obs, untouched_paths = untouched[0].result()
        observations, writes = _observe_cells(p)
        fidelity = _fidelity(
            p.cells, p.built.envs, observations, untouched_obs, untouched_paths, p.setup, exact=p.real_paths
        )
        if fidelity.get("exact") and not fidelity["equal"] and p.built.backend is not None:
            fidelity, more_writes = _more_pairs(p, fidelity, observations[p.cells.control], untouched_obs)
            writes.update(more_writes)
    return _Sessions(baseline_obs, untouched_obs, observations, writes, fidelity)


#: Pairs of first requests (control, untouched setup) the exact fidelity check draws at most, the first one
#: included: more only when the first pair differs (:func:`ablate.probe.fingerprints.exact_fidelity`).
FIDELITY_PAIRS = 3


def _check_pieces(p: _Probe, results: list[CellProbe], observations: dict[str, Observation]) -> None:
    """The piece check of every cell that cuts pieces (:mod:`ablate.probe.pieces`)."""
    from ablate.probe.pieces import check_piece_cells
    from ablate.setup.pieces import setup_pieces

    bases = {"config": p.setup.config_dir, "repo": p.setup.repo}
    pieces, layers = setup_pieces(p.setup, p.catalog), {x.id: x for x in p.catalog}
    check_piece_cells(results, observations, p.built.envs, p.cells.control, pieces, bases, layers)


def _more_pairs(
    p: _Probe, fidelity: dict[str, Any], first: Observation, untouched: Observation
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Up to ``FIDELITY_PAIRS - 1`` more sessions of the control and of the untouched setup (each fresh), until
    two first requests are equal: the check over all of them, and what each extra control session wrote."""
    backend, control = p.built.backend, p.cells.get(p.cells.control)
    assert backend is not None and first.first_request and untouched.first_request
    controls, references = [first.first_request], [untouched.first_request]
    writes: dict[str, dict[str, Any]] = {}
    like = p.built.envs[control.id]
    for k in range(2, FIDELITY_PAIRS + 1):
        again = _untouched_at_real_paths(p.setup, p.capture, like, name=f"untouched-{k}")
        nenv = backend.build(control, len(p.selected) + k - 2)
        nenv.env = force_capture(nenv.env, p.base_url)
        p.built.more.append(nenv)
        obs = _session(p, nenv, functools.partial(backend.command, nenv), "fidelity")
        writes[f"{control.id}#{k}"] = backend.after_session(nenv) or {}
        controls.extend([obs.first_request] if obs.first_request else [])
        references.extend([again.first_request] if again.first_request else [])
        fidelity = exact_fidelity(control.id, controls, references)
        if fidelity["equal"]:
            break
    return fidelity, writes


def _untouched_first(p: _Probe, like: Any) -> tuple[Observation, dict[str, str]]:
    """The untouched setup's session, and the path replacements that make its request comparable."""
    if not p.real_paths:
        return _untouched(p.setup, p.capture)
    return _untouched_at_real_paths(p.setup, p.capture, like), {}


def _prints(setup: Setup, catalog: Catalog, inv: Inventory, *, with_mcp: bool) -> dict[str, LayerPrint]:
    """The fingerprints of the user's real layers; hook commands with the config path canonicalised."""
    prints = layer_prints(catalog, inv.layers, with_mcp=with_mcp, style=selected_output_style(setup))
    dirs = [str(setup.config_dir), str(setup.home / ".claude")]
    for p in prints.values():
        if p.kind == "hooks":
            p.needles = [canon_command(n, dirs) for n in p.needles]
            p.expect = None if p.expect is None else [canon_command(n, dirs) for n in p.expect]
    return prints

"""The one execution path: ``run``, ``ab`` and ``compare --executor claude-code`` differ in what they plan,
never in how it is executed (docs/ARCHITECTURE.md#running-sessions): :func:`preflight` before the run folder
is written, then :func:`execute` (cells checked, the user's files guarded, the scheduler, the exit code)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from ablate.core.claude import ClaudeBinary, take_starts
from ablate.core.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, AblateError, UsageError
from ablate.folder.layout import EndpointInfo, IsolationInfo, RunManifest, write_manifest
from ablate.folder.lock import RunLock
from ablate.folder.result import iter_results
from ablate.folder.writes_summary import denied_by_path, writes_lines
from ablate.isolate.backend import BackendOptions, EnvBackend
from ablate.isolate.forwarder import shared_forwarder
from ablate.isolate.limits import with_mechanisms
from ablate.isolate.registry import choice_json
from ablate.isolate.secrets import Secrets, secrets_policy
from ablate.run.envpool import EnvPool
from ablate.run.hooks import TreeHook
from ablate.run.prepare import PreparedRun, work_area
from ablate.run.scheduler import Progress, Runner, RunOptions, RunSummary
from ablate.setup.cells import ResolvedCell
from ablate.setup.load import Setup

#: Runs every item of plan.jsonl that has no complete result (one scheduler pass in the kept environments)
#: and returns the runner's outcome; ``interrupted`` at once, running nothing, after Ctrl-C.
RunRound = Callable[[], str]
#: Drives the rounds of one invocation: calls its :data:`RunRound` once per round, growing the plan between.
Rounds = Callable[[RunRound], object]


@dataclass(frozen=True)
class Preflight:
    """What is decided about a run before anything is written."""

    isolation: IsolationInfo
    """The backend chosen and why (the manifest's ``isolation``, before the run fills the rest)."""
    endpoint: EndpointInfo
    seal_note: str = ""
    """What ``--unsealed`` did, to say (:func:`ablate.isolate.detect.require_sealed`); "" without it."""
    secrets: Secrets = field(default_factory=Secrets)
    """The credential paths sessions read as empty (``--hide``/``--expose``)."""


def preflight(
    config_dir: Path,
    repo: Path,
    *,
    isolation: str | None,
    environ: Mapping[str, str] | None = None,
    allow_network: bool = False,
    unsealed: bool = False,
    hide: Sequence[str] = (),
    expose: Sequence[str] = (),
) -> Preflight:
    """Choose the backend and check the one endpoint, the seal and ``hide``/``expose`` (a refusal: exit 2).
    Writes only ablate's cache dir, made before the home's before/after listing so it is never taken for the
    user's change. Checks that must refuse a run belong here."""
    from ablate.core.cache import ensure_cache_dir
    from ablate.isolate.detect import require_sealed
    from ablate.isolate.forwarder import check_socket_room
    from ablate.isolate.procenv import one_endpoint
    from ablate.isolate.registry import choose_isolation

    check_socket_room()
    chosen = choose_isolation(isolation)
    said = require_sealed(chosen, unsealed=unsealed)
    endpoint = one_endpoint(config_dir.expanduser(), repo.expanduser(), environ or os.environ)
    check_reachable(chosen, allow_network, endpoint, environ or os.environ)
    secrets = secrets_policy(hide=hide, expose=expose, keep=(config_dir.expanduser(), repo.expanduser()))
    ensure_cache_dir()
    return Preflight(chosen, endpoint, said, secrets)


@dataclass(frozen=True)
class ExecuteRequest:
    """How a prepared run folder is executed (what may differ between invocations on one folder)."""

    claude: ClaudeBinary
    preflight: Preflight
    tree_hook: TreeHook
    """What is done to a session's tree before and after it (``ablate.grade.hook.GradingHook``)."""
    options: RunOptions = field(default_factory=RunOptions)
    work_dir: Path | None = None
    """Where environments are built (default: ``<temp>/ablate-envs``); removed afterwards."""
    isolate_state: bool = False
    allow_network: bool = False
    """Sessions keep the host's network namespace (``--allow-network``) instead of their own."""
    dirty: bool = False
    forced: bool = False
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """Variables every session gets on top of the allow-listed environment."""
    guard_skip: tuple[Path, ...] = ()
    """ablate's own folders besides the run folder and the work dir, left out of the before/after listing."""
    handle_sigint: bool = True
    """Install the Ctrl-C handler for the run (only from the main thread)."""


@dataclass
class ExecutionResult:
    """What :func:`execute` did."""

    summary: RunSummary
    isolation: IsolationInfo
    """The backend chosen, and how far its sessions reached (``network``: the manifest's word)."""
    real_files_changed: list[str]
    """The user's real files added, removed or changed during the run ("<path> (changed)")."""
    guard_notes: list[str]
    writes: list[str]
    """One line per path the sessions wrote outside their cells (all of it discarded)."""
    interrupted: bool
    exit_code: int

    def to_json(self) -> dict[str, Any]:
        return {
            **self.summary.to_json(),
            "isolation": choice_json(self.isolation),
            "network": self.isolation.network,
            "real_files_changed": self.real_files_changed,
            "writes": self.writes,
            "exit_code": self.exit_code,
        }


def exit_code(outcome: str, *, real_files_changed: bool) -> int:
    """0 finished, 130 interrupted, 3 items failed or not run; 1 whenever real files changed."""
    if real_files_changed:
        return EXIT_FAILURE
    return {"finished": EXIT_OK, "interrupted": EXIT_INTERRUPTED}.get(outcome, EXIT_PARTIAL)


def execute(
    prepared: PreparedRun,
    request: ExecuteRequest,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    rounds: Rounds | None = None,
) -> ExecutionResult:
    """Execute ``prepared`` (its folder's share of the plan); with ``rounds``, one scheduler pass per call of
    its :data:`RunRound`, in kept environments."""
    from ablate.isolate.auth import AuthMethod, cell_login, check_run_auth, moved_login_key
    from ablate.isolate.guard import changes_and_notes, take as take_snapshot
    from ablate.isolate.procenv import one_endpoint
    from ablate.isolate.registry import open_backend
    from ablate.run.session import kill_strays

    note = on_note or (lambda _text: None)
    folder, setup = prepared.folder, prepared.setup
    chosen = request.preflight.isolation
    # checked again on the setup actually used: a resumed run takes its config dir and repo from its manifest
    endpoint = one_endpoint(setup.config_dir, setup.repo, os.environ)
    check_reachable(chosen, request.allow_network, endpoint, os.environ)
    network = network_mode(chosen, request)
    limits = request.options.limits
    forwarder = shared_forwarder()  # one per process: the run's limits are its own
    forwarder.body_limit, forwarder.room.size = limits.request, limits.forwarder_memory
    session_env, moved = moved_login_key(os.environ, setup.config_dir)
    with work_area(request.work_dir, folder.root.name) as work_root:
        options = BackendOptions(
            isolate_state=request.isolate_state,
            allow_network=request.allow_network,
            dirty=request.dirty,
            base_env=session_env,
            extra_env=dict(request.extra_env),
            secrets=request.preflight.secrets,
            programs=(request.claude.path,),
        )
        backend = open_backend(chosen.backend, setup, prepared.catalog, work_root, options)
        kill_strays(work_root)  # what a crashed invocation left (its sessions, then its environments)
        backend.clean()
        # every cell (C11 included) must log in as the user's own setup does, and keep the setup's layers as
        # they are, in the config dir its backend builds once for its sessions: refused before any session
        cells = prepared.cell_set.cells
        backend.prepare(cells)
        logins = (
            cell_login(c.id, backend.cell_config(c).path, base_env=session_env, extra_env=request.extra_env)
            for c in cells
        )
        auth = check_run_auth(setup, logins, user_env=session_env)
        auth = AuthMethod(auth.method, f"{auth.source} (moved from {moved})") if moved else auth
        refuse_unfaithful_cells(cells, backend)
        manifest = prepared.manifest.model_copy(
            update={
                "setup": prepared.manifest.setup.model_copy(update={"endpoint": endpoint}),
                "isolation": chosen.model_copy(
                    update={
                        "auth": auth.to_json(),
                        "network": network,
                        "limits": with_mechanisms(limits),
                        **_hidden(chosen, request, setup),
                    }
                ),
            }
        )
        write_manifest(folder, manifest)
        passes = _Passes(prepared, request, manifest, backend, work_root, on_progress, rounds is not None)
        skip = (folder.root, work_root, *request.guard_skip)
        guard = take_snapshot(setup.config_dir, setup.repo, setup.home, skip=skip)
        with _sigint(passes, request, note) as presses:
            summary = passes.drive(rounds)
        changed, guard_notes = changes_and_notes(guard)
    results = list(iter_results(folder))
    written = [r for r in results if r.writes]
    records = [r.writes.model_dump() for r in written if r.writes]
    denied = {path: [written[n].item for n in at] for path, at in denied_by_path(records).items()}
    manifest = passes.manifest
    recorded = manifest.isolation or chosen
    differs = {r.item: list(r.wire.differs) for r in results if r.wire is not None and r.wire.differs}
    isolation_info = recorded.model_copy(
        update={
            "real_files_changed": changed,
            "fence_denied": denied or None,
            "wire_differs": differs or None,
        }
    )
    starts = manifest.cli_starts.plus(take_starts())  # this invocation's: its probe, and its sessions
    write_manifest(folder, manifest.model_copy(update={"isolation": isolation_info, "cli_starts": starts}))
    return ExecutionResult(
        summary=summary,
        isolation=chosen.model_copy(update={"network": network}),
        real_files_changed=changed,
        guard_notes=guard_notes,
        writes=writes_lines(records, len(results), noun="sessions"),
        interrupted=presses[0] > 0,
        exit_code=exit_code(summary.outcome, real_files_changed=bool(changed)),
    )


def refuse_unfaithful_cells(cells: Sequence[ResolvedCell], backend: EnvBackend) -> None:
    """Refuse the run (exit 1) when a layer a cell keeps differs from the setup's in the cell's config dir."""
    from ablate.isolate.faithful import mismatch_lines

    for cell in cells:
        found = backend.cell_config(cell).mismatches
        if found:
            raise AblateError(
                f"{cell.id}: not the setup it claims to be; " + "; ".join(mismatch_lines(found)),
                hint="nothing was run; `ablate probe` names what each cell holds (please report this as a bug)",
            )


def check_reachable(
    chosen: IsolationInfo, allow_network: bool, endpoint: EndpointInfo, environ: Mapping[str, str]
) -> None:
    """Refuse (exit 2) a run whose sealed sessions could not reach the model (:mod:`ablate.isolate.seal`)."""
    from ablate.isolate.detect import is_sealed
    from ablate.isolate.seal import unreachable_when_sealed

    if not is_sealed(chosen) or allow_network:
        return
    why = unreachable_when_sealed(environ, endpoint.settings_env)
    if why:
        raise UsageError(
            "sessions run in a network namespace of their own and reach only ANTHROPIC_BASE_URL through "
            "ablate's forwarder:\n  " + "\n  ".join(why),
            hint="run with --allow-network (the sessions then share your network; the report says so)",
        )


def _hidden(chosen: IsolationInfo, request: ExecuteRequest, setup: Setup) -> dict[str, list[str]]:
    """The manifest's ``isolation.hidden`` (nothing where no fence ran) and ``exposed``."""
    secrets = request.preflight.secrets
    return {"hidden": secrets.shown(setup.home) if chosen.locked else [], "exposed": list(secrets.exposed)}


def network_mode(chosen: IsolationInfo, request: ExecuteRequest) -> str:
    """The manifest's ``isolation.network``: ``sealed``, ``host`` (``--allow-network``) or ``unsealed``."""
    from ablate.isolate.detect import is_sealed

    if not is_sealed(chosen):
        return "unsealed"
    return "host" if request.allow_network else "sealed"


@dataclass
class _Passes:
    """The scheduler passes of one :func:`execute`: a :class:`Runner` per pass, each handed the last one's
    manifest, and one :class:`EnvPool`; with ``keep``, one folder lock and the environments kept between them."""

    prepared: PreparedRun
    request: ExecuteRequest
    manifest: RunManifest
    backend: EnvBackend
    work_root: Path
    on_progress: Callable[[Progress], None] | None
    keep: bool
    runner: Runner | None = None
    summary: RunSummary | None = None
    stopped: bool = False
    """Ctrl-C was pressed: no further pass starts."""

    def __post_init__(self) -> None:
        self.cells = {c.id: c for c in self.prepared.cell_set.cells}
        self.pool = EnvPool(self.backend, self.cells, self.request.options.jobs, keep=self.keep)
        self.pool.cleaned = True

    def request_stop(self, *, kill: bool = False) -> None:
        self.stopped = True
        if self.runner is not None:
            self.runner.request_stop(kill=kill)

    def drive(self, rounds: Rounds | None) -> RunSummary:
        """One pass, or ``rounds``' passes (at least one, so the manifest records this invocation)."""
        try:
            if rounds is None:
                return self.one_pass()
            with RunLock(self.prepared.folder):
                rounds(self.round)
                return self.summary if self.summary is not None else self.one_pass()
        finally:
            self.pool.close()

    def round(self) -> str:
        if self.stopped:
            return "interrupted"
        return self.one_pass().outcome

    def one_pass(self) -> RunSummary:
        self.runner = Runner(
            self.prepared.folder,
            self.manifest,
            tasks={t.id: t for t in self.prepared.tasks},
            cells=self.cells,
            backend=self.backend,
            options=self.request.options,
            tree_hook=self.request.tree_hook,
            claude=self.request.claude,
            forced=self.request.forced,
            work_root=self.work_root,
            on_progress=self.on_progress,
            pool=self.pool,
            lock=not self.keep,
        )
        if self.stopped:  # Ctrl-C between passes: this one launches nothing
            self.runner.request_stop()
        self.summary = self.runner.run()
        self.manifest = self.runner.manifest
        return self.summary


@contextmanager
def _sigint(runner: _Passes, request: ExecuteRequest, note: Callable[[str], None]) -> Iterator[list[int]]:
    """Ctrl-C: the first press stops launching, the second kills the running sessions; yields [presses]."""
    presses = [0]
    if not request.handle_sigint or threading.current_thread() is not threading.main_thread():
        yield presses
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        presses[0] += 1
        runner.request_stop(kill=presses[0] > 1)
        if presses[0] == 1:
            grace = request.options.grace_s
            note(f"stopping: no new sessions; running ones get {grace:.0f} s (Ctrl-C again to kill them)")
        else:
            note("killing running sessions")

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield presses
    finally:
        signal.signal(signal.SIGINT, previous)

"""A session worker: prepare the environment, run one pinned `claude -p` session, copy its transcript out of the
shadow, and mine it. Runs in the scheduler's session pool; touches the run folder only through its own files."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path

from ablate.core.claude import count_start
from ablate.core.constants import MAX_RETRIES_ENV
from ablate.core.fsutil import atomic_write_bytes, disk_full_message, is_disk_full, mount_point
from ablate.core.proc import ExecResult, run_process
from ablate.folder.layout import RunFolder
from ablate.folder.limits import Limits, limit_error
from ablate.folder.wire import relay_flags, wire_path
from ablate.isolate.backend import EnvBackend
from ablate.isolate.forwarder import shared_forwarder
from ablate.isolate.gitreads import git_history_reads
from ablate.isolate.limits import SessionLimits
from ablate.mine.derive import mine_session
from ablate.run.hooks import HookRefused, TreeHook
from ablate.run.schedule_types import Job, SessionOutcome
from ablate.run.session import PAUSE_API_STATUSES, compare_wire, copy_transcript
from ablate.setup.cells import ResolvedCell


@dataclass(frozen=True)
class Worker:
    """What every session of one run shares."""

    folder: RunFolder
    backend: EnvBackend
    cells: dict[str, ResolvedCell]
    tree_hook: TreeHook
    tag: str
    """The run's process tag; each session's processes carry ``tag + session_id``."""
    killed: Set[str]
    """Session ids the runner killed (their status is ``interrupted``)."""
    max_retries: int
    """The manifest's ``max_retries``: the CLI's own retries, kept low."""
    limits: Limits = field(default_factory=Limits)
    """Each session's limits (docs/ARCHITECTURE.md#limits)."""

    def attempt(self, job: Job) -> SessionOutcome:
        """Worker: prepare the environment, run one session, copy its transcript out of the shadow, mine it."""
        folder, it, a = self.folder, job.item, job.attempt
        try:
            if job.prepare == "reset":
                self.backend.reset(job.env)
            elif job.prepare == "retarget":
                self.backend.retarget(job.env, self.cells[it.cell])
        except Exception as exc:
            return SessionOutcome(
                job, None, None, "env_error", None, error=f"environment not prepared: {exc}"
            )
        # ablate touches the session's tree only through the backend: in `namespace`, env.cwd is the user's
        # real repository path (the session sees its own view there), never a place to write seed files
        tree = self.backend.checkout
        try:  # seed files of the task, and a snapshot of the seeded start when it has checks (ablate.grade)
            with tree(job.env) as checkout:
                baseline = self.tree_hook.before(job.task, checkout)
        except HookRefused as exc:
            return SessionOutcome(job, None, None, "error", None, error=str(exc))
        except OSError as exc:
            if is_disk_full(exc):  # TMPDIR or the cell's layer: the task could not be seeded
                said = disk_full_message(exc, kept="the session did not start; the item is re-run on resume")
                return SessionOutcome(job, None, None, "error", None, error=said)
            return SessionOutcome(job, None, None, "env_error", None, error=f"checkout not reachable: {exc}")
        stdout = folder.stdout_path(it.item, a.n)
        env = dict(job.env.env)
        # the task's EVAL_* variables, the same in every cell (never ablate's own: EVAL_* names only)
        env.update(job.task.spec.env)
        env[MAX_RETRIES_ENV] = str(self.max_retries)  # the one place: ablate owns the rate-limit backoff
        argv = self.backend.command(job.env, job.argv)
        forwarder = shared_forwarder()  # what a sealed session sends the model is recorded under the item
        forwarder.expect(a.session_id, wire_path(folder.root, it.item), item=it.item, attempt=a.n)
        try:
            ex = self._run(job, argv, env, stdout)
        except OSError as exc:
            baseline.discard()
            forwarder.records(a.session_id)
            if is_disk_full(exc):  # the session ran: its stdout record could not be written
                kept = "the session ran; its stdout record is lost and the item is re-run on resume"
                return SessionOutcome(job, None, None, "error", None, error=disk_full_message(exc, kept=kept))
            return SessionOutcome(job, None, None, "launch_error", None, error=str(exc))
        # the transcript first: checks that read the session's tool calls find it in the run folder
        transcript, full = _copy_transcript(folder, job)
        full = layer_full(job.env.root) or full  # the CLI could not write its transcript: not evidence
        # checks read the checkout the session left, before any reset of it (ablate.grade)
        try:
            with tree(job.env) as checkout:
                self.tree_hook.after(folder, it.item, a.n, job.task, checkout, baseline)
        except OSError as exc:  # the session stands; only its grade is missing (said in its stderr file)
            baseline.discard()
            ex = dataclasses.replace(
                ex, stderr_tail=ex.stderr_tail + f"\nablate: checkout not reachable for grading: {exc}\n"
            )
        full = full or _keep_stderr(folder, job, ex.stderr_tail)
        target = transcript or folder.transcript_path(it.item, a.n, a.session_id)
        try:
            writes = self.backend.after_session(job.env)
        except Exception as exc:  # what it wrote is unknown: an error of this session, never of the run
            forwarder.records(a.session_id)
            said = f"could not list what the session wrote: {exc}"
            return SessionOutcome(job, ex, None, "error", transcript, error=said, writes={"error": said})
        try:
            flags = git_history_reads(transcript, self.backend.stripped_paths(job.env))
        except Exception:  # the report must not lose the session
            flags = []
        if full or ex.limit:
            forwarder.records(a.session_id)
            why = limit_error(ex.limit, self.limits) if ex.limit else full
            status = f"limit:{ex.limit}" if ex.limit else "error"
            return SessionOutcome(job, ex, None, status, transcript, error=why, writes=writes)
        try:
            mined = mine_session(target, stdout=stdout, pitfalls=job.task.pitfall_patterns(), cwd=job.env.cwd)
        except OSError as exc:
            forwarder.records(a.session_id)
            return SessionOutcome(job, ex, None, "no_transcript", transcript, error=str(exc), writes=writes)
        flags = [*flags, *relay_flags(forwarder.relay_ended_at(a.session_id), ex.exited_at)]
        wire = compare_wire(forwarder.records(a.session_id), mined, stdout)
        if ex.timed_out:
            status = "timeout"
        elif a.session_id in self.killed:
            status = "interrupted"
        elif mined.status == "api_error" and mined.api_error_status in PAUSE_API_STATUSES:
            status = "rate_limited"
        else:
            status = mined.status
        return SessionOutcome(job, ex, mined, status, transcript, flags=flags, writes=writes, wire=wire)

    def _run(self, job: Job, argv: list[str], env: dict[str, str], stdout: Path) -> ExecResult:
        """Run the session under its limits (docs/ARCHITECTURE.md#limits); its cgroups go with it."""
        sid, lim, forwarder = job.attempt.session_id, self.limits, shared_forwarder()
        count_start("sessions")
        guard = SessionLimits(lim, f"{os.getpid()}-{sid}", job.env.root, lambda: forwarder.over_limit(sid))
        try:
            return run_process(argv, cwd=job.env.cwd, env={**env, **guard.env}, timeout=job.timeout_s,
                               stdout_path=stdout, tag=self.tag + sid, pipe_limits=(lim.stdout, lim.stderr),
                               watch=guard.check, preexec=guard.preexec)  # fmt: skip
        finally:
            guard.close()


def _copy_transcript(folder: RunFolder, job: Job) -> tuple[Path | None, str | None]:
    """The session's transcript copied out of its cell into the run folder, or the located full-disk error."""
    it, a = job.item, job.attempt
    try:
        return copy_transcript(job.env.config_dir, a.session_id, folder.transcript_dir(it.item, a.n)), None
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        return None, _disk_full(folder, job, exc)


def _keep_stderr(folder: RunFolder, job: Job, tail: str) -> str | None:
    """The tail of the session's stderr written to the run folder; the located error when the disk is full."""
    it, a = job.item, job.attempt
    try:
        if tail.strip():
            err = folder.stderr_path(it.item, a.n)
            err.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(err, tail.encode("utf-8"))
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        return _disk_full(folder, job, exc)
    return None


#: A cell's layer with less room than this after a session was full during it: the CLI's writes (its
#: transcript) may have failed, so the session is no evidence.
LAYER_MIN_FREE = 64 * 1024


def layer_full(root: Path) -> str | None:
    """The located error for a cell whose file system (holding ``root``) is full, else None."""
    try:
        st = os.statvfs(root)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free >= LAYER_MIN_FREE:
        return None
    return (
        f"{root}: the file system mounted at {mount_point(root)} (the cell's layer) is full "
        f"({free} bytes free) after the session: its transcript may be torn; the session is not counted "
        "and the item is re-run on resume"
    )


def _disk_full(folder: RunFolder, job: Job, exc: OSError) -> str:
    """The located full-disk error of an attempt, with what of it reached the run folder."""
    item, n = job.item.item, job.attempt.n
    names = [
        p.relative_to(folder.root).as_posix()
        for p in (folder.stdout_path(item, n), folder.stderr_path(item, n), folder.transcript_dir(item, n))
        if p.exists()
    ]
    kept = ", ".join(names) if names else "nothing of this attempt"
    return disk_full_message(exc, kept=f"kept: {kept}; the item is re-run on resume")

"""The end of a scheduler invocation, however it ends (finished, stopped, or an exception): sessions still
running finish (or were killed) and their results are written, the environments are removed, the plan is
flushed and the manifest records how the invocation ended. A pool kept across passes (adaptive rounds) is
left to its owner, which closes it after the last pass.

A result that cannot be written is an error the caller sees, never swallowed: a paid session would silently
run again on resume.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ablate.core.errors import RunFolderError
from ablate.core.watchdog import Watchdog
from ablate.folder.layout import utcnow, write_manifest
from ablate.run.envpool import EnvPool
from ablate.run.run_state import RunState
from ablate.run.schedule_types import Outcome

if TYPE_CHECKING:
    from ablate.run.scheduler import Runner


def finalise(
    runner: Runner,
    st: RunState,
    pool: EnvPool,
    sessions: ThreadPoolExecutor,
    watchdog: Watchdog,
    *,
    fatal: BaseException | None,
    outcome: Outcome | None,
) -> None:
    """Drain, clean up and record; sets ``st.final``. Raises :class:`RunFolderError` when a finished session
    could not be recorded (unless another exception is already on its way)."""
    write_errors: list[BaseException] = []
    for fut in list(st.running):
        try:
            res = fut.result()
        except Exception as exc:  # the worker itself failed: the item stays pending
            write_errors.append(exc)
            continue
        try:
            runner.handle(st, res)
        except Exception as exc:
            write_errors.append(exc)
    st.running.clear()
    sessions.shutdown(wait=True)
    runner.flush_plan(st, force=True)
    if runner.owns_pool:
        pool.close()
    watchdog.close()
    if fatal is not None:
        return
    if write_errors:
        raise RunFolderError(
            f"{runner.folder.root}: could not record {len(write_errors)} finished session(s): {write_errors[0]}",
            hint="fix the cause (disk full? permissions?) and resume; the transcripts are kept",
        ) from write_errors[0]
    final: Outcome = outcome or ("failed-items" if st.failed else "finished")
    if final == "finished" and st.pending:
        final = "failed-items"
    st.final = final
    manifest = runner.manifest
    last = manifest.sessions[-1].model_copy(update={"finished_at": utcnow(), "outcome": final})
    runner.manifest = manifest.model_copy(update={"sessions": [*manifest.sessions[:-1], last]})
    write_manifest(runner.folder, runner.manifest)
    runner.emit(st, "finished")

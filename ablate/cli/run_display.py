"""What ``ablate run`` / ``ablate ab`` show while and after they run: the progress bar, judge-as-you-go, the
summary, and the report written off the critical path."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer

from ablate.cli.common import print_json
from ablate.core.endpoint import money

if TYPE_CHECKING:
    from ablate.run.adaptive import AdaptiveSummary
    from ablate.run.estimate import CostEstimate
    from ablate.run.execute import ExecutionResult

ReportWhen = Literal["background", "now", "none"]


def err(text: str) -> None:
    typer.echo(text, err=True)


def print_estimate(est: CostEstimate, *, simulated: bool = False) -> None:
    """The plan line: sessions, calls, cost, and what the figure rests on (measured, a probe, or assumed)."""
    cost = "~" + money(est.usd, simulated=simulated) if est.usd is not None else "unknown cost"
    err(f"plan: {est.sessions} sessions, ~{est.calls} API calls, {cost} ({est.detail})")


def say_changed(backend: str, changed: Sequence[str]) -> None:
    """An ERROR line for each real file of the user's that changed during the run (the first 20)."""
    for path in changed[:20]:
        err(f"ERROR: {backend} isolation: your real file changed during the run: {path}")
    if len(changed) > 20:
        err(
            f"ERROR: … and {len(changed) - 20} more (all listed in manifest.json, isolation.real_files_changed)"
        )


def render_execution(
    done: ExecutionResult, *, json: bool, adaptive: AdaptiveSummary | None = None, simulated: bool = False
) -> None:
    """The end of a run: adaptive decisions, the guard's findings, the writes, and the summary (or JSON)."""
    from ablate.folder.layout import RunFolder
    from ablate.folder.result import read_result

    rounds = {"adaptive": adaptive.to_json()} if adaptive is not None else {}
    for note in adaptive.notes if adaptive is not None else []:
        err(f"note: {note}")
    if rounds and not json:
        said = rounds["adaptive"]
        err(
            f"adaptive: stopped ({said['stopped']}) after {said['rounds']} rounds, {said['sessions']} sessions"
        )
        for cell, d in said["decisions"].items():
            err(f"  {cell}: {d['reason']}")
    summary = done.summary
    for note in done.guard_notes:
        err(f"note: {note}")
    say_changed(done.isolation.backend, done.real_files_changed)
    for line in done.writes:
        err(line)
    if json:
        print_json({**done.to_json(), **rounds})
        return
    if done.isolation.network == "unsealed":
        typer.echo(
            f"UNSEALED (--unsealed): sessions shared the host's network and sockets ({done.isolation.reason})"
        )
    typer.echo(
        f"{summary.outcome}: {summary.done}/{summary.total} complete, {len(summary.failed)} failed, "
        f"{len(summary.pending)} not run, {summary.rate_limited} rate-limited attempts, "
        f"{money(summary.spend_usd, simulated=simulated, digits=4)} spent, {summary.elapsed_s:.1f} s "
        f"({summary.folder})"
    )
    for item in summary.failed:
        res = read_result(RunFolder(summary.folder), item)
        why = (res.error or res.status) if res is not None else "no result"
        typer.echo(f"  failed {item}: {why}")
    if summary.pending and summary.outcome != "finished":
        typer.echo(f"resume with: ablate run --resume {summary.folder}")


def write_report(run_dir: Path, when: ReportWhen, *, quiet: bool) -> None:
    """The report at the end of a run: ``now``, ``background`` (logged to report.log) or ``none``."""
    if when == "none":
        return
    if when == "now":
        from ablate.cli.report import report_after_run

        report_after_run(run_dir, quiet=quiet)
        return
    from ablate.folder.layout import RunFolder

    log = RunFolder(run_dir).report_log
    with log.open("wb") as fh:
        subprocess.Popen(
            [sys.executable, "-m", "ablate", "report", str(run_dir)],
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    if not quiet:
        err(f"report: being written in the background to {run_dir}/report.md (log: {log})")


class JudgeAsYouGo:
    """``--judge-model M``: judge complete items in a background thread while the run goes on.

    Made before the run folder is: a judge that cannot be used (same model, no key) is refused first."""

    def __init__(self, run_model: str | Sequence[str], judge_model: str | None, allow_same: bool) -> None:
        self.judge_model = judge_model
        self.run_dir: Path | None = None
        self.note: Callable[[str], None] = err
        self._done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        if judge_model is not None:
            from ablate.grade.judge import check_judges, make_client

            check_judges(run_model, [judge_model], allow_same=allow_same)
            self._client = make_client()  # fail before the run when there is no key

    def start(self, run_dir: Path, note: Callable[[str], None]) -> None:
        self.run_dir, self.note = run_dir, note
        if self.judge_model is not None:
            self._thread = threading.Thread(target=self._loop, name="ablate-judge-as-you-go", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        from ablate.grade.judge import JudgeOptions, judge_folder

        assert self.judge_model is not None and self.run_dir is not None
        options = JudgeOptions(judge_models=(self.judge_model,), allow_same_judge=True, jobs=2)
        try:
            while True:
                last = self._done.is_set()
                summary = judge_folder(self.run_dir, options, client=self._client, stop=self._stop)
                if last:
                    self.note(
                        f"judge {self.judge_model}: {summary.by_judge.get(self.judge_model)} "
                        f"({summary.pending} left; `ablate judge {self.run_dir} --judge-model "
                        f"{self.judge_model}` resumes)"
                    )
                    return
                self._done.wait(2.0)
        except BaseException as exc:  # reported after the run; the run itself is not affected
            self.error = exc

    def finish(self, *, interrupted: bool) -> None:
        if self._thread is None:
            return
        if interrupted:
            self._stop.set()
        self._done.set()
        self._thread.join()
        if self.error is not None:
            self.note(f"judge failed: {self.error}")


#: Without a terminal (a CI log, ``| tee``): a progress line at least this often, and at each tenth of the run.
LINE_EVERY_S = 30.0


class Display:
    """Progress on stderr: a rich bar on a terminal, otherwise a line at least every :data:`LINE_EVERY_S`
    seconds and at each tenth of the work."""

    def __init__(self, *, enabled: bool, simulated: bool = False, tty: bool | None = None) -> None:
        self.enabled = enabled
        self.simulated = simulated
        self.tty = sys.stderr.isatty() if tty is None else tty
        self._progress: Any = None
        self._task: Any = None
        self._lines: ProgressLines | None = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    def _start(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        spend = "${task.fields[spend]:.4f}" + (" (simulated)" if self.simulated else "")
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "failed {task.fields[failed]}  rate-limited {task.fields[rl]}  running {task.fields[running]}"
            ),
            TimeElapsedColumn(),
            TextColumn(spend),
            console=Console(stderr=True),
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task("run", total=total, failed=0, rl=0, running=0, spend=0.0)

    def update(self, p: Any) -> None:
        if not self.enabled:  # --json: no bar, but what the runner says (pauses, stops) still reaches stderr
            if p.message:
                err(p.message)
            return
        if not self.tty:
            self._line(p)
            return
        if self._progress is None:
            self._start(p.total)
        desc = {"paused": "paused (rate limit)", "stopping": "stopping", "building": "building"}.get(
            p.phase, "run"
        )
        counts = {"failed": p.failed, "rl": p.rate_limited, "running": p.running, "spend": p.spend_usd}
        self._progress.update(self._task, completed=p.done, total=p.total, description=desc, **counts)
        if p.message:
            self.note(p.message)

    def _line(self, p: Any) -> None:
        if self._lines is None:
            self._lines = ProgressLines(self.simulated)
            self._ticker = threading.Thread(target=self._tick, name="ablate-progress-lines", daemon=True)
            self._ticker.start()
        if p.message:
            err(p.message)
        line = self._lines.feed(p, time.monotonic())
        if line:
            err(line)

    def _tick(self) -> None:
        """A line every :data:`LINE_EVERY_S` seconds even when nothing finishes (long sessions)."""
        while not self._stop.wait(1.0):
            assert self._lines is not None
            line = self._lines.due(time.monotonic())
            if line:
                err(line)

    def note(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text)
        else:
            err(text)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self._progress is not None:
            self._progress.stop()


class ProgressLines:
    """The plain progress lines: which snapshot deserves a line, and its words."""

    def __init__(self, simulated: bool, every_s: float = LINE_EVERY_S) -> None:
        self.simulated = simulated
        self.every_s = every_s
        self._lock = threading.Lock()
        self._last: Any = None
        self._last_at: float | None = None
        self._tenth = -1
        self._started: float | None = None
        self._done_at_start = 0

    def feed(self, p: Any, now: float) -> str | None:
        """The line for snapshot ``p`` when it crosses a tenth of the work or the last line is old."""
        with self._lock:
            if self._started is None:
                self._started, self._done_at_start = now, p.done
            self._last = p
            tenth = (10 * (p.done + p.failed)) // max(1, p.total)
            if tenth > self._tenth or self._last_at is None or now - self._last_at >= self.every_s:
                self._tenth = max(self._tenth, tenth)
                return self._say(p, now)
            return None

    def due(self, now: float) -> str | None:
        """The latest snapshot's line when no line was printed for :attr:`every_s` seconds."""
        with self._lock:
            if self._last is None or self._last_at is None or now - self._last_at < self.every_s:
                return None
            return self._say(self._last, now)

    def _say(self, p: Any, now: float) -> str:
        self._last_at = now
        parts = [f"{p.done}/{p.total} sessions", f"{p.failed} failed"]
        if p.rate_limited:
            parts.append(f"{p.rate_limited} rate-limited")
        parts.append(money(p.spend_usd, simulated=self.simulated))
        if p.phase in ("paused", "stopping", "building"):
            parts.append({"paused": "paused (rate limit)"}.get(p.phase, p.phase))
        parts.append(f"eta {self._eta(p, now)}")
        return ", ".join(parts)

    def _eta(self, p: Any, now: float) -> str:
        assert self._started is not None
        finished = p.done + p.failed - self._done_at_start
        left = p.total - p.done - p.failed
        if left <= 0:
            return "0s"
        if finished <= 0:
            return "unknown"
        return _duration((now - self._started) / finished * left)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"

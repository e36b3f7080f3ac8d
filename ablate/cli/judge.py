"""``ablate judge``: a thin shell over :mod:`ablate.grade.judge` (blind judge verdicts for a run folder)."""

from __future__ import annotations

import dataclasses
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from ablate.cli.common import AllowSameJudge, Backoff, Json, JudgeModel, Split, cli_errors, one_of, print_json
from ablate.core.backoff import FIRST_PAUSE_S, BackoffPolicy
from ablate.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL

if TYPE_CHECKING:
    from ablate.grade.judge import JudgeSummary
    from ablate.grade.recheck import Agreement

app = typer.Typer()

JudgeModels = Annotated[
    str | None,
    typer.Option(
        "--judge-models",
        help="Several judges, comma-separated (A,B): each grades every item; agreement is reported.",
    ),
]


def judge_list(judge_model: str | None, judge_models: str | None) -> tuple[str, ...]:
    """The judges named by --judge-model and --judge-models (comma-separated), in order, without blanks."""
    names = [judge_model] if judge_model else []
    names += [m.strip() for m in (judge_models or "").split(",") if m.strip()]
    return tuple(dict.fromkeys(names))


def split_choice(value: str) -> Literal["dev", "holdout", "both"]:
    return one_of("--split", value, ("dev", "holdout", "both"))


def holdout_lines(run_dir: Path, judges: tuple[str, ...]) -> tuple[list[dict[str, object]], list[str]]:
    """The dev/holdout check of each judge's pass rate against the set's control, as JSON and as lines."""
    from ablate.folder.layout import RunFolder, read_manifest
    from ablate.grade.splits import holdout_findings, split_of_tasks

    folder = RunFolder(run_dir)
    manifest = read_manifest(folder)
    if set(split_of_tasks(folder).values()) != {"dev", "holdout"}:
        return [], ["dev/holdout: not checked (the check needs tasks in both splits)"]
    if manifest.models:  # its blocks hold every model: ablate report checks the reference model's
        return [], ["dev/holdout: not checked here for a run of several models (see the report)"]
    control = next((c.id for c in manifest.cells if not c.stripped), None)
    if control is None:
        return [], ["dev/holdout: not checked (no cell strips nothing: no control)"]
    found: list[dict[str, object]] = []
    lines: list[str] = []
    cells = [c.id for c in manifest.cells]
    for judge in judges or (None,):
        for f in holdout_findings(
            run_dir, cells, control=control, metric="judge_pass", alpha=0.05, judge_model=judge
        ):
            found.append({"judge": judge, "cell": f.cell, "kind": f.kind, "p": f.p, "message": f.message})
            lines.append(f"  dev/holdout ({judge}): {f.message}")
    return found, lines or [
        f"dev/holdout: no dev gain of the judge-pass rate reverses on holdout (control {control})"
    ]


def summary_lines(summary: JudgeSummary, agree: list[Agreement], holdout_text: list[str]) -> list[str]:
    """What `ablate judge` prints: the outcome, each judge's counts, agreement, the dev/holdout check."""
    lines = [
        f"{summary.outcome}: {summary.judged} verdicts now ({summary.errors} judge errors), "
        f"{summary.skipped} already graded, {summary.not_judgeable} not judgeable (no rubric or answer), "
        f"{summary.pending} left, {summary.rate_limited} calls paused (rate-limited or not reached), "
        f"${summary.spend_usd:.4f} judge spend (estimated)"
    ]
    for j, counts in summary.by_judge.items():
        lines.append(f"  {j}: pass {counts['pass']}, fail {counts['fail']}, error {counts['error']}")
    for a in agree:
        pct = f"{a.percent:.0f}%" if a.percent is not None else "-"
        kappa = f"{a.kappa:.2f}" if a.kappa is not None else f"n/a ({a.kappa_note})"
        lines.append(f"  agreement {a.judge_a} vs {a.judge_b}: {pct} over {a.n} items, Cohen's kappa {kappa}")
    return lines + holdout_text


@app.command("judge")
@cli_errors
def judge_cmd(
    run_dir: Annotated[Path, typer.Argument(help="The run folder to grade.")],
    judge_model: JudgeModel = None,
    judge_models: JudgeModels = None,
    allow_same_judge: AllowSameJudge = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Judge calls at once.")] = 4,
    budget_usd: Annotated[
        float | None,
        typer.Option(
            "--budget-usd", min=0, help="Stop launching once the recorded judge spend reaches this."
        ),
    ] = None,
    split: Split = "both",
    recheck: Annotated[
        bool,
        typer.Option(
            "--recheck",
            help="Re-run the tasks' checks from the saved diffs (diffs/) first, e.g. after editing the checks.",
        ),
    ] = False,
    backoff: Backoff = FIRST_PAUSE_S,
    json: Json = False,
) -> None:
    """Grade a run's final answers with a blind judge (task prompt, rubric, answer, diff: nothing else).

    Reads the run folder, writes verdicts to grades/<item>.json (never a result). Resumable and idempotent:
    items a judge already graded are skipped, judge errors are asked again. Endpoint and key come from
    ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY. With several judges, prints their agreement (percent and
    Cohen's kappa). Then checks, per judge, whether a cell's judge-pass gain on the dev tasks reverses on the
    holdout tasks (task by task, one-sided exact permutation test at 0.05).

    Exit codes: 0 every judgeable item graded, 1 the folder cannot be judged (locked, corrupt), 2 bad input
    (no judge, judge = model under test, no API key), 3 some items were left (budget, rate limit) or got a
    judge error, 130 interrupted.
    """
    from ablate.grade.judge import JudgeOptions, judge_folder
    from ablate.grade.recheck import agreement, recheck_folder

    judges = judge_list(judge_model, judge_models)
    rechecked = recheck_folder(run_dir, split=split_choice(split)) if recheck else None
    if rechecked is not None and not json:
        typer.echo(
            f"rechecked {rechecked.rechecked} items from their saved diffs ({rechecked.changed} changed verdict, "
            f"{rechecked.no_diff} without a diff)",
            err=True,
        )
    options = JudgeOptions(
        judges, allow_same_judge, jobs, budget_usd, split_choice(split), BackoffPolicy(first_s=backoff)
    )
    stop = threading.Event()

    def note(text: str) -> None:
        if not json:
            typer.echo(text, err=True)

    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: stop.set())
    try:
        summary = judge_folder(run_dir, options, stop=stop, on_progress=note)
    finally:
        signal.signal(signal.SIGINT, previous)
    agree = agreement(run_dir, list(judges)) if len(judges) > 1 else []
    holdout, holdout_text = holdout_lines(run_dir, judges)
    if json:
        doc = {**summary.to_json(), "agreement": [a.to_json() for a in agree], "holdout": holdout}
        if rechecked is not None:
            doc["recheck"] = dataclasses.asdict(rechecked)
        print_json(doc)
    else:
        for line in summary_lines(summary, agree, holdout_text):
            typer.echo(line)
    if summary.outcome == "interrupted":
        raise typer.Exit(EXIT_INTERRUPTED)
    if summary.outcome != "finished" or summary.errors:
        raise typer.Exit(EXIT_PARTIAL)
    raise typer.Exit(EXIT_OK)

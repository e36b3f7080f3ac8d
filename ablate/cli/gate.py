"""``ablate gate``: a thin shell over :mod:`ablate.ci.gate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ablate.cli.common import Json, cli_errors, print_json
from ablate.core.errors import EXIT_FAILURE, EXIT_INCONCLUSIVE, UsageError

app = typer.Typer()


@app.command("gate")
@cli_errors
def gate_cmd(
    source: Annotated[
        Path,
        typer.Argument(
            help="A run folder (its report.json; built when missing), a report.json, or a compare.json.",
            show_default=False,
        ),
    ],
    require: Annotated[
        list[str] | None,
        typer.Option(
            "--require",
            help="A rule that must also hold (repeatable): 'C1 helps', 'new better by 10pts', "
            "'all not worse', 'any helps'.",
            show_default=False,
        ),
    ] = None,
    min_effect: Annotated[
        str | None,
        typer.Option(
            "--min-effect",
            help="Smallest acceptable gain of a helps/better rule (0.1, 10% or 10pts; point estimate, primary "
            "metric). With a compare.json and no --require: every arm must be better by this much.",
            show_default=False,
        ),
    ] = None,
    max_excluded: Annotated[
        float,
        typer.Option(
            "--max-excluded", min=0, max=1, help="Largest share of items that may be excluded (0..1)."
        ),
    ] = 0.10,
    detect: Annotated[
        str,
        typer.Option(
            "--detect",
            help="The change of the primary rate the run must be able to detect (80% power, in both "
            "directions, by the test that decides) for a pass without a real gain: 20pts, 0.2, 20%; "
            "'off' to not require it. A run that cannot is inconclusive (exit 4).",
        ),
    ] = "20pts",
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="An earlier run folder of the same cells and tasks: fail when a layer that helped for real "
            "there helps less now, by `ablate diff`'s test (not by comparing verdict words).",
            show_default=False,
        ),
    ] = None,
    summary: Annotated[
        Path | None,
        typer.Option(
            "--summary",
            help="Write the Markdown summary here (a PR comment body, or $GITHUB_STEP_SUMMARY: appended).",
            show_default=False,
        ),
    ] = None,
    json: Json = False,
) -> None:
    """One CI decision from a report: pass (exit 0), fail (exit 1) or inconclusive (exit 4), with the reasons.

    Fails when the run is not trustworthy (the recorded probe not faithful, leaks, model not verified, more
    than --max-excluded of the items excluded) or when a primary outcome got worse for real (a layer that
    hurts; an arm worse than its baseline). Passes when something is better, or when there is no real
    difference — said as such, with the smallest effect the run could detect. --require rules and
    --min-effect state a team's own conditions.

    Inconclusive (exit 4) when some subject is neither real nor settled and the run cannot detect a change of
    --detect (20 points) with 80% power in both directions, by the test that decides it: a run too small to
    see a regression never passes. A report.json is checked against the run folder's results (a digest) and
    rebuilt when it is stale. A real pooled regression of pitfall-free fails whatever --primary the report
    was written with.

    --baseline RUN_A fails when a layer that helped for real in RUN_A helps less in this run by the test of
    `ablate diff` (two independent runs, Holm over cells).

    Exit codes: 0 pass, 1 fail, 2 bad input (a missing or invalid report, a rule that does not parse or
    names no cell or arm of the report), 4 inconclusive.
    """
    from ablate.ci.gate import decide
    from ablate.ci.rules import parse_effect, parse_rule
    from ablate.ci.summary import render_summary
    from ablate.ci.verdicts import load_evidence

    effect = None if min_effect is None else parse_effect(min_effect, "--min-effect")
    required = None if detect.strip().lower() == "off" else parse_effect(detect, "--detect")
    rules = [parse_rule(r, effect) for r in require or []]
    ev = load_evidence(source)
    if effect is not None and not any(r.claim == "better" for r in rules):
        if ev.kind == "run":
            raise UsageError(
                "--min-effect needs a rule that names what must help",
                hint="add e.g. --require 'C1 helps' or --require 'any helps'",
            )
        rules.append(parse_rule("all better", effect))
    lost = [] if baseline is None else _lost_help(baseline, source, ev.kind)
    result = decide(ev, rules, max_excluded=max_excluded, detect=required, lost=lost)
    if summary is not None:
        if summary.is_dir():
            raise UsageError(f"--summary {summary}: is a folder", hint="pass a file path")
        # appended: $GITHUB_STEP_SUMMARY collects the output of every step
        try:
            with summary.open("a", encoding="utf-8") as fh:
                fh.write(render_summary(result))
        except OSError as exc:
            raise UsageError(f"--summary {summary}: cannot write ({exc.strerror})") from None
    if json:
        print_json(result.to_json())
    else:
        typer.echo(result.headline)
        for r in result.reasons[1:]:
            typer.echo(f"  also: {r}")
        for n in result.notes:
            typer.echo(f"  note: {n}")
    if result.outcome == "inconclusive":
        raise typer.Exit(EXIT_INCONCLUSIVE)
    if not result.passed:
        raise typer.Exit(EXIT_FAILURE)


def _lost_help(baseline: Path, source: Path, kind: str) -> list[str]:
    from ablate.report.rundiff import diff_runs, lost_help

    run = source if source.is_dir() else source.parent
    if kind != "run" or not (run / "manifest.json").is_file():
        raise UsageError(
            f"--baseline: {source} is not a run folder (or a report.json inside one)",
            hint="--baseline compares two runs of the same cells and tasks",
        )
    if not (baseline / "manifest.json").is_file():
        raise UsageError(f"--baseline {baseline}: not a run folder (no manifest.json)")
    return lost_help(diff_runs(baseline, run))

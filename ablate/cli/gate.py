"""``ablate gate``: a thin shell over :func:`ablate.ci.gating.gate_source`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ablate.cli.common import Json, cli_errors, print_json
from ablate.core.errors import EXIT_FAILURE, EXIT_INCONCLUSIVE

if TYPE_CHECKING:
    from ablate.ci.gate import GateResult

app = typer.Typer()


_AllowUnsealed = Annotated[
    bool,
    typer.Option(
        "--allow-unsealed",
        help="Let a run whose sessions were not sealed (`run --unsealed`: the host's network and sockets) "
        "pass; without it such a run fails as not trustworthy.",
    ),
]

_Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Gate this model's part of a run of several (`--models`): its comparisons, ranking, power and "
        "verification. Required for such a run (one gate per model); a model the report has not is exit 2.",
    ),
]


@app.command("gate")
@cli_errors
def gate_cmd(
    source: Annotated[
        Path,
        typer.Argument(
            help="A run folder (its report.json; built when missing), a report.json, or a compare.json."
        ),
    ],
    require: Annotated[
        list[str] | None,
        typer.Option(
            "--require",
            help="A rule that must also hold (repeatable): 'C1 helps', 'new better by 10pts', "
            "'all not worse', 'any helps'.",
        ),
    ] = None,
    min_effect: Annotated[
        str | None,
        typer.Option(
            "--min-effect",
            help="Smallest acceptable gain of a helps/better rule (0.1, 10% or 10pts; point estimate, primary "
            "metric). With a compare.json and no --require: every arm must be better by this much.",
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
        ),
    ] = None,
    summary: Annotated[
        Path | None,
        typer.Option(
            "--summary",
            help="Write the Markdown summary here (a PR comment body, or $GITHUB_STEP_SUMMARY: appended).",
        ),
    ] = None,
    allow_unsealed: _AllowUnsealed = False,
    model: _Model = None,
    json: Json = False,
) -> None:
    """One CI decision from a report: pass (exit 0), fail (exit 1) or inconclusive (exit 4), with the reasons.

    Fails when the run is not trustworthy (the recorded probe not faithful, leaks, model not verified, more
    than --max-excluded of the items excluded, sessions not sealed without --allow-unsealed) or when a
    primary outcome got worse for real (a layer that hurts; an arm worse than its baseline). Passes when something is better, or when there is no real
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
    names no cell or arm of the report, no --model for a run of several models or one it has not), 4
    inconclusive.
    """
    from ablate.ci.gating import gate_source
    from ablate.ci.summary import append_summary

    result = gate_source(
        source,
        require=require or [],
        min_effect=min_effect,
        max_excluded=max_excluded,
        detect=detect,
        baseline=baseline,
        allow_unsealed=allow_unsealed,
        model=model,
    )
    if summary is not None:
        append_summary(summary, result)
    _echo(result, json=json)
    if result.outcome == "inconclusive":
        raise typer.Exit(EXIT_INCONCLUSIVE)
    if not result.passed:
        raise typer.Exit(EXIT_FAILURE)


def _echo(result: GateResult, *, json: bool) -> None:
    if json:
        print_json(result.to_json())
        return
    typer.echo(result.headline)
    for r in result.reasons[1:]:
        typer.echo(f"  also: {r}")
    for n in result.notes:
        typer.echo(f"  note: {n}")

"""One ``ablate gate`` call as a library function: read the evidence of a source (a run folder, a report.json
or a compare.json), turn the options into rules, find what a ``--baseline`` run lost, and decide."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ablate.ci.gate import GateResult, decide
from ablate.ci.rules import parse_effect, parse_rule
from ablate.ci.verdicts import load_evidence
from ablate.core.errors import UsageError
from ablate.folder.layout import RunFolder


def gate_source(
    source: Path,
    *,
    require: Sequence[str] = (),
    min_effect: str | None = None,
    max_excluded: float = 0.10,
    detect: str = "20pts",
    baseline: Path | None = None,
    allow_unsealed: bool = False,
    model: str | None = None,
) -> GateResult:
    """The gate's decision on ``source``, its option texts parsed here (a bad one: :class:`UsageError`).
    ``detect`` ``off`` drops the power requirement; ``min_effect`` without a "better" rule means ``all better``
    for a compare.json and is an error for a run (it needs a rule naming what must help)."""
    effect = None if min_effect is None else parse_effect(min_effect, "--min-effect")
    required = None if detect.strip().lower() == "off" else parse_effect(detect, "--detect")
    rules = [parse_rule(r, effect) for r in require]
    ev = load_evidence(source, model)
    if effect is not None and not any(r.claim == "better" for r in rules):
        if ev.kind == "run":
            raise UsageError(
                "--min-effect needs a rule that names what must help",
                hint="add e.g. --require 'C1 helps' or --require 'any helps'",
            )
        rules.append(parse_rule("all better", effect))
    lost = [] if baseline is None else _lost_help(baseline, source, ev.kind)
    return decide(
        ev, rules, max_excluded=max_excluded, detect=required, lost=lost, allow_unsealed=allow_unsealed
    )


def _lost_help(baseline: Path, source: Path, kind: str) -> list[str]:
    from ablate.report.rundiff import diff_runs, lost_help

    run = source if source.is_dir() else source.parent
    if kind != "run" or not RunFolder(run).has_manifest:
        raise UsageError(
            f"--baseline: {source} is not a run folder (or a report.json inside one)",
            hint="--baseline compares two runs of the same cells and tasks",
        )
    if not RunFolder(baseline).has_manifest:
        raise UsageError(f"--baseline {baseline}: not a run folder (no manifest.json)")
    return lost_help(diff_runs(baseline, run))

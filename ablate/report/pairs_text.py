"""``ablate show`` as text: a run's answer and its flipped pairs, or one pair's two sessions side by side (at 120
columns and more; stacked below), aligned turn by turn, with the context diff first."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

from ablate.core.errors import AblateError, NotFound, UsageError
from ablate.folder.layout import RunFolder
from ablate.report.context import Context, make_context
from ablate.report.cost_per_pass import pass_metric
from ablate.report.flipped import command, flip_words, strips_of
from ablate.report.model import METRIC_LABELS
from ablate.report.pairs import Pair, Side, Turn, cell_flips, choose

#: Width from which the two sessions stand side by side.
SIDE_BY_SIDE = 120
#: Flips listed per cell in the run's summary (``--json`` has them all).
LISTED = 5


@dataclass
class Shown:
    """What ``ablate show`` prints: ``data`` for ``--json``, ``lines`` as text, ``notes`` on stderr."""

    data: dict[str, Any]
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def open_run(run_dir: Path, model: str | None = None) -> tuple[Context, list[str]]:
    """The run's context and notes (a run still running: what has finished; which model of a run of several is
    shown); not a run folder, or a model the run has not, is exit 2."""
    from ablate.folder.lock import lock_holder

    folder = RunFolder(run_dir)
    if not folder.has_manifest:
        raise NotFound(
            f"{run_dir}: not a run folder (no manifest.json)",
            hint="pass runs/<run-id> as `ablate run` wrote it",
        )
    ctx = make_context(run_dir, alpha=0.05, control=None, primary=None, say=lambda _m: None, model=model)
    holder, models, notes = lock_holder(folder), ctx.manifest.models, []
    if holder:
        notes.append(
            f"{run_dir}: still running ({holder}): {len(ctx.results)} of {len(ctx.plan)} items finished, shown"
        )
    if models and model is None:
        notes.append(
            f"a run of {', '.join(models)}: {ctx.model}'s sessions shown; pass --model for another's"
        )
    return ctx, notes


def show(
    run_dir: Path,
    cell: str | None,
    task: str | None,
    repeat: int | None,
    width: int,
    model: str | None = None,
) -> Shown:
    """The run's summary (no ``cell``) or one pair (``cell``, by default its first flipped pair); in a run of
    several models, ``model``'s (by default the first's)."""
    if cell is None and (task is not None or repeat is not None):
        raise UsageError(
            "--task/--repeat: name the cell too", hint="ablate show RUN --cell C --task T [--repeat R]"
        )
    ctx, notes = open_run(run_dir, model)
    flips = [cell_flips(ctx, c) for c in ctx.tested]
    if cell is not None:
        pair = choose(ctx, flips, cell, task, repeat)
        return Shown(pair.model_dump(mode="json"), pair_lines(pair, width), notes)
    from ablate.report.models import parts, view
    from ablate.report.sections import build_report
    from ablate.report.terminal import answer_text

    try:
        report = build_report(run_dir)
        report = next((view(report, p) for p in parts(report) if p.model == ctx.model), report)
        answer = answer_text(report, width)
    except AblateError as exc:
        answer = [f"no answer yet: {exc}"]
    metric, named = pass_metric(ctx.primary), ctx.model if ctx.manifest.models else None
    label = METRIC_LABELS.get(metric, metric)
    lines = [*answer, "", f"Flipped pairs (the control {ctx.control.id} and the cell disagree on {label}):"]
    for c in flips:
        lines.append(f"  {c.cell} (strips {strips_of(c)}): {len(c.flipped)} of {c.blocks} pairs flipped")
        for f in c.flipped[:LISTED]:
            lines += [
                f"    {flip_words(ctx.control.id, c.cell, f)}",
                f"      {command(str(run_dir), c.cell, f, named)}",
            ]
        if len(c.flipped) > LISTED:
            lines.append(f"    … {len(c.flipped) - LISTED} more (--json lists them all)")
    data = {
        "run": str(run_dir),
        "model": ctx.model,
        "answer": answer,
        "control": ctx.control.id,
        "metric": metric,
    }
    return Shown(data | {"cells": [c.model_dump(mode="json") for c in flips]}, lines, notes)


def _wrap(lines: list[str], width: int) -> list[str]:
    return [w for ln in lines for w in (textwrap.wrap(ln, width, subsequent_indent="  ") or [""])]


def _turn(t: Turn | None) -> list[str]:
    calls = [f"→ {c.name}: {c.arg}" if c.arg else f"→ {c.name}" for c in t.calls] if t else []
    return (t.text.splitlines() if t else []) + calls


def _mark(s: Side, control: bool = False) -> str:
    words = "not scored" if s.passed is None else "passed" if s.passed else "failed"
    return f"{s.cell}{' (control)' if control else ''}: {words}" + (f" · {s.status}" if s.status else "")


def _outcomes(s: Side) -> list[str]:
    return [
        f"{'✓' if o.passed else '?' if o.passed is None else '✗'} {o.kind} {o.name}"
        + (f" — {o.detail}" if o.detail else "")
        for o in s.outcomes
    ] or ["(none recorded)"]


def pair_lines(p: Pair, width: int) -> list[str]:
    """One pair as text: the context diff, then the two sessions part by part (side by side from
    :data:`SIDE_BY_SIDE` columns)."""
    a, b = p.control, p.other
    col = (width - 3) // 2
    wide = width >= SIDE_BY_SIDE

    def both(title: str, left: list[str], right: list[str]) -> list[str]:
        if wide:
            rows = zip_longest(_wrap(left, col), _wrap(right, col), fillvalue="")
            return [f"── {title} ".ljust(width, "─"), *(f"{x:<{col}} │ {y}".rstrip() for x, y in rows)]
        return [f"── {title} ".ljust(width, "─"), f"[{a.cell}]", *_wrap(left, width - 2), f"[{b.cell}]",
                *_wrap(right, width - 2)]  # fmt: skip

    tokens = [f"{s.cell} {'?' if s.tokens is None else s.tokens} tokens" for s in (a, b)]
    out = _wrap(
        [f"{p.task} r{p.repeat}: {_mark(a, True)}; {_mark(b)}"]
        + [f"{s.cell}: missing {', '.join(s.missing)}" for s in (a, b) if s.missing],
        width,
    )
    first = f"first request: {', '.join(tokens)}" + (
        f"; on the wire these differ: {', '.join(p.differs)}" if p.differs else ""
    )
    out += [
        f"── context diff: what {b.cell} received (- only {a.cell}, + only {b.cell}) ".ljust(width, "─"),
        *_wrap([first], width),
        *(_wrap(p.diff, width) or ["(the transcripts show the same context loaded)"]),
    ]
    out += both("sessions", [_mark(a, True)], [_mark(b)]) if wide else []
    if a.prompt == b.prompt:
        out += ["── prompt ".ljust(width, "─"), *_wrap(a.prompt.splitlines(), width)]
    else:
        out += both("prompt", a.prompt.splitlines(), b.prompt.splitlines())
    for i, (x, y) in enumerate(zip_longest(a.turns, b.turns), start=1):
        out += both(f"turn {i}", _turn(x), _turn(y))
    out += both("final answer", a.answer.splitlines() or ["(none)"], b.answer.splitlines() or ["(none)"])
    out += both("checks and pitfalls", _outcomes(a), _outcomes(b))
    return out

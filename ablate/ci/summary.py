"""The gate's Markdown for a PR comment or ``$GITHUB_STEP_SUMMARY``: verdict, table, caveats, forest plot.

The forest plot is text in a fenced block: GitHub's sanitiser drops inline ``<svg>`` and ``data:`` image URIs,
and a link to an artifact needs a login."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ablate.ci.gate import GateResult, fmt_effect, fmt_estimate, verdict_word
from ablate.ci.verdicts import Evidence, Finding
from ablate.core.errors import UsageError

PLOT_WIDTH = 41


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_summary(result: GateResult) -> str:
    """The whole summary, ending with a newline."""
    ev = result.evidence
    icon = "✅" if result.passed else ("❔" if result.outcome == "inconclusive" else "❌")
    lines = [f"## {icon} ablate gate: {result.headline}", ""]
    what = (
        "cell − control, oriented so + means the stripped layer helps"
        if ev.kind == "run"
        else "arm − baseline, + means better"
    )
    lines.append(
        f"Source: `{ev.source}` ({'run report' if ev.kind == 'run' else 'compare'}); primary outcome "
        f"**{ev.primary}**; effect = {what}. {ev.items} items, {ev.excluded} excluded."
    )
    lines.append("")
    if result.reasons:
        lines += ["**Why it failed**", ""] + [f"- {_cell(r)}" for r in result.reasons] + [""]
    if result.inconclusive:
        lines += ["**What this run cannot see**", ""] + [f"- {_cell(r)}" for r in result.inconclusive] + [""]
    lines += _table(ev)
    if result.checks:
        lines += ["", "**Rules**", ""]
        lines += [f"- {'✅' if c.passed else '❌'} `{c.rule}` — {_cell(c.detail)}" for c in result.checks]
    if result.notes:
        lines += ["", "**Notes**", ""] + [f"- {_cell(n)}" for n in result.notes]
    plot = forest_text(ev)
    if plot:
        lines += ["", f"**Forest plot** ({ev.primary}, 95% intervals; `|` is no effect)", "", "```text"]
        lines += [*plot, "```"]
    if ev.caveats:
        lines += ["", "<details><summary>Caveats</summary>", ""]
        lines += [f"- **{cid}**: {_cell(text)}" for cid, text in ev.caveats] + ["", "</details>"]
    return "\n".join(lines) + "\n"


def _table(ev: Evidence) -> list[str]:
    head = "cell | stripped" if ev.kind == "run" else "arm | source"
    out = [
        f"| {head} | effect | 95% interval | adjusted p | real | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in ev.findings:
        p = "—" if f.p_adjusted is None else f"{f.p_adjusted:.3g}"
        interval = (
            f"[{fmt_effect(ev, f.ci_low)}, {fmt_effect(ev, f.ci_high)}]" if f.ci_low is not None else "—"
        )
        word = verdict_word(ev, f)
        if f.report_verdict and f.report_verdict != word:
            word += f" (report, all metrics: {f.report_verdict})"
        out.append(
            f"| {f.subject} | {_cell(f.label)} | {fmt_effect(ev, f.effect)} | {interval} | {p} | "
            f"{'**yes**' if f.real else 'no'} | {word} |"
        )
    return out


def forest_text(ev: Evidence, width: int = PLOT_WIDTH) -> list[str]:
    """One row per tested subject: interval ``├──┤``, estimate ``●``, zero ``|`` (no interval: said, never a point)."""
    rows = [f for f in ev.findings if not f.no_op]
    if not rows:
        return []
    xs = [0.0] + [x for f in rows for x in (f.ci_low, f.ci_high, f.effect) if x is not None]
    lo, hi = min(xs), max(xs)
    span = (hi - lo) or 1.0
    lo, hi = lo - 0.05 * span, hi + 0.05 * span

    def col(x: float) -> int:
        return round((x - lo) / (hi - lo) * (width - 1))

    name_w = max(len(f.subject) for f in rows)
    out = [f"{f.subject:<{name_w}}  {_row(f, col, width)}  {_numbers(ev, f)}" for f in rows]
    axis = [" "] * width
    axis[col(0.0)] = "0"
    left, right = fmt_effect(ev, lo), fmt_effect(ev, hi)
    out.append(f"{'':<{name_w}}  {''.join(axis)}")
    out.append(f"{'':<{name_w}}  {left}{' ' * max(1, width - len(left) - len(right))}{right}")
    return out


def _row(f: Finding, col: Callable[[float], int], width: int) -> str:
    line = [" "] * width
    line[col(0.0)] = "|"
    if f.ci_low is None or f.ci_high is None or f.effect is None:
        text = "(interval not computable)"
        return text + " " * max(0, width - len(text))
    a, b = col(f.ci_low), col(f.ci_high)
    for i in range(a, b + 1):
        line[i] = "─"
    line[a], line[b] = "├", "┤"
    line[col(f.effect)] = "●"
    return "".join(line)


def _numbers(ev: Evidence, f: Finding) -> str:
    return "n/a" if f.effect is None else fmt_estimate(ev, f) + (" real" if f.real else "")


def append_summary(path: Path, result: GateResult) -> None:
    """Append the Markdown summary to ``path`` ($GITHUB_STEP_SUMMARY collects the output of every step)."""
    if path.is_dir():
        raise UsageError(f"--summary {path}: is a folder", hint="pass a file path")
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(render_summary(result))
    except OSError as exc:
        raise UsageError(f"--summary {path}: cannot write ({exc.strerror})") from None

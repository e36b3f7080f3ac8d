"""``compare.md``, ``compare.html`` and the terminal summary of a :class:`CompareReport`, built from the report's
blocks (:mod:`ablate.report.sections`) and rendered by the report's renderers."""

from __future__ import annotations

from ablate.compare.model import CompareReport, ContrastRow
from ablate.report.anytime import DESCRIPTIVE
from ablate.report.blocks import Block, Bullets, Document, Heading, Para, RowStyle, Table


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _pts(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f}"


def _p(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def _delta(metric: str, x: float | None) -> str:
    return "–" if x is None else _pts(x) + " pts" if metric == "pitfall_free" else f"{x:+.2f}"


def _style(real: bool) -> RowStyle:
    return "real" if real else "draw"


def warnings(report: CompareReport) -> list[str]:
    """In-place edits of an arm's file and failed byte checks: shown first everywhere."""
    out = [
        f"WARNING: {ch.arm} ({ch.source}) changed in place {ch.when}"
        + (f" (earlier run {ch.earlier_compare_id})" if ch.earlier_compare_id else "")
        + ": results under this name are not comparable across those runs"
        for ch in report.fingerprint_changes
    ]
    check = report.execution.get("request_check")
    if check is not None and not check.get("verified"):
        out.append("WARNING: the requests did not differ only in the system prompt (see request_check)")
    cells = report.execution.get("cell_check")
    if cells is not None and not cells.get("verified"):
        bad = ", ".join(n for n, r in cells["arms"].items() if not r["ok"])
        out.append(f"WARNING: the built cells of {bad} did not hold the arm's bytes (see cell_check)")
    return out


def summary_lines(report: CompareReport) -> list[str]:
    """The lines a terminal shows: warnings first, then the verdicts and the decomposition."""
    out = warnings(report)
    out += [v.line for v in report.verdicts]
    out += [f"on {m.model}: {v.line}" for m in report.models for v in m.verdicts]
    out += [r["sentence"].replace("**", "") for r in report.model_interactions]
    if report.decomposition:
        if report.roles is not None:
            out.append(report.roles.line())
        for part in ("position", "repetition", "total"):
            e = report.decomposition[part]
            out.append(
                f"{part}: {_delta('pitfall_free', e.delta)} [{_pts(e.ci_low)}, {_pts(e.ci_high)}] "
                f"({'real' if e.real else 'draw'})"
            )
    seq = report.sequential
    if seq is None:
        out.append(f"tier {report.tier} ({report.repeats} repeats); {report.looks.statement}")
    else:
        last = seq.looks[-1] if seq.looks else None
        out.append(
            f"adaptive: stopped ({seq.stopped or 'not yet'}) after {len(seq.looks)} of at most {seq.max_repeats} "
            f"rounds, {last.sessions if last else 0} sessions; {report.looks.statement}"
        )
    return out


def _verdict_blocks(report: CompareReport) -> list[Block]:
    rows = [
        [v.arm, c.name, "pass" if c.passed else "FAIL", c.detail] for v in report.verdicts for c in v.checks
    ]
    checks = Table(["arm", "check", "", "detail"], rows, id="verdict-checks")
    rule = (
        "A version counts as better only if its pooled pitfall-free gain over the baseline is real after Holm "
        "correction, no task's pass rate and no pooled turn count regressed significantly, and the holdout "
        "tasks show a gain too."
        if report.sequential is None
        else "Sequential design: a version counts as better only if the anytime-valid analysis decided its pooled "
        "pitfall-free gain over the baseline real (Holm-adjusted anytime p ≤ α); the other figures below are "
        "fixed-n description and decide nothing."
    )
    return [Heading("Verdict"), Bullets([f"**{v.line}**" for v in report.verdicts]), checks, Para(rule)]


def _model_blocks(report: CompareReport) -> list[Block]:
    """``--models``: each model's verdicts, then the model × arm interactions (report.md's sentences)."""
    if not report.models:
        return []
    out: list[Block] = [Heading("Models: the verdict on each")]
    out.append(
        Para(f"The verdict above, and every table below, is on {report.models[0].model}, the reference.")
    )
    for m in report.models:
        out += [Heading(f"On {m.model}", level=3), Bullets([f"**{v.line}**" for v in m.verdicts])]
    return [
        *out,
        Heading("Does the model change the answer?"),
        *(Para(r["sentence"]) for r in report.model_interactions),
    ]


def _arm_blocks(report: CompareReport) -> list[Block]:
    arms = Table(
        ["arm", "given as", "op", "block", "sha256", "bytes"],
        [[a.name, a.spec, a.op, a.block or "", a.fingerprint[:16], str(a.bytes)] for a in report.arms],
        id="arms",
    )
    rates = Table(
        ["task", "arm", "n", "rate", "95% CI", "turns"],
        [
            [
                r.task or "(pooled)",
                r.arm,
                str(r.n),
                _pct(r.rate),
                f"{_pct(r.ci_low)}–{_pct(r.ci_high)}",
                "–" if r.turns_mean is None else f"{r.turns_mean:.2f}",
            ]
            for r in report.arm_rates
        ],
        id="rates",
    )
    return [Heading("Arms"), arms, Heading("Rates (pitfall-free, Wilson 95%) and turns"), rates]


def _decomposition_blocks(report: CompareReport) -> list[Block]:
    if not report.decomposition:
        return []
    names = {
        "position": "position (moved − original)",
        "repetition": "repetition (duplicated − moved)",
        "total": "what ships (duplicated − original)",
    }
    parts = list(report.decomposition.items())
    descriptive = "" if report.sequential is None else " — fixed-n, descriptive in a sequential design"
    out: list[Block] = [Heading("Decomposition (pitfall-free rate)" + descriptive)]
    if report.roles is not None:
        out.append(Para(report.roles.line()))
    out.append(
        Table(
            ["effect", "Δ", "95% CI (pts)", "Holm p", ""],
            [
                [
                    names.get(k, k),
                    _delta("pitfall_free", e.delta),
                    f"{_pts(e.ci_low)} … {_pts(e.ci_high)}",
                    _p(e.p_adjusted),
                    "real" if e.real else "draw",
                ]
                for k, e in parts
            ],
            id="decomposition",
            row_styles=[_style(e.real) for _, e in parts],
        )
    )
    return out


def _contrast_row(c: ContrastRow) -> list[str]:
    return [
        f"{c.b} − {c.a}",
        c.metric,
        c.task or "(pooled)",
        str(c.n),
        _delta(c.metric, c.delta),
        f"{_delta(c.metric, c.ci_low)} … {_delta(c.metric, c.ci_high)}",
        f"{c.improved}/{c.regressed}",
        _p(c.p),
        _p(c.p_adjusted),
        "real" if c.real else "descriptive" if c.method.endswith(DESCRIPTIVE) else "draw",
    ]


def _contrast_blocks(report: CompareReport) -> list[Block]:
    regressions = [
        f"{c.task}: {c.b} vs {c.a} {_delta('pitfall_free', c.delta)} ({c.regressed} blocks regressed, "
        f"{c.improved} improved; "
        + (
            "fixed-n, descriptive)"
            if report.sequential
            else f"{'significant' if c.real else 'not significant'})"
        )
        for c in report.regressions
    ]
    fixed = (
        "Δ is the later arm minus the earlier one. Intervals are unadjusted 95% (Newcombe's paired interval "
        "for rates, a t interval on the per-block differences for turns); `real` uses the Holm-adjusted p, so an "
        "interval that excludes 0 can still be a draw. improved/regressed count the discordant blocks."
    )
    sequential = (
        "Δ is the later arm minus the earlier one; improved/regressed count the discordant blocks. Sequential "
        "design: each arm's pooled pitfall-free row against the baseline shows the anytime-valid p, its Holm "
        "adjustment and the confidence sequence (the figures that decided it); every other row's p and "
        "interval is fixed-n, assumes a number of blocks fixed in advance, and is description only."
    )
    how = "Holm across all" if report.sequential is None else "anytime-valid for each arm's pooled row"
    return [
        Heading(f"Contrasts (paired on (task, repeat) blocks; {how})"),
        Para(fixed if report.sequential is None else sequential),
        Table(
            ["contrast", "metric", "task", "blocks", "Δ", "95% CI", "improved/regressed", "p", "Holm p", ""],
            [_contrast_row(c) for c in report.contrasts],
            id="contrasts",
            row_styles=[_style(c.real) for c in report.contrasts],
        ),
        Heading("Regressions, task by task"),
        Bullets(regressions or ["none: no task's pass rate went down in any contrast"]),
    ]


def _closing_blocks(report: CompareReport) -> list[Block]:
    what = "a sequential comparison" if report.sequential is not None else f"the {report.tier} tier"
    out: list[Block] = [
        Heading(f"What {what} can and cannot claim"),
        Bullets([f"can: {c}" for c in report.claims.can] + [f"cannot: {c}" for c in report.claims.cannot]),
        Heading("Looks"),
        Bullets([report.looks.statement]),
    ]
    check = report.execution.get("request_check")
    if check is not None:
        said = (
            f"{check['requests']} requests in {check['blocks']} blocks; identical across arms except the "
            f"system prompt: {'verified' if check['verified'] else 'NOT verified'} ({check['method']})."
        )
        out += [Heading("Requests"), Bullets([said])]
    probe = report.execution.get("probe")
    if probe is not None:
        proof = f" The proof: `{probe['file']}`." if probe.get("file") else ""
        out += [Heading("Probe"), Para(str(probe.get("words")) + proof)]
    ex = report.excluded
    excluded = f"{ex.count} item(s) without an answer, excluded from every contrast: {ex.by_status}"
    out += [Heading("Excluded items"), Bullets([excluded] if ex.count else ["none"])]
    if report.notes:
        out += [Heading("Notes"), Bullets(list(report.notes))]
    return out


def compare_document(report: CompareReport, plot: tuple[str, str] | None = None) -> Document:
    """The comparison as report blocks (``plot``: an adaptive comparison's confidence sequences' svg and png)."""
    arms = ", ".join(f"`{a.name}`" for a in report.arms)
    est = report.estimate
    size = (
        f"{report.repeats} repeats, tier **{report.tier}**"
        if report.sequential is None
        else f"at most {report.repeats} rounds, **sequential design** (stopped each arm once decided)"
    )
    blocks: list[Block] = [
        Para(
            f"Arms {arms} (baseline `{report.baseline}`) on {len(report.tasks)} task(s) × {size}, executor "
            f"`{report.executor}`, model `{report.model}`, seed {report.seed}. Estimated {est.sessions} sessions"
            f"{' at most' if report.sequential is not None else ''}, ~{est.calls} calls; spent "
            f"${report.spent_usd:.4f} ({report.spent_basis or 'basis not recorded'})."
        )
    ]
    if warn := warnings(report):
        blocks += [Heading("Warnings"), Bullets(warn)]
    blocks += _verdict_blocks(report) + _model_blocks(report)
    if report.sequential is not None:  # how it stopped: the run report's section on the arms' run folder
        from ablate.report.sequential import section_blocks

        blocks += [Heading("How the comparison stopped"), *section_blocks(report.sequential, plot)[1:]]
    blocks += _arm_blocks(report) + _decomposition_blocks(report)
    blocks += _contrast_blocks(report) + _closing_blocks(report)
    return Document(f"ablate compare — {report.compare_id}", blocks)

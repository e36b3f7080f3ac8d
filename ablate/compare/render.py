"""``compare.md`` (and the terminal summary) from a compare.json document."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from ablate.compare.arms import roles_line


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * float(x):.0f}%"


def _pts(x: Any) -> str:
    return "–" if x is None else f"{100 * float(x):+.1f}"


def _p(x: Any) -> str:
    return "–" if x is None else f"{float(x):.3g}"


def _delta(metric: str, x: Any) -> str:
    if x is None:
        return "–"
    return _pts(x) + " pts" if metric == "pitfall_free" else f"{float(x):+.2f}"


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """The lines a terminal shows: warnings first, then the verdicts and the decomposition."""
    out: list[str] = []
    for ch in doc.get("fingerprint_changes") or []:
        out.append(
            f"WARNING: {ch['arm']} ({ch['source']}) changed in place {ch['when']}"
            + (f" (earlier run {ch['earlier_compare_id']})" if ch.get("earlier_compare_id") else "")
            + ": results under this name are not comparable across those runs"
        )
    check = (doc.get("execution") or {}).get("request_check")
    if check is not None and not check.get("verified"):
        out.append("WARNING: requests differ across arms beyond the system prompt (see request_check)")
    cells = (doc.get("execution") or {}).get("cell_check")
    if cells is not None and not cells.get("verified"):
        bad = ", ".join(n for n, r in cells["arms"].items() if not r["ok"])
        out.append(f"WARNING: the built cells of {bad} did not hold the arm's bytes (see cell_check)")
    for v in doc.get("verdicts") or []:
        out.append(v["line"])
    dec = doc.get("decomposition")
    if dec:
        if doc.get("roles"):
            out.append(roles_line(doc["roles"]))
        for part in ("position", "repetition", "total"):
            e = dec[part]
            real = "real" if e["real"] else "draw"
            out.append(
                f"{part}: {_delta('pitfall_free', e['delta'])} [{_pts(e['ci_low'])}, {_pts(e['ci_high'])}] ({real})"
            )
    out.append(f"tier {doc['tier']} ({doc['repeats']} repeats); {doc['looks']['statement']}")
    return out


def render_markdown(doc: dict[str, Any]) -> str:
    lines: list[str] = [f"# ablate compare — {doc['compare_id']}", ""]
    arms = ", ".join(f"`{a['name']}`" for a in doc["arms"])
    lines += [
        f"Arms {arms} (baseline `{doc['baseline']}`) on {len(doc['tasks'])} task(s) × {doc['repeats']} repeats, "
        f"executor `{doc['executor']}`, model `{doc['model']}`, tier **{doc['tier']}**, seed {doc['seed']}. "
        f"Estimated {doc['estimate']['sessions']} sessions, ~{doc['estimate']['calls']} calls; "
        f"spent ${doc['spent_usd']:.4f} ({doc.get('spent_basis') or 'basis not recorded'}).",
        "",
    ]
    warn = [s for s in summary_lines(doc) if s.startswith("WARNING")]
    if warn:
        lines += ["## Warnings", "", *[f"- {w}" for w in warn], ""]
    lines += ["## Verdict", ""]
    for v in doc["verdicts"]:
        lines.append(f"- **{v['line']}**")
        for c in v["checks"]:
            lines.append(f"  - {'pass' if c['passed'] else 'FAIL'} — {c['name']}: {c['detail']}")
    lines += [
        "",
        "A version counts as better only if its pooled pitfall-free gain over the baseline is real after Holm "
        "correction, no task's pass rate and no pooled turn count regressed significantly, and the holdout "
        "tasks show a gain too.",
        "",
        "## Arms",
        "",
    ]
    lines.append(
        tabulate(
            [
                [a["name"], a["spec"], a["op"], a["block"] or "", a["fingerprint"][:16], a["bytes"]]
                for a in doc["arms"]
            ],
            headers=["arm", "given as", "op", "block", "sha256", "bytes"],
            tablefmt="github",
        )
    )
    lines += ["", "## Rates (pitfall-free, Wilson 95%) and turns", ""]
    rows = []
    for r in doc["arm_rates"]:
        rows.append(
            [
                r["task"] or "(pooled)",
                r["arm"],
                r["n"],
                _pct(r["rate"]),
                f"{_pct(r['ci_low'])}–{_pct(r['ci_high'])}",
                "–" if r["turns_mean"] is None else f"{r['turns_mean']:.2f}",
            ]
        )
    lines.append(tabulate(rows, headers=["task", "arm", "n", "rate", "95% CI", "turns"], tablefmt="github"))
    dec = doc.get("decomposition")
    if dec:
        lines += ["", "## Decomposition (pitfall-free rate)", ""]
        if doc.get("roles"):
            lines += [roles_line(doc["roles"]), ""]
        names = {
            "position": "position (moved − original)",
            "repetition": "repetition (duplicated − moved)",
            "total": "what ships (duplicated − original)",
        }
        lines.append(
            tabulate(
                [
                    [
                        names[k],
                        _delta("pitfall_free", e["delta"]),
                        f"{_pts(e['ci_low'])} … {_pts(e['ci_high'])}",
                        _p(e["p_adjusted"]),
                        "real" if e["real"] else "draw",
                    ]
                    for k, e in dec.items()
                ],
                headers=["effect", "Δ", "95% CI (pts)", "Holm p", ""],
                tablefmt="github",
            )
        )
    lines += [
        "",
        "## Contrasts (paired on (task, repeat) blocks; Holm across all)",
        "",
        "Δ is the later arm minus the earlier one. Intervals are unadjusted 95% (Newcombe's paired interval "
        "for rates, a task-stratified bootstrap for turns); `real` uses the Holm-adjusted p, so an interval "
        "that excludes 0 can still be a draw. improved/regressed count the discordant blocks.",
        "",
    ]
    lines.append(
        tabulate(
            [
                [
                    f"{c['b']} − {c['a']}",
                    c["metric"],
                    c["task"] or "(pooled)",
                    c["n"],
                    _delta(c["metric"], c["delta"]),
                    f"{_delta(c['metric'], c['ci_low'])} … {_delta(c['metric'], c['ci_high'])}",
                    f"{c['improved']}/{c['regressed']}",
                    _p(c["p"]),
                    _p(c["p_adjusted"]),
                    "real" if c["real"] else "draw",
                ]
                for c in doc["contrasts"]
            ],
            headers=[
                "contrast",
                "metric",
                "task",
                "blocks",
                "Δ",
                "95% CI",
                "improved/regressed",
                "p",
                "Holm p",
                "",
            ],
            tablefmt="github",
        )
    )
    lines += ["", "## Regressions, task by task", ""]
    if doc["regressions"]:
        for c in doc["regressions"]:
            mark = "significant" if c["real"] else "not significant"
            lines.append(
                f"- {c['task']}: {c['b']} vs {c['a']} {_delta('pitfall_free', c['delta'])} "
                f"({c['regressed']} blocks regressed, {c['improved']} improved; {mark})"
            )
    else:
        lines.append("- none: no task's pass rate went down in any contrast")
    cl = doc["claims"]
    lines += ["", f"## What the {doc['tier']} tier can and cannot claim", ""]
    lines += [f"- can: {c}" for c in cl["can"]]
    lines += [f"- cannot: {c}" for c in cl["cannot"]]
    lines += ["", "## Looks", "", f"- {doc['looks']['statement']}", ""]
    check = (doc.get("execution") or {}).get("request_check")
    if check is not None:
        lines += [
            "## Requests",
            "",
            f"- {check['requests']} requests in {check['blocks']} blocks; identical across arms except the "
            f"system prompt: {'verified' if check['verified'] else 'NOT verified'} ({check['method']}).",
            "",
        ]
    ex = doc["excluded"]
    lines += ["## Excluded items", ""]
    if ex["count"]:
        lines.append(
            f"- {ex['count']} item(s) without an answer, excluded from every contrast: {ex['by_status']}"
        )
    else:
        lines.append("- none")
    if doc.get("notes"):
        lines += ["", "## Notes", "", *[f"- {n}" for n in doc["notes"]]]
    return "\n".join(lines) + "\n"

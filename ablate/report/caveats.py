"""The caveats section: the report's mandatory caveats, each filled with this run's facts, never boilerplate.

One builder per caveat (:data:`CAVEATS`); a builder returns None when its caveat does not apply to the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from ablate.core.errors import RunFolderError
from ablate.folder.layout import TMP_EMPTY, UNSEALED, IsolationInfo, RunManifest
from ablate.report.blocks import Block, Bullets, Heading
from ablate.report.carried import carried_identical, carried_unlike_probe
from ablate.report.context import Context, Page, Section
from ablate.report.discriminating import inert_caveat
from ablate.report.model import BINARY_METRICS, METRIC_LABELS, Caveat, PowerRow, Report, SequentialReport
from ablate.report.pieces import piece_caveat

#: A caveat builder: the caveat for this run, or None when it does not apply.
CaveatBuilder = Callable[[Report, RunManifest], Caveat | None]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


def _worst(rows: list[PowerRow], metric: str) -> str:
    """The largest detectable Δ over the cells of one metric (or why none is detectable)."""
    mine = [p for p in rows if p.metric == metric]
    known = [p for p in mine if p.detectable is not None]
    if not known:
        note = next((p.detectable_note for p in mine if p.detectable_note), "not computable")
        return f"{_label(metric)}: {note}"
    w = max(known, key=lambda p: p.detectable or 0.0)
    d = w.detectable or 0.0
    size = f"{100 * d:.0f} pts" if metric in BINARY_METRICS else _num(d)
    return f"{_label(metric)} ±{size}"


def sample_size(report: Report, manifest: RunManifest) -> Caveat:
    n = report.n
    fams = {f.name: f for f in report.families}
    prim, sec = fams.get("primary"), fams.get("secondary")
    metrics = list(dict.fromkeys(p.metric for p in report.power))
    det = "; ".join(_worst(report.power, m) for m in metrics)
    return Caveat(
        id="sample-size",
        text=f"n per cell: {n.tasks} tasks × {n.repeats} repeats = {n.tasks * n.repeats} planned paired blocks "
        f"({n.excluded} of {n.items} items excluded). Primary family: {_label(report.primary_metric)} pooled, "
        f"Holm over {prim.m if prim else 0} comparisons at α = {report.alpha}; secondary family: Holm over "
        f"{sec.m if sec else 0} comparisons on its own. The smallest pooled differences every cell detects "
        f"with 80% power at its family's α/m (the largest over cells, from each cell's own paired blocks): {det}.",
    )


def one_repeat(report: Report, manifest: RunManifest) -> Caveat | None:
    if report.n.repeats >= 2:
        return None
    need = "; ".join(
        dict.fromkeys(
            f"{_label(p.metric)}: {p.repeats_needed} repeats"
            + (f" (≈ ${p.cost_usd:.2f} at this run's spend per session)" if p.cost_usd is not None else "")
            for p in report.power
            if p.repeats_needed is not None and p.family == "primary"
        )
    )
    return Caveat(
        id="one-repeat",
        text=f"One repeat per (task, cell): a per-task comparison has one block and can show nothing, and run-to-run "
        f"spread cannot be measured. The pooled comparisons pair the {report.n.tasks} tasks as blocks and are "
        "valid tests, with that little power. Repeats needed at 80% power for the primary metric: "
        f"{need or 'not computable from this run'}.",
    )


def task_selection(report: Report, manifest: RunManifest) -> Caveat:
    tested = [c for c in report.cells if c.cell != report.run.control and not c.no_op]
    expects = {str(t["id"]): list(t.get("expects", [])) for t in report.run.tasks}  # type: ignore[call-overload]
    targeted = sorted({lid for v in expects.values() for lid in v})
    untargeted = sorted({lid for c in tested for lid in c.layers} - set(targeted))
    none = [t for t, v in expects.items() if not v]
    last = (
        f"Tasks that target no layer: {', '.join(none)}."
        if none
        else "Every task targets at least one layer."
    )
    return Caveat(
        id="task-selection",
        text=f"Tasks were chosen, not randomly sampled: {len(expects)} tasks "
        f"({'; '.join(t + ' targets ' + (', '.join(v) or 'nothing') for t, v in expects.items())}). "
        + (f"No task targets {', '.join(untargeted)}: a draw there says little. " if untargeted else "")
        + last,
    )


def known_answer_bias(report: Report, manifest: RunManifest) -> Caveat:
    tasks = report.run.tasks
    named = sum(1 for t in tasks if t.get("expects"))
    return Caveat(
        id="known-answer-bias",
        text=f"The tasks' pitfalls were written by someone who knows the setup ({named} of {len(tasks)} tasks name "
        "the layers they expect to matter): they test what the author already believes the setup does, and "
        "may miss what it does elsewhere.",
    )


def isolation(report: Report, manifest: RunManifest) -> Caveat:
    run = report.run
    leaks = [f"{c.id}: {leak}" for c in manifest.cells for leak in c.leaks]
    flagged = [e for e in report.excluded_items if e.reason.startswith("provenance")]
    parts = [
        f"isolation backend: {run.isolation}",
        f"{len(leaks)} leak(s) the builder could not remove"
        + (f" ({'; '.join(leaks[:5])})" if leaks else ""),
        f"{len(flagged)} session(s) flagged by provenance and excluded",
    ]
    if manifest.isolation is not None and manifest.isolation.network == "sealed":
        parts.append(
            "sessions were sealed (a network namespace of their own, no unix sockets, a private /dev and IPC): "
            "a tool that needs a host service (ssh-agent, gpg-agent, docker, a local database) failed in "
            "every cell alike, where it would work in your own setup"
        )
    parts += secrets_words(manifest.isolation)
    if report.no_op_cells:
        parts.append(
            "no-op cells (identical to the control, not tested): "
            + ", ".join(c.cell for c in report.no_op_cells)
        )
    if run.binary:
        parts.append(
            "binary run: the setup-off cell keeps the repository's ordinary files (README, code, repo CLAUDE.md "
            "unless stripped), so 'setup off' is not 'no context'"
        )
    if said := backend_caveat(manifest):
        parts.append(said)
    parts += sorted({n for c in manifest.cells for n in c.notes if n.startswith(TMP_EMPTY)})
    return Caveat(id="isolation", text="; ".join(parts) + ".")


def secrets_words(info: IsolationInfo | None) -> list[str]:
    """What sessions could not read (docs/ARCHITECTURE.md#secrets), and what ``--expose`` left readable."""
    if info is None or info.hidden is None:
        return []
    unfenced = info.network == UNSEALED
    out = [
        f"credential files hidden from every session (read as empty): {', '.join(info.hidden)}"
        if info.hidden
        else f"no credential file was hidden ({'no fence ran' if unfenced else 'none of them exists here'})"
    ]
    if info.exposed:
        out.append(f"left readable by --expose: {', '.join(info.exposed)}")
    auth = info.auth or {}
    if not unfenced and auth.get("method") in ("api-key", "auth-token"):
        out.append(
            f"the sessions held a placeholder for {auth['source']}, which the forwarder swapped for the key"
        )
    return out


def backend_caveat(manifest: RunManifest) -> str:
    """What the run's backend cannot protect (:mod:`ablate.isolate.registry`), the network too when unsealed;
    "" for a backend that claims nothing (copy-on-write) or that this ablate does not know."""
    from ablate.isolate.registry import recorded_kind

    kind = recorded_kind(manifest.isolation)
    if kind is None or not kind.caveat:
        return ""
    sealed = manifest.isolation is not None and manifest.isolation.network == "sealed"
    leaks = [*kind.unremoved, *([] if sealed else ["the network"])]
    if not leaks:
        return kind.caveat
    listed = leaks[0] if len(leaks) == 1 else ", ".join(leaks[:-1]) + " and " + leaks[-1]
    return f"{kind.caveat}, and leaks such as {listed} {'is' if len(leaks) == 1 else 'are'} not removed"


def unsealed(report: Report, manifest: RunManifest) -> Caveat | None:
    """The run was not sealed (``--unsealed``): the first caveat, and what ``ablate gate`` refuses to pass."""
    if manifest.isolation is None or manifest.isolation.network != UNSEALED:
        return None
    return Caveat(
        id=UNSEALED,
        text="UNSEALED: sessions ran with --unsealed where they could not be sealed "
        f"({manifest.isolation.reason}): they shared the host's network, its sockets (tmux, ssh-agent, Docker, "
        "D-Bus), /dev, /dev/shm and SysV IPC, through which a session can act outside every sandbox; nothing "
        "crossed a forwarder, so there is no wire record. `ablate gate` passes this run only with "
        "--allow-unsealed.",
    )


def network(report: Report, manifest: RunManifest) -> Caveat | None:
    """How far sessions could reach: their own network namespace (the default), or the host's."""
    if manifest.isolation is None or manifest.isolation.network != "host":
        return None
    return Caveat(
        id="network",
        text="Sessions ran with --allow-network: they had the host's network (services on loopback ports, "
        "the internet), so a session could reach host services and tasks could differ by what was "
        "reachable when they ran; unix sockets (file-system and abstract), /dev and IPC stayed private.",
    )


def weak_checks(report: Report, manifest: RunManifest) -> Caveat | None:
    """Tasks run with --allow-weak-checks: their checks cannot tell doing nothing from doing the task."""
    if not manifest.weak_checks:
        return None
    return Caveat(
        id="weak-checks",
        text=f"Run with --allow-weak-checks: the checks of {', '.join(manifest.weak_checks)} pass on the untouched "
        "checkout or fail on their reference (probe.json's graders), so their checks_passed cannot tell doing "
        "nothing from doing the task; read those tasks' pitfalls and judge verdicts instead.",
    )


def wire_differs(report: Report, manifest: RunManifest) -> Caveat | None:
    """Sessions whose transcript disagrees with what crossed the wire."""
    differs = manifest.isolation.wire_differs if manifest.isolation else None
    if not differs:
        return None
    shown = "; ".join(f"{item} ({', '.join(what)})" for item, what in sorted(differs.items())[:5])
    return Caveat(
        id="wire-differs",
        text=f"{len(differs)} session(s) whose transcript disagrees with what ablate's forwarder saw cross the "
        f"wire: {shown}. A session can rewrite its own transcript or its CLI's answer while it runs, so these "
        "are left out of the statistics (listed as excluded: provenance); their token and cost figures are the "
        "wire's (wire/<item>.jsonl).",
    )


def fence_denied(report: Report, manifest: RunManifest) -> Caveat | None:
    """``links`` under a write fence: which sessions had a write refused, and why that matters."""
    denied = manifest.isolation.fence_denied if manifest.isolation else None
    if not denied:
        return None
    hit = sorted({item for items in denied.values() for item in items})
    per_path = "; ".join(
        f"{path}: {', '.join(items[:5])}" + (f" and {len(items) - 5} more" if len(items) > 5 else "")
        for path, items in sorted(denied.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    )
    return Caveat(
        id="fence-denied",
        text=f"The links write fence refused writes outside the cell in {len(hit)} of {report.n.items} "
        f"sessions ({per_path}). Nothing reached your files, but a refused write changes what the session "
        "does next (its tool fails with 'Read-only file system' and the model reacts to the error), where "
        "an overlay (the namespace backend) would let the write land in the session's own view and "
        "discard it afterwards: those sessions may not behave as they would on your machine.",
    )


def turns_proxy(report: Report, manifest: RunManifest) -> Caveat:
    graded = any(c.metric in ("checks_passed", "judge_pass") for c in report.comparisons)
    tail = (
        " and the graded outcomes."
        if graded
        else "; this run has no execution checks or judge verdicts (`grades/`)."
    )
    return Caveat(
        id="turns-proxy",
        text="Turn and tool-call counts are weak proxies for quality (a layer can add turns by making the model "
        "check its work); read them with the pitfall-free rate" + tail,
    )


def model(report: Report, manifest: RunManifest) -> Caveat:
    run = report.run
    if parts := getattr(report, "models", None):  # --models: each session pinned to its item's
        bad = ", ".join(p["model"] for p in parts if not p["model_verified"])
        said = (
            f"NOT verified on {bad} (see 'Models')"
            if bad
            else "verified: every scored transcript names its own and no other"
        )
        text = f"Each session pinned to its item's model ({', '.join(manifest.models)}); {said}."
    elif run.model_verified:
        text = f"Model pinned to {run.model}; verified: every scored transcript names it and no other."
    else:
        seen = ", ".join(f"{m} ×{k}" for m, k in sorted(run.models_seen.items())) or "none"
        text = f"Model pinned to {run.model}; NOT verified: transcripts name {seen}; "
        text += f"{run.sessions_without_model} name no model."
    return Caveat(id="model", text=text)


def variance(report: Report, manifest: RunManifest) -> Caveat:
    spreads = [
        (c.cell, s)
        for c in report.cells
        if "pitfall_free" in c.metrics and (s := c.metrics["pitfall_free"].spread) is not None
    ]
    if not spreads:
        return Caveat(
            id="variance",
            text="Run-to-run variance is unknown: one repeat gives no spread; any single difference may be noise.",
        )
    worst = max(spreads, key=lambda x: x[1])
    return Caveat(
        id="variance",
        text=f"Run-to-run spread (sd of per-repeat pitfall-free rates) ranges {_pct(min(s for _, s in spreads))}"
        f"–{_pct(worst[1])} (largest in {worst[0]}): a single run of one cell can differ from another run of "
        "the same cell by that much.",
    )


def prompt_cache(report: Report, manifest: RunManifest) -> Caveat:
    run = report.run
    shares = [(c.cell, c.cache_read_share) for c in report.cells if c.cache_read_share is not None]
    cache = (
        "Prompt cache: cache-read share of input tokens per cell "
        + ", ".join(f"{c} {_pct(s)}" for c, s in shares)
        if shares
        else "Prompt cache: no token counts recorded"
    )
    spent = (
        f" (${run.spend_usd:.4f}) and at list price with cache reads priced as fresh input (${run.spend_list_usd:.4f})"
        if run.spend_list_usd is not None
        else f" (${run.spend_usd:.4f}); the list price is unknown for this model"
    )
    return Caveat(
        id="prompt-cache",
        text=cache
        + f". Order was randomised within each (task, repeat) block (seed {run.seed}), so cache warmth does not "
        "line up with a cell. Cost is shown as spent" + spent + ".",
    )


def version(report: Report, manifest: RunManifest) -> Caveat:
    run = report.run
    imports = [n for c in report.cells for n in c.notes if "imported by" in n]
    return Caveat(
        id="version",
        text=f"claude {run.claude_version} (sha256 {run.claude_sha256[:12]}…, "
        + ("the pinned version" if run.claude_pinned else "NOT the pinned version")
        + f"), isolation {run.isolation}. Results hold for this CLI version and model only."
        + (f" Nested layers: {'; '.join(imports)}." if imports else ""),
    )


def failed_items(report: Report, manifest: RunManifest) -> Caveat | None:
    failed = Counter(e.cell for e in report.excluded_items if e.reason.startswith(("failed", "not run")))
    if not failed:
        return None
    return Caveat(
        id="failed-items",
        text="Items that failed or never ran are excluded from every comparison: "
        + ", ".join(f"{c} {k}" for c, k in sorted(failed.items()))
        + ". A cell that fails more often may look better on the sessions that survived.",
    )


def overfitting(report: Report, manifest: RunManifest) -> Caveat | None:
    warned = [f for f in report.holdout if f.kind == "overfitting"]
    return Caveat(id="overfitting", text="; ".join(f.message for f in warned) + ".") if warned else None


def sign_flip_estimand(report: Report, manifest: RunManifest) -> Caveat | None:
    """What the counts' and costs' test tests: exchangeability within a block, not equal means."""
    real = [c for c in report.comparisons if c.real and c.metric not in BINARY_METRICS]
    tested = [c for c in report.comparisons if c.metric not in BINARY_METRICS and c.p is not None]
    if not tested:
        return None
    which = ", ".join(dict.fromkeys(f"{c.cell} {c.metric}" for c in real if c.task is None)) or "none pooled"
    return Caveat(
        id="sign-flip-estimand",
        text="Turns, tool calls and cost are tested with the paired sign-flip test, whose null is that the cell "
        "and the control are exchangeable within a block (the per-block differences symmetric about 0), "
        "not only that their means are equal: a 'real' there says the cell changed the metric's "
        "distribution, while the Δ and its interval describe the mean difference, which can be near 0 when "
        f"only the shape changed (real here: {which}).",
    )


def noise_floor(report: Report, manifest: RunManifest) -> Caveat | None:
    """``--aa``: the measured noise floor, and "untrustworthy" when the two controls differ for real."""
    if not report.noise_floor:
        return None
    real = [r for r in report.noise_floor if r.real]
    figures = "; ".join(
        f"{_label(r.metric)}: "
        + (f"flips in {100 * r.flip_rate:.0f}% of {r.blocks} blocks" if r.flip_rate is not None else "")
        + (", " if r.flip_rate is not None and r.spread is not None else "")
        + (f"spread {_num(r.spread)}" if r.spread is not None else "")
        for r in report.noise_floor
    )
    if real:
        return Caveat(
            id="aa-untrustworthy",
            text="UNTRUSTWORTHY: the two independently built controls differ for real on "
            + ", ".join(
                f"{_label(r.metric)} (Δ {_num(r.delta)}, adjusted p {r.p_adjusted:.3g})" for r in real
            )
            + " — the same setup measured twice gave a 'real' difference, so no difference of this run can "
            f"be told from its noise. The noise floor: {figures}.",
        )
    return Caveat(
        id="aa-noise-floor",
        text=f"Measured noise floor (--aa: a second control built and run on its own, same setup): {figures}; "
        "no A/A difference is real. Differences between cells of this size are what an identical setup "
        "gives.",
    )


#: Every caveat builder, in report order: an unsealed run says so first.
CAVEATS: list[CaveatBuilder] = [
    unsealed,
    noise_floor,
    sample_size,
    one_repeat,
    task_selection,
    inert_caveat,
    known_answer_bias,
    isolation,
    network,
    weak_checks,
    wire_differs,
    carried_identical,
    carried_unlike_probe,
    fence_denied,
    turns_proxy,
    sign_flip_estimand,
    model,
    variance,
    prompt_cache,
    version,
    failed_items,
    overfitting,
    piece_caveat,
]


def sequential_caveat(seq: SequentialReport) -> Caveat:
    """The caveat of a sequential report: which figures are tests and which are description."""
    return Caveat(id="sequential", text=" ".join(seq.caveats))


def build(ctx: Context, report: Report) -> dict[str, Any]:
    """Every caveat that applies, from the sections before this one (a report without caveats is refused)."""
    caveats = [c for build in CAVEATS if (c := build(report, ctx.manifest)) is not None]
    if report.sequential is not None:
        caveats.append(sequential_caveat(report.sequential))
    if not caveats:
        raise RunFolderError(
            f"{ctx.run_dir}: no caveats could be computed; a report without caveats is not produced"
        )
    return {"caveats": caveats}


def render(report: Report, page: Page) -> list[Block]:
    return [Heading("Caveats"), Bullets([f"**{c.id}**: {c.text}" for c in report.caveats])]


SECTION = Section("caveats", build, render)

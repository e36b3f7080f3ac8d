"""What the gate reads from a report: the ONE module that knows the verdict fields of ``report.json`` and
``compare.json`` (adapt it when they change). The rest of :mod:`ablate.ci` works on :class:`Evidence`: per
subject (a cell, an arm) its oriented effect (+ = good), whether it is real, and what makes the run untrustworthy."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from ablate.core.errors import NotFound, SpecError, UsageError
from ablate.core.specs import problems_from_validation, require_schema
from ablate.folder.layout import UNSEALED, RunFolder
from ablate.folder.metrics import DEFAULT_PRIMARY, HIGHER_IS_BETTER

if TYPE_CHECKING:
    from ablate.compare.model import ArmInfo, CompareReport, VerdictRow
    from ablate.report.model import Report

M = TypeVar("M", bound=BaseModel)

#: Metrics where a larger value is better (for the others, turns, tool calls, cost, smaller is better) and
#: the primary outcome a run is decided on: both from the metric registry.
RATE_METRICS = HIGHER_IS_BETTER

Kind = Literal["run", "compare"]


@dataclass(frozen=True)
class Finding:
    """One subject's pooled effect on the primary outcome."""

    subject: str
    """A cell id (``C1``) or an arm name (``new``)."""
    against: str
    """The control cell or the baseline arm."""
    label: str
    """What the subject is, in words (``no user-claude-md``, ``CLAUDE.v2.md``)."""
    effect: float | None = None
    """Oriented effect: + = good (the stripped layer helps; the arm beats the baseline)."""
    ci_low: float | None = None
    ci_high: float | None = None
    p_adjusted: float | None = None
    real: bool = False
    no_op: bool = False
    claimed_better: bool | None = None
    """compare.json's own verdict (gain real, nothing regressed, holdout agrees); None for a run."""
    report_verdict: str = ""
    """The report's label for the subject over all its metrics (helps, hurts, mixed, draw), shown as is."""
    why_not: list[str] = field(default_factory=list)
    """compare.json: the checks its verdict failed."""
    detectable: float | None = None
    """Smallest change of the guarded rate (:attr:`Evidence.detect_metric`) the test that decides this subject
    detects with 80% power in its weaker direction (None: not computable, the run cannot state it)."""
    no_effect_beyond: float | None = None
    """A sequential run decided "no effect of interest": every effect of at least this size was rejected."""

    @property
    def good(self) -> bool:
        return self.real and self.effect is not None and self.effect > 0

    @property
    def bad(self) -> bool:
        return self.real and self.effect is not None and self.effect < 0


@dataclass(frozen=True)
class Scale:
    """What a run that could detect more is computed from: the run's own figures."""

    base_rate: float
    """The control's (baseline's) rate of the guarded outcome: with it the exact test's power."""
    alpha_each: float
    """The level the deciding test runs at (Holm's first step)."""
    tasks: int
    sessions_per_repeat: int
    """Sessions one more repeat runs (tasks × cells, or × arms)."""
    repeats: int
    cost_per_session: float | None
    """The run's spend over the sessions it ran (None: none ran)."""


@dataclass(frozen=True)
class Evidence:
    """What a report says, as the gate needs it."""

    source: Path
    kind: Kind
    primary: str
    """The primary metric (``pitfall_free`` unless the report names another)."""
    findings: list[Finding]
    detectable: float | None
    """Smallest |effect| on the primary metric the run detects with 80% power (None: not computable)."""
    detectable_note: str
    items: int
    excluded: int
    untrustworthy: list[str]
    """Why the run cannot be trusted (probe not faithful, leaks, model not verified); empty when fine."""
    caveats: list[tuple[str, str]]
    secondary: list[str]
    """Real harmful effects outside the primary family (other metrics, single tasks): reported, not gated."""
    also_regressed: list[str] = field(default_factory=list)
    """Real pooled regressions of the run's own primary outcome under another ``--primary``: gated too."""
    detect_metric: str = DEFAULT_PRIMARY
    """The rate the gate's detection threshold is about (the primary when it is a rate, else pitfall-free)."""
    detect_test: str = ""
    """The test that decides, in words (what the power figures are of)."""
    notes: list[str] = field(default_factory=list)
    """What the gate did to the evidence (a stale report.json rebuilt, a report it could not verify)."""
    unsealed: bool = False
    """The sessions were not sealed (``--unsealed``; the ``unsealed`` caveat, or ``execution.network``)."""
    scale: Scale | None = None
    """The run's own figures a bigger run is computed from (None: the report has no control rate)."""

    @property
    def is_rate(self) -> bool:
        return self.primary in RATE_METRICS

    def subject(self, name: str) -> Finding | None:
        return next((f for f in self.findings if f.subject.lower() == name.lower()), None)


def load_evidence(path: Path, model: str | None = None) -> Evidence:
    """The evidence of a run folder (its ``report.json``, built when missing), a ``report.json``, a
    ``compare.json`` or a compare folder; ``model``: one model's part of a report (:func:`for_model`)."""
    if not path.exists():
        raise NotFound(f"{path}: no such run folder or report", hint="pass a run folder or a compare.json")
    if path.is_dir():
        if (path / "compare.json").is_file():
            return _from_compare(path / "compare.json", _read_json(path / "compare.json"), model)
        if RunFolder(path).report_json.is_file():
            return _from_report_file(RunFolder(path).report_json, path, model)
        if RunFolder(path).has_manifest:
            from ablate.report.sections import build_report

            return from_report(build_report(path), path, run_dir=path, model=model)
        raise NotFound(
            f"{path}: neither a run folder (manifest.json) nor a compare folder (compare.json)",
            hint="pass the folder `ablate run` or `ablate merge` wrote, or a compare.json",
        )
    data = _read_json(path)
    if "contrasts" in data and "arms" in data:
        return _from_compare(path, data, model)
    if "comparisons" in data:
        return _from_report_file(path, path.parent, model)
    raise SpecError.single(
        path, "", "neither a report.json (no `comparisons`) nor a compare.json (no `contrasts`, `arms`)"
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise SpecError.single(path, "", f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise SpecError.single(path, "", "expected a JSON object")
    return data


def _typed(model: type[M], path: Path, data: dict[str, Any], version: int, what: str, hint: str) -> M:
    """``data`` as ``model``; a newer ``schema_version`` or a bad field: a located :class:`SpecError`."""
    require_schema(data, path, version, what, hint=hint)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problems_from_validation(path, exc), hint=hint) from None


def _pick_model(names: list[str], model: str | None, what: str) -> None:
    """A run of several models is gated one model at a time: a :class:`UsageError` naming them otherwise."""
    if model is None and len(names) > 1:
        raise UsageError(
            f"the {what} holds {len(names)} models ({', '.join(names)}): gate one of them with --model M",
            hint="run `ablate gate --model M` once per model",
        )
    if model is not None and model not in names:
        raise UsageError(f"--model {model}: not a model of this {what}", hint="models: " + ", ".join(names))


def for_model(report: Report, model: str | None) -> Report:
    """``report`` narrowed to ``model``'s part (``ablate gate --model``; :func:`_pick_model` checks it)."""
    if model is None and not getattr(report, "models", None):
        return report  # a run of one model, gated as it is (without loading the report's sections)
    from ablate.report.models import parts, view

    got = parts(report)
    _pick_model([p.model for p in got] or [report.run.model], model, "report")
    return next((view(report, p) for p in got if p.model == model), report)


def _from_report_file(path: Path, run_dir: Path, model: str | None = None) -> Evidence:
    from ablate.report.model import REPORT_SCHEMA_VERSION, Report

    hint = "rebuild it with `ablate report RUN_DIR`"
    report = _typed(Report, path, _read_json(path), REPORT_SCHEMA_VERSION, "report", hint)
    if not RunFolder(run_dir).has_manifest:
        ev = from_report(report, path, run_dir=None, model=model)
        ev.notes.append(
            f"{path} was not verified against its results (no run folder beside it): the gate vouches for "
            "the report as written"
        )
        return ev
    return verified(report, path, run_dir, model)


def verified(report: Report, path: Path, run_dir: Path, model: str | None = None) -> Evidence:
    """The evidence of ``report`` when its digest is the run folder's; else of a report rebuilt from the folder
    (with the report's α, control and primary), said in a note. The gate never trusts a stale report.json."""
    from ablate.report.digest import inputs_digest

    if report.inputs_sha256 is not None and report.inputs_sha256 == inputs_digest(run_dir):
        return from_report(report, path, run_dir=run_dir, model=model)
    from ablate.report.sections import build_report  # the statistics (scipy): only for a report to rebuild

    why = (
        "has no digest of its results" if report.inputs_sha256 is None else "is stale: the run folder changed"
    )
    rebuilt = build_report(
        run_dir, alpha=report.alpha, control=report.run.control, primary=report.primary_metric
    )
    ev = from_report(rebuilt, path, run_dir=run_dir, model=model)
    ev.notes.append(f"{path} {why} since it was written; the gate rebuilt the report from {run_dir}")
    return ev


def _orient(metric: str, delta: float | None, lo: float | None, hi: float | None) -> tuple[float | None, ...]:
    """A run's Δ = cell − control, turned into the stripped layer's benefit (+ = the layer helps)."""
    if metric not in HIGHER_IS_BETTER:
        return delta, lo, hi
    return (None if delta is None else -delta, None if hi is None else -hi, None if lo is None else -lo)


def from_report(
    report: Report,
    source: Path,
    *,
    run_dir: Path | None,
    primary: str | None = None,
    model: str | None = None,
) -> Evidence:
    """Evidence of a :class:`ablate.report.model.Report` (of ``model``'s part: :func:`for_model`)."""
    report = for_model(report, model)
    metric = primary or report.primary_metric or DEFAULT_PRIMARY
    seq = report.sequential
    # the run's primary outcome is gated whatever --primary the report was written with
    guarded = {DEFAULT_PRIMARY, seq.primary if seq is not None else DEFAULT_PRIMARY} - {metric}
    detect_metric = metric if metric in RATE_METRICS else DEFAULT_PRIMARY
    power_of = {p.cell: p for p in report.power if p.metric == detect_metric}
    no_effect: dict[str, float] = {}
    if seq is not None and seq.primary == detect_metric:
        no_effect = {c: seq.min_effect for c, d in seq.decisions.items() if d.get("decision") == "no-effect"}
    also: list[str] = []
    aa_cells = {r.cell for r in report.noise_floor}  # --aa: a noise floor, gated as trust, not as a layer
    no_ops = {c.cell: c for c in report.no_op_cells}
    verdicts = {r.cell: r.verdict for r in report.ranking}
    labels = {c.cell: c.label for c in report.cells}
    findings: list[Finding] = []
    secondary: list[str] = []
    for c in report.comparisons:
        if c.cell in aa_cells:
            continue
        effect, lo, hi = _orient(c.metric, c.delta, c.ci_low, c.ci_high)
        if c.metric == metric and c.task is None and c.family == "primary":
            findings.append(
                Finding(
                    subject=c.cell,
                    against=c.control,
                    label=labels.get(c.cell) or ", ".join(c.layers),
                    effect=effect,
                    ci_low=lo,
                    ci_high=hi,
                    p_adjusted=c.p_adjusted,
                    real=c.real,
                    report_verdict=verdicts.get(c.cell, ""),
                    detectable=power_of[c.cell].detectable if c.cell in power_of else None,
                    no_effect_beyond=no_effect.get(c.cell),
                )
            )
        elif c.metric in guarded and c.task is None and c.real and effect is not None and effect < 0:
            also.append(
                f"{c.cell}: {c.metric} (the run's primary outcome) Δ {c.delta:+.3g}, adjusted p "
                f"{c.p_adjusted:.3g} — stripping its layer was better for real"
            )
        elif c.real and effect is not None and effect < 0:
            where = "pooled" if c.task is None else f"task {c.task}"
            secondary.append(f"{c.cell}: {c.metric} ({where}) Δ {c.delta:+.3g} — stripping it was better")
    for cell, nop in no_ops.items():
        if not any(f.subject == cell for f in findings):
            findings.append(Finding(subject=cell, against=report.run.control, label=nop.reason, no_op=True))
    tested = [f for f in findings if not f.no_op]
    control = next((c for c in report.cells if c.cell == report.run.control), None)
    rate = control.metrics.get(detect_metric) if control is not None else None
    level = next((p.alpha_each for p in power_of.values() if p.alpha_each is not None), None)
    worst = max(tested, key=lambda f: float("inf") if f.detectable is None else f.detectable, default=None)
    power = power_of.get(worst.subject) if worst is not None else None
    return Evidence(
        source=source,
        kind="run",
        primary=metric,
        findings=findings,
        detectable=None if power is None else power.detectable,
        detectable_note="no power figure in the report" if power is None else (power.detectable_note or ""),
        items=report.n.items,
        excluded=report.n.excluded,
        untrustworthy=_run_trust(report, run_dir),
        caveats=[(c.id, c.text) for c in report.caveats],
        unsealed=any(c.id == UNSEALED for c in report.caveats),
        secondary=secondary,
        also_regressed=also,
        detect_metric=detect_metric,
        detect_test="" if power is None else power.test,
        scale=None
        if rate is None or rate.value is None or level is None
        else Scale(
            rate.value,
            level,
            report.n.tasks,
            report.n.tasks * len(report.cells),
            report.n.repeats,
            report.run.spend_usd / report.n.complete if report.n.complete else None,
        ),
    )


def _run_trust(report: Report, run_dir: Path | None) -> list[str]:
    out: list[str] = []
    probe = report.probe
    if isinstance(probe, dict):
        cells = probe.get("cells")
        bad = [
            f"{c.get('id')}: {c.get('verdict')}"
            for c in (cells if isinstance(cells, list) else [])
            if isinstance(c, dict) and c.get("verdict") not in ("faithful", "no-op")
        ]
        if bad or probe.get("ok") is False or "error" in probe:
            out.append(
                "the recorded probe is not faithful"
                + (f" ({'; '.join(map(str, bad[:6]))})" if bad else f" ({probe.get('error', 'ok = false')})")
            )
    aa_real = [r for r in report.noise_floor if r.real]
    if aa_real:
        out.append(
            "the A/A control differs from the control for real ("
            + ", ".join(f"{r.metric} Δ {r.delta:+.3g}" if r.delta is not None else r.metric for r in aa_real)
            + "): the run cannot tell its noise from an effect"
        )
    if not report.run.model_verified:
        seen = ", ".join(f"{m} ×{n}" for m, n in report.run.models_seen.items()) or "none"
        out.append(
            f"the model is not verified from every transcript (pinned {report.run.model}; seen {seen})"
        )
    if run_dir is not None:
        from ablate.folder.layout import read_manifest

        manifest = read_manifest(RunFolder(run_dir))
        leaks = [f"{c.id}: {leak}" for c in manifest.cells for leak in c.leaks]
        if leaks:
            out.append(f"{len(leaks)} leak(s) the builder could not remove ({'; '.join(leaks[:4])})")
    return out


def _from_compare(path: Path, data: dict[str, Any], model: str | None = None) -> Evidence:
    """Evidence of a compare.json, read through the type that writes it; of ``model``'s rows when it holds several."""
    from ablate.compare.model import COMPARE_SCHEMA_VERSION, CompareReport

    hint = "write it again with this ablate (`ablate compare`)"
    doc = _typed(CompareReport, path, data, COMPARE_SCHEMA_VERSION, "compare.json", hint)
    _pick_model([m.model for m in doc.models] or [doc.model], model, "compare.json")
    if rows := next((m for m in doc.models if m.model == model), None):
        doc = doc.model_copy(
            update={"arm_rates": rows.arm_rates, "contrasts": rows.contrasts, "verdicts": rows.verdicts}
        )
    verdicts = {v.arm: v for v in doc.verdicts}
    findings = [_arm_finding(arm, doc, verdicts) for arm in doc.arms if arm.name != doc.baseline]
    rate = next(
        (r.rate for r in doc.arm_rates if r.arm == doc.baseline and r.task is None and r.rate is not None),
        0.5,
    )  # the baseline's pooled pass rate (½ when it has none)
    findings, test = _compare_power(doc, findings, rate)
    found = [f.detectable for f in findings]
    tasks = len(doc.tasks)
    return Evidence(
        source=path,
        kind="compare",
        primary=DEFAULT_PRIMARY,
        findings=findings,
        detectable=None if None in found else max((d for d in found if d is not None), default=None),
        detectable_note=test,
        detect_test=test,
        items=doc.items,
        excluded=doc.excluded.count,
        untrustworthy=[
            f"arm {c.arm}: its file changed ({c.when})"
            for c in doc.fingerprint_changes
            if c.when.startswith("during")
        ],
        caveats=[("cannot-claim", t) for t in doc.claims.cannot],
        unsealed=doc.execution.get("network") == UNSEALED,
        secondary=[
            f"{v.arm}: {c.detail}"
            for v in verdicts.values()
            for c in v.checks
            if c.name == "nothing regressed" and not c.passed
        ],
        scale=Scale(
            rate,
            0.05 / max(1, len(doc.contrasts)),
            tasks,
            tasks * len(doc.arms),
            doc.repeats,
            doc.spent_usd / doc.items if doc.items else None,
        )
        if tasks
        else None,
    )


def _arm_finding(arm: ArmInfo, doc: CompareReport, verdicts: dict[str, VerdictRow]) -> Finding:
    """The arm's pooled pitfall-free effect against the baseline (+ = the arm is better), with compare's verdict."""
    from ablate.compare.analysis import oriented

    label = arm.source or arm.name
    if arm.op in ("move", "duplicate"):
        label += f" with block {arm.block!r} {'moved' if arm.op == 'move' else 'duplicated'}"
    e = oriented(doc.contrasts, doc.baseline, arm.name)
    verdict = verdicts.get(arm.name)
    return Finding(
        arm.name,
        doc.baseline,
        label,
        effect=e.delta,
        ci_low=e.ci_low,
        ci_high=e.ci_high,
        p_adjusted=e.p_adjusted,
        real=e.real,
        claimed_better=None if verdict is None else verdict.better,
        why_not=[] if verdict is None else list(verdict.failed),
    )


def _compare_power(doc: CompareReport, findings: list[Finding], base: float) -> tuple[list[Finding], str]:
    """Each arm's detectable effect by the test that decides it, at Holm's first step: an adaptive comparison's
    anytime-valid e-process, else the exact paired test compare's claims state (from the baseline's ``base``)."""
    from ablate.compare.tiers import detectable_effect
    from ablate.stats.sequential import detectable_anytime, prior_for

    s = doc.sequential
    if s is None:
        det = detectable_effect(len(doc.tasks) * doc.repeats, base, max(1, len(doc.contrasts)))
        test = "exact paired test at Holm's first step, arms assumed independent (cautious)"
        return [replace(f, detectable=det) for f in findings], test
    last = s.looks[-1].cells if s.looks else {}
    out = []
    for f in findings:
        look = last.get(f.subject)
        n = look.blocks if look is not None else 0
        det = detectable_anytime(n, base, s.alpha / max(1, len(s.decisions)), prior_for(s.min_effect))
        decided = s.decisions.get(f.subject, {}).get("decision")
        out.append(
            replace(f, detectable=det, no_effect_beyond=s.min_effect if decided == "no-effect" else None)
        )
    return out, "anytime-valid e-process at Holm's first step, arms assumed independent (cautious)"


def check_subject(ev: Evidence, name: str, where: str) -> Finding:
    """The finding of ``name`` or a located :class:`UsageError` listing the subjects there are."""
    f = ev.subject(name)
    if f is None:
        what = "cell" if ev.kind == "run" else "arm"
        known = ", ".join(x.subject for x in ev.findings) or "none"
        raise UsageError(
            f"{where}: no {what} {name!r} in {ev.source}", hint=f"the {what}s with a verdict are: {known}"
        )
    return f

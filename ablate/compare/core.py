"""Preparing and running a comparison, and building ``compare.json``: :func:`prepare_compare` checks and
estimates for free, :func:`run_compare` executes, analyses and writes the compare folder (its files:
docs/ARCHITECTURE.md#compare)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ablate import __version__
from ablate.compare.arms import Arm, build_arms, layout_roles, parse_roles
from ablate.compare.executors import Executor, ItemOutcome, WorkItem
from ablate.compare.ledger import (
    append_ledger,
    arm_key,
    count_looks,
    fingerprint_changes,
    read_ledger,
    task_set_sha256,
)
from ablate.compare.model import COMPARE_SCHEMA_VERSION, CompareReport, Estimate, RolesInfo
from ablate.compare.tiers import Tier, claims, resolve_tier
from ablate.core.constants import DEFAULT_MAX_TURNS, DEFAULT_MODEL
from ablate.core.errors import OutputExists, RunFolderError, UsageError
from ablate.core.fsutil import atomic_write_bytes
from ablate.core.pricing import estimate_cost
from ablate.folder.layout import PlanItem, RunFolder
from ablate.run.estimate import dearest
from ablate.run.plan import ASSUMED_INPUT_TOKENS, ASSUMED_OUTPUT_TOKENS, make_plan
from ablate.setup.tasks import Task
from ablate.setup.taskset import load_tasks

if TYPE_CHECKING:
    from ablate.folder.adaptive import AdaptiveOptions


@dataclass(frozen=True)
class CompareRequest:
    arms: list[str]
    tasks: list[Path]
    tier: str = "smoke"
    repeats: int | None = None
    block: str | None = None
    roles: str | None = None
    """``--roles``: the layout role of each arm, in order (``original,moved,duplicated``)."""
    layer: str = "user-claude-md"
    executor: str = "claude-code"
    model: str = DEFAULT_MODEL
    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int = 1024
    seed: int = 0
    out: Path = Path("runs")
    adaptive: AdaptiveOptions | None = None
    """``--adaptive``: rounds until each arm is decided, at most ``max_repeats`` (replaces the tier's repeats)."""
    models: tuple[str, ...] = ()
    """``--models`` (two or more; ``model`` is the first): every arm on every model in each block."""


@dataclass
class PreparedCompare:
    request: CompareRequest
    tier: Tier
    arms: list[Arm]
    tasks: list[Task]
    items: list[WorkItem]
    estimate: Estimate
    compare_id: str
    notes: list[str] = field(default_factory=list)
    roles: RolesInfo | None = None
    """The layout experiment's roles, when the arms are one (their decomposition is then computed)."""

    @property
    def holdout(self) -> list[str]:
        return [t.id for t in self.tasks if t.spec.split == "holdout"]


def estimate_compare(
    arms: Sequence[Arm], tasks: Sequence[Task], sessions: int, executor: Executor, model: str, max_turns: int
) -> Estimate:
    calls = sessions * executor.calls_per_session(max_turns)
    if not executor.spends:
        return Estimate(
            sessions=sessions, calls=calls, usd=0.0, basis="the simulated endpoint: nothing is billed"
        )
    if executor.name == "api":
        mean_system = sum(len(a.rendered.data) for a in arms) / len(arms)
        mean_prompt = sum(len(t.prompt) for t in tasks) / len(tasks)
        inp = int((mean_system + mean_prompt) / 4) + 10
        out = getattr(executor, "max_tokens", 1024)
        per = estimate_cost(model, input_tokens=inp, output_tokens=out)
        basis = f"1 call per session of ~{inp} input tokens and at most {out} output tokens at list price"
    else:
        per = estimate_cost(model, input_tokens=ASSUMED_INPUT_TOKENS, output_tokens=ASSUMED_OUTPUT_TOKENS)
        per = None if per is None else per * executor.calls_per_session(max_turns)
        basis = (
            f"assumes {executor.calls_per_session(max_turns)} calls per session of "
            f"~{ASSUMED_INPUT_TOKENS // 1000}k input and {ASSUMED_OUTPUT_TOKENS} output tokens at list price, "
            "no prompt caching (an upper-end guess)"
        )
    if per is None:
        return Estimate(sessions=sessions, calls=calls, usd=None, basis=f"no list price known for {model!r}")
    if getattr(executor, "simulated", False):
        basis += "; simulated: the endpoint is ablate.sim, nothing is billed"
    return Estimate(sessions=sessions, calls=calls, usd=per * sessions, basis=basis)


def prepare_compare(req: CompareRequest, executor: Executor) -> PreparedCompare:
    """Check the request and plan it; nothing is run and nothing is written."""
    tier = resolve_tier(req.tier, req.repeats)
    if req.models and (executor.name != "claude-code" or req.adaptive is not None):
        raise UsageError(
            f"--models with {'--adaptive' if req.adaptive else f'--executor {executor.name}'}: only a fixed "
            "comparison of the claude-code executor runs every arm on several models",
            hint="drop --models, or run the claude-code executor (the default) without --adaptive",
        )
    if req.adaptive is not None:
        if executor.name != "claude-code":
            raise UsageError(
                f"--adaptive with --executor {executor.name}: only the claude-code executor runs in rounds",
                hint="drop --executor (claude-code is the default) or drop --adaptive",
            )
        tier = dataclasses.replace(tier, repeats=req.adaptive.max_repeats)  # the largest plan
    if not req.tasks:
        raise UsageError("no tasks given", hint="pass --tasks DIR (e.g. --tasks tasks/)")
    given_roles = parse_roles(req.roles) if req.roles is not None else None
    arms = build_arms(req.arms, req.block)
    roles = layout_roles(arms, given_roles)
    tasks = load_tasks(req.tasks)
    notes: list[str] = []
    if roles is not None:
        notes.append(roles.line())
    elif len(arms) == 3:
        notes.append(
            "three arms, but not the layout experiment's (moved: the same lines in another order; duplicated: "
            "the original's lines plus repeated ones): no decomposition; pass --roles to say which is which"
        )
    seen: dict[str, str] = {}
    for a in arms:
        if a.fingerprint in seen:
            notes.append(
                f"arms {seen[a.fingerprint]} and {a.name} are byte-identical: their contrast is a null check"
            )
        seen.setdefault(a.fingerprint, a.name)
    if executor.name in ("api", "sim"):  # one request, the arm its whole system prompt: no session to set up
        for a in arms:
            try:
                a.rendered.data.decode("utf-8")
            except UnicodeDecodeError:
                raise UsageError(
                    f"arm {a.name}: {a.variant.source} is not UTF-8 text; a system prompt must be"
                ) from None
        for t in tasks:
            asked = [k for k in ("append_system_prompt", "env") if getattr(t.spec, k)]
            if asked:
                raise UsageError(
                    f"task {t.id}: {' and '.join(asked)} cannot be applied by --executor {executor.name} "
                    "(one request whose system prompt is the arm, no Claude Code session)",
                    hint="run with --executor claude-code (the default), or drop them from the task",
                )
    for t in tasks:
        if not t.spec.pitfalls:
            notes.append(f"task {t.id} has no pitfalls: every session of it counts as pitfall-free")
    plan = make_plan(
        [t.id for t in tasks], [a.name for a in arms], repeats=tier.repeats, seed=req.seed, models=req.models
    )
    by_task = {t.id: t for t in tasks}
    by_arm = {a.name: a for a in arms}
    arm_pos = {a.name: i for i, a in enumerate(arms)}
    task_pos = {t.id: i for i, t in enumerate(tasks)}
    items = [
        WorkItem(p.item, by_task[p.task], by_arm[p.cell], p.repeat, p.order, arm_pos[p.cell], task_pos[p.task], p.model)
        for p in plan
    ]  # fmt: skip
    est = estimate_compare(
        arms, tasks, len(items), executor, dearest(req.models or [req.model]), req.max_turns
    )
    digest = hashlib.sha256(
        "\n".join([a.fingerprint for a in arms] + [t.sha256 for t in tasks] + [str(req.seed)]).encode()
    ).hexdigest()
    compare_id = f"compare-{datetime.now(UTC):%Y%m%d-%H%M%S}-{digest[:8]}"
    return PreparedCompare(req, tier, arms, tasks, items, est, compare_id, notes, roles)


def analyse(prep: PreparedCompare, outcomes: Sequence[ItemOutcome]) -> dict[str, Any]:
    """The statistics part of compare.json."""
    # scipy (~1.5 CPU-s to load): not for a refusal, nor a resume with nothing left to analyse
    from ablate.compare import analysis as an

    arm_names = [a.name for a in prep.arms]
    task_ids = [t.id for t in prep.tasks]
    obs = [an.Observation(o.task, o.arm, o.repeat, o.pitfall_free, o.turns) for o in outcomes if o.answered]
    excluded = [o for o in outcomes if not o.answered]
    seed = prep.request.seed
    contrasts = an.all_contrasts(obs, arm_names, task_ids, seed=seed)
    rates = an.arm_rates(obs, arm_names, task_ids)
    verdicts = []
    holdout_contrasts = []
    for arm in arm_names[1:]:
        v, hold = an.verdict(obs, contrasts, arm_names[0], arm, task_ids, prep.holdout, seed=seed)
        verdicts.append(v.model_dump(mode="json"))
        if hold is not None:
            holdout_contrasts.append(hold.model_dump(mode="json"))
    roles = prep.roles
    decomposition = None
    if roles is not None:
        parts = an.decomposition(contrasts, roles.original, roles.moved, roles.duplicated)
        decomposition = {k: e.model_dump(mode="json") for k, e in parts.items()}
    regressions = [
        c.model_dump(mode="json")
        for c in contrasts
        if c.task is not None and c.metric == "pitfall_free" and c.delta is not None and c.delta < 0
    ]
    blocks = len(prep.tasks) * prep.tier.repeats
    base_rate = next((r.rate for r in rates if r.arm == arm_names[0] and r.task is None), None)
    return {
        "arm_rates": [r.model_dump(mode="json") for r in rates],
        "contrasts": [c.model_dump(mode="json") for c in contrasts],
        "holdout_contrasts": holdout_contrasts,
        "decomposition": decomposition,
        "roles": roles,
        "regressions": regressions,
        "verdicts": verdicts,
        "claims": claims(prep.tier, blocks, max(1, len(contrasts)), base_rate),
        "excluded": {
            "count": len(excluded),
            "by_status": dict(sorted(Counter(o.status for o in excluded).items())),
            "items": [o.item for o in excluded][:200],
        },
    }


def run_compare(
    prep: PreparedCompare,
    executor: Executor,
    *,
    on_item: Callable[[ItemOutcome], None] | None = None,
    resume: bool = False,
) -> tuple[Path, CompareReport]:
    """Execute the plan, analyse, write the compare folder and the ledger line; return (folder, report).
    ``resume``: the compare folder exists (an interrupted run of this very plan); the executor continues it."""

    out_root = prep.request.out
    folder = out_root / prep.compare_id
    if folder.exists() and any(folder.iterdir()) and not resume:
        raise OutputExists(
            f"{folder}: compare folder already exists", hint="pick another --out or wait a second"
        )
    (folder / "arms").mkdir(parents=True, exist_ok=True)
    for a in prep.arms:
        atomic_write_bytes(folder / "arms" / f"{a.name}.md", a.rendered.data)
    RunFolder(folder).write_plan(
        [
            PlanItem(item=i.item, task=i.task.id, cell=i.arm.name, repeat=i.repeat, order=i.order)
            for i in prep.items
        ]
    )
    entries, bad = read_ledger(out_root)
    task_sha = task_set_sha256(prep.tasks)
    looks = count_looks(entries, task_sha, prep.holdout, bad)
    changes = fingerprint_changes(entries, prep.arms)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    if prep.request.adaptive is None:
        execution = executor.run(prep.items, folder, on_item)
    else:
        from ablate.compare.executors import ClaudeCodeExecutor

        assert isinstance(executor, ClaudeCodeExecutor)  # prepare_compare refused the others
        execution = executor.run(prep.items, folder, on_item, adaptive=True, options=prep.request.adaptive)
    outcomes = sorted(execution.outcomes, key=lambda o: o.order)
    atomic_write_bytes(folder / "items.jsonl", b"".join(orjson.dumps(o.to_json()) + b"\n" for o in outcomes))
    for a in prep.arms:
        if a.rendered.source_changed():
            changes.append(
                {
                    "arm": a.name,
                    "source": str(a.variant.source),
                    "earlier_compare_id": None,
                    "earlier_fingerprint": a.fingerprint,
                    "fingerprint": None,
                    "when": "during this run (every session got the bytes read at the start)",
                }
            )
    models = prep.request.models
    stats = analyse(prep, [o for o in outcomes if o.model == models[0]] if models else outcomes)
    if models:
        stats |= _by_model(prep, outcomes, folder / str(execution.info["run_folder"]))
    if prep.request.adaptive is not None:
        from ablate.compare.sequential import sequential_stats
        from ablate.report.sequential import sequential_section

        run_dir = folder / str(execution.info["run_folder"])
        if (seq := sequential_section(run_dir)) is None:
            raise RunFolderError(f"{run_dir}: an adaptive comparison's run folder has no adaptive.json")
        stats = sequential_stats(stats, seq, prep.arms[0].name)
    spent = sum(o.cost_usd or 0.0 for o in outcomes) if executor.spends else 0.0
    req = prep.request
    report = CompareReport.model_validate(
        {
            "schema_version": COMPARE_SCHEMA_VERSION,
            "compare_id": prep.compare_id,
            "ablate_version": __version__,
            "started_at": started,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "executor": executor.name,
            "model": req.model,
            "layer": req.layer if executor.name == "claude-code" else None,
            "tier": _tier_name(prep),
            "repeats": prep.tier.repeats,
            "seed": req.seed,
            "tasks": [{"id": t.id, "split": t.spec.split, "sha256": t.sha256} for t in prep.tasks],
            "task_set_sha256": task_sha,
            "arms": [a.to_json() for a in prep.arms],
            "baseline": prep.arms[0].name,
            "items": len(prep.items),
            "estimate": prep.estimate,
            "spent_usd": spent,
            "spent_basis": getattr(executor, "spend_basis", ""),
            **stats,
            "looks": looks,
            "fingerprint_changes": changes,
            "notes": prep.notes,
            "execution": execution.info,
        }
    )
    _write_outputs(folder, report)
    _append_ledger_line(prep, executor.name, started, task_sha)
    return folder, report


def _by_model(prep: PreparedCompare, outcomes: Sequence[ItemOutcome], run_dir: Path) -> dict[str, Any]:
    """``--models``: each model's rows, and the model × arm interactions of the run folder's report."""
    from ablate.report.sections import build_report

    rows = []
    for m in prep.request.models:
        got = analyse(prep, [o for o in outcomes if o.model == m])
        rows.append({"model": m, **{k: got[k] for k in ("arm_rates", "contrasts", "verdicts")}})
    return {"models": rows, "model_interactions": getattr(build_report(run_dir), "model_interactions", [])}


def _tier_name(prep: PreparedCompare) -> str:
    """``adaptive`` for a sequential design (no tier's fixed repeats), else the tier."""
    return "adaptive" if prep.request.adaptive is not None else prep.tier.name


def _write_outputs(folder: Path, report: CompareReport) -> None:
    """compare.json, and compare.md / compare.html rendered from the report's blocks."""
    from ablate.compare.render import compare_document
    from ablate.report.html import render_html
    from ablate.report.markdown import render_markdown

    atomic_write_bytes(
        folder / "compare.json", orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    )
    plot = None
    if report.sequential is not None:
        from ablate.report.sequential import cs_plot

        drawn = cs_plot(report.sequential, folder / "plots")
        plot = (f"plots/{drawn[0].name}", f"plots/{drawn[1].name}") if drawn else None
    document = compare_document(report, plot)
    atomic_write_bytes(folder / "compare.md", render_markdown(document).encode())
    atomic_write_bytes(folder / "compare.html", render_html(document, folder).encode())


def _append_ledger_line(prep: PreparedCompare, executor: str, started: str, task_sha: str) -> None:
    append_ledger(
        prep.request.out,
        {
            "compare_id": prep.compare_id,
            "created_at": started,
            "folder": prep.compare_id,
            "task_set_sha256": task_sha,
            "tasks": [t.id for t in prep.tasks],
            "holdout": prep.holdout,
            "arms": [arm_key(a) for a in prep.arms],
            "executor": executor,
            "tier": _tier_name(prep),
            "repeats": prep.tier.repeats,
        },
    )

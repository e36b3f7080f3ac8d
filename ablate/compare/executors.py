"""Executors: how one comparison item (task × arm × repeat) is run: ``api`` (:class:`ApiExecutor`), ``sim``
(:class:`SimExecutor`) and ``claude-code`` (:class:`ClaudeCodeExecutor`), as README.md's "Executors" describes.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ablate.compare.arms import Arm
from ablate.compare.requests_check import check_requests
from ablate.core.endpoint import is_simulated
from ablate.core.errors import AblateError, UsageError
from ablate.core.fsutil import sha256_bytes
from ablate.core.pricing import estimate_cost
from ablate.folder.layout import RunFolder
from ablate.folder.limits import Limits
from ablate.grade.hook import GradingHook
from ablate.setup.tasks import Task

if TYPE_CHECKING:
    from ablate.core.claude import ClaudeBinary
    from ablate.folder.adaptive import AdaptiveOptions
    from ablate.run.execute import ExecuteRequest, ExecutionResult
    from ablate.run.prepare import PreparedRun
    from ablate.run.scheduler import Progress

REQUESTS = "requests.jsonl"
SIM_LOG = "sim-requests.jsonl"
_SESSION_NS = uuid.UUID("6f7c2d9a-13c5-4d6e-9a51-0c0a6b1a7e13")
SESSION_HEADER = "x-ablate-session-id"


@dataclass(frozen=True)
class WorkItem:
    item: str
    task: Task
    arm: Arm
    repeat: int
    order: int
    arm_index: int = 0
    """Position of the arm in the comparison (the first is the baseline)."""
    task_index: int = 0
    model: str | None = None
    """The item's model in a comparison of several (``--models``)."""


@dataclass
class ItemOutcome:
    """What one item came to. ``status`` other than ``completed`` excludes it from every contrast."""

    item: str
    task: str
    arm: str
    repeat: int
    order: int
    status: str
    pitfall_hits: dict[str, int] = field(default_factory=dict)
    turns: int | None = None
    cost_usd: float | None = None
    error: str | None = None
    session_id: str | None = None
    model: str | None = None

    @property
    def answered(self) -> bool:
        return self.status in ("completed", "max_turns", "max_tokens", "timeout")

    @property
    def pitfall_free(self) -> bool:
        return not any(self.pitfall_hits.values())

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k != "model"}


@dataclass
class Execution:
    """Everything an executor produced besides the outcomes (recorded in compare.json)."""

    outcomes: list[ItemOutcome]
    info: dict[str, Any] = field(default_factory=dict)


class Executor(Protocol):
    name: str
    spends: bool
    """False when nothing is billed (the sim)."""
    spend_basis: str
    """Where ``spent_usd`` comes from."""
    simulated: bool
    """The answers come from ablate.sim: dollar figures are simulated."""

    def calls_per_session(self, max_turns: int) -> int: ...

    def run(
        self, items: Sequence[WorkItem], folder: Path, on_item: Callable[[ItemOutcome], None] | None = None
    ) -> Execution: ...


def pitfall_hits(task: Task, text: str) -> dict[str, int]:
    """Matches of every pitfall of the task over the answer's text (case-insensitive)."""
    return {p.id: len(re.findall(p.pattern, text, re.IGNORECASE)) for p in task.spec.pitfalls}


def session_id(seed: int, item: str) -> str:
    """A deterministic per-item id (uuid5 of the seed and item): the same plan sends the same headers."""
    return str(uuid.uuid5(_SESSION_NS, f"{seed}:{item}"))


@dataclass(kw_only=True)
class ApiExecutor:
    """One Messages API request per item with the arm as the system prompt (the anthropic SDK)."""

    name = "api"
    spends = True
    spend_basis = "list price × the usage each response reported (an estimate)"
    model: str
    base_url: str | None
    api_key: str | None
    max_tokens: int = 1024
    seed: int = 0
    priced: bool = True
    """False: the sim's answers, whose usage nothing bills."""

    def __post_init__(self) -> None:
        self.simulated = is_simulated(self.base_url)
        if self.simulated:
            self.spend_basis += "; the endpoint is ablate.sim, so it is simulated: nothing was billed"
        if not self.api_key:
            raise UsageError(
                "--executor api needs an API key",
                hint="set ANTHROPIC_API_KEY (or use --executor sim for a free dry run)",
            )

    def calls_per_session(self, max_turns: int) -> int:
        return 1

    def run(
        self, items: Sequence[WorkItem], folder: Path, on_item: Callable[[ItemOutcome], None] | None = None
    ) -> Execution:
        import anthropic

        client = anthropic.Anthropic(base_url=self.base_url, api_key=self.api_key, max_retries=2)
        outcomes: list[ItemOutcome] = []
        records: list[dict[str, Any]] = []
        with (folder / REQUESTS).open("ab") as log:
            for it in items:
                sid = session_id(self.seed, it.item)
                out = ItemOutcome(
                    it.item, it.task.id, it.arm.name, it.repeat, it.order, "error", session_id=sid
                )
                system = it.arm.rendered.data.decode("utf-8")
                try:
                    raw = client.messages.with_raw_response.create(
                        model=self.model,
                        max_tokens=self.max_tokens,
                        system=system,
                        messages=[{"role": "user", "content": it.task.prompt}],
                        extra_headers={SESSION_HEADER: sid},
                    )
                    body = bytes(raw.http_request.content)
                    msg = raw.parse()
                except anthropic.APIError as exc:
                    out.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                else:  # one call by construction: turns are not measured here
                    text = "\n".join(b.text for b in msg.content if isinstance(b, anthropic.types.TextBlock))
                    out.status = "max_tokens" if msg.stop_reason == "max_tokens" else "completed"
                    out.pitfall_hits = pitfall_hits(it.task, text)
                    u = msg.usage
                    out.cost_usd = (
                        estimate_cost(
                            self.model,
                            input_tokens=u.input_tokens,
                            output_tokens=u.output_tokens,
                            cache_read_tokens=u.cache_read_input_tokens or 0,
                            cache_write_5m_tokens=u.cache_creation_input_tokens or 0,
                        )
                        if self.priced
                        else 0.0
                    )
                    rec = {
                        "item": it.item,
                        "task": it.task.id,
                        "arm": it.arm.name,
                        "repeat": it.repeat,
                        "session_id": sid,
                        "body_sha256": sha256_bytes(body),
                        "body": body.decode("utf-8"),
                        "answer": text,
                    }
                    log.write(orjson.dumps(rec) + b"\n")
                    log.flush()
                    records.append(rec)
                outcomes.append(out)
                if on_item:
                    on_item(out)
        arm_text = {it.arm.name: it.arm.rendered.data.decode("utf-8") for it in items}
        return Execution(outcomes, {"request_check": check_requests(records, arm_text)})


@dataclass(kw_only=True)
class SimExecutor:
    """The api executor against an in-process ``ablate.sim`` endpoint: free, offline, deterministic."""

    name = "sim"
    spends = False
    spend_basis = "the simulated endpoint: nothing is billed"
    simulated = True
    script: Path
    model: str
    seed: int = 0
    max_tokens: int = 1024

    def calls_per_session(self, max_turns: int) -> int:
        return 1

    def run(
        self, items: Sequence[WorkItem], folder: Path, on_item: Callable[[ItemOutcome], None] | None = None
    ) -> Execution:
        from ablate.sim import SimServer

        with SimServer(self.script, log_path=folder / SIM_LOG, seed=self.seed) as sim:
            api = ApiExecutor(
                model=self.model,
                base_url=sim.base_url,
                api_key="sk-ablate-sim",
                max_tokens=self.max_tokens,
                seed=self.seed,
                priced=False,
            )
            execution = api.run(items, folder, on_item)
            errors = sim.errors
        execution.info["sim"] = {
            "script": str(self.script),
            "log": SIM_LOG,
            "seed": self.seed,
            "errors": errors,
        }
        return execution


# ---------------------------------------------------------------------------------------------------------
# The real CLI in cells


@dataclass
class ClaudeCodeOptions:
    config_dir: Path
    repo: Path
    layer: str
    claude_bin: Path | None
    model: str
    max_turns: int
    timeout_s: float
    jobs: int
    seed: int
    models: tuple[str, ...] = ()
    """``--models``: every model, each arm's sessions pinned to each (the run folder's plan)."""
    work_dir: Path | None = None
    ablate_toml: Path | None = None
    budget_usd: float | None = None
    isolation: str | None = None
    """The backend asked for (``--isolation``); default: ``namespace`` where it works, else ``links``."""
    unsealed: bool = False
    """``--unsealed``: run where sessions cannot be sealed (:func:`ablate.isolate.detect.require_sealed`)."""
    hide: tuple[str, ...] = ()  # --hide and --expose (ablate.isolate.secrets.secrets_policy)
    expose: tuple[str, ...] = ()
    probe: bool = True
    """Probe the arms' cells for free before the first paid session (``--no-probe``: False)."""
    allow_weak_checks: bool = False
    """Run tasks whose checks cannot tell doing nothing from doing the task (``--allow-weak-checks``)."""
    limits: Limits = field(default_factory=Limits)
    """Each session's limits (``--limit``)."""
    on_progress: Callable[[Progress], None] | None = None
    """The runner's progress snapshots (:class:`ablate.run.scheduler.Progress`)."""
    on_note: Callable[[str], None] | None = None
    """What the run says besides progress (Ctrl-C)."""


def cell_set_toml(arms: Sequence[Arm], layer: str) -> str:
    """A cell set whose cells are the arms, each replacing ``layer`` with ``arms/<name>.md``."""
    lines = [
        "schema_version = 1",
        'name = "compare"',
        'description = "Arms of an ablate compare run (generated)."',
        f"control = {json.dumps(arms[0].name)}",
        "",
    ]
    for a in arms:
        lines += [
            "[[cell]]",
            f"id = {json.dumps(a.name)}",
            f"label = {json.dumps(a.spec)}",
            f"replace = {{ {json.dumps(layer)} = {json.dumps(f'arms/{a.name}.md')} }}",
            "",
        ]
    return "\n".join(lines)


def layer_fingerprint(rel_path: str, data: bytes) -> str:
    """The catalog's fingerprint of a one-file layer holding ``data``."""
    from ablate.setup.layers import layer_hash

    return layer_hash([(rel_path, data)])


def check_cells(arms: Sequence[Arm], rel_path: str, built: dict[str, object]) -> dict[str, Any]:
    """Compare each arm's bytes with the layer fingerprint its built cell recorded in the run manifest."""
    rows = {}
    for a in arms:
        want = layer_fingerprint(rel_path, a.rendered.data)
        got = built.get(a.name)
        rows[a.name] = {"expected": want, "built": got, "ok": got == want}
    return {
        "verified": all(r["ok"] for r in rows.values()),
        "method": "the run manifest's per-layer fingerprint of each cell (taken when its environment was "
        "built or retargeted) against the arm's bytes",
        "arms": rows,
    }


def probe_record(run_dir: Path, folder: Path) -> dict[str, Any]:
    """What the run folder's probe.json says, for compare.json: its file, whether every cell was faithful (None:
    not probed), and the probe in the run report's words."""
    from ablate.folder.probe import probe_path, read_probe
    from ablate.report.isolation import probe_words

    run = RunFolder(run_dir)
    data = read_probe(run)
    if data is None:
        return {"file": None, "ok": None, "words": "Probe: no probe.json in the run folder."}
    return {
        "file": str(probe_path(run).relative_to(folder)),
        "ok": data.get("ok"),
        "words": probe_words(data),
    }


def check_layer(layer: str, ablate_toml: Path | None) -> None:
    """``layer`` must be a file layer of the catalog: the arms replace its first path, as ``replace`` does."""
    from ablate.setup.layers import load_catalog

    catalog = load_catalog(ablate_toml)
    if layer not in catalog:
        raise UsageError(f"--layer {layer!r}: no such layer", hint=f"known layers: {', '.join(catalog.ids)}")
    spec = catalog.get(layer)
    first = spec.paths[0] if spec.paths else ""
    if not first or first.endswith("/") or any(c in first for c in "*?[") or spec.strip == "drop-key":
        raise UsageError(
            f"--layer {layer!r} is not a file layer ({', '.join(spec.paths) or 'JSON keys only'}); "
            "arms replace one file",
            hint="pick a file layer such as user-claude-md, axioms, lessons or repo-memory",
        )


class ClaudeCodeExecutor:
    """The real pinned CLI in isolated cells, through :func:`ablate.run.execute.execute` (one sweep, all arms).
    What ``ablate run`` checks (the layer, the isolation backend, the endpoint) is checked when it is made,
    before the compare folder is written; a compare folder whose ``run/`` holds the run folder resumes it."""

    name = "claude-code"
    spends = True
    spend_basis = "the sessions' own cost records (ItemResult.cost_usd)"

    def __init__(self, options: ClaudeCodeOptions) -> None:
        from ablate.run.execute import preflight

        check_layer(options.layer, options.ablate_toml)
        self.options = options
        self.preflight = preflight(
            options.config_dir,
            options.repo,
            isolation=options.isolation,
            unsealed=options.unsealed,
            hide=options.hide,
            expose=options.expose,
        )
        self.simulated = self.preflight.endpoint.simulated
        if self.simulated:
            self.spend_basis += "; the endpoint is ablate.sim, so it is simulated: nothing was billed"

    def calls_per_session(self, max_turns: int) -> int:
        from ablate.run.plan import ASSUMED_CALLS_PER_SESSION

        return min(max_turns, ASSUMED_CALLS_PER_SESSION)

    def run(
        self,
        items: Sequence[WorkItem],
        folder: Path,
        on_item: Callable[[ItemOutcome], None] | None = None,
        *,
        adaptive: bool = False,
        options: AdaptiveOptions | None = None,
    ) -> Execution:
        """Every item in one sweep, after the arms' cells are proved as ``ablate run`` proves them (probe.json);
        ``adaptive``: in rounds over the arms still undecided (:func:`ablate.run.adaptive.execute_adaptive`;
        ``options`` None: a resume, with the folder's own), only the scheduled items having outcomes."""
        from ablate.core.claude import find_claude
        from ablate.grade.vet import vet_and_probe
        from ablate.run.adaptive import execute_adaptive
        from ablate.run.execute import execute

        o = self.options
        claude = find_claude(o.claude_bin)
        prep = self._prepare(items, folder, claude, adaptive=adaptive)
        vet_and_probe(
            prep, claude, self.preflight.isolation.backend, o.on_note or (lambda _line: None),
            probe=o.probe, work_dir=o.work_dir, jobs=o.jobs, allow_weak=o.allow_weak_checks,
        )  # fmt: skip
        request, arms = self._request(claude, folder), _arms(items)
        summary = None
        if adaptive:
            done, summary = execute_adaptive(
                prep, request, options, on_progress=o.on_progress, on_note=o.on_note
            )
            scheduled = {p.item for p in prep.folder.read_plan()}
            items = [it for it in items if it.item in scheduled]
        else:
            done = execute(prep, request, on_progress=o.on_progress, on_note=o.on_note)
        execution = self._execution(prep, folder, claude, done, _outcomes(prep.folder, items, on_item), arms)
        if summary is not None:
            execution.info["adaptive"] = summary.to_json()
        return execution

    def _request(self, claude: ClaudeBinary, folder: Path) -> ExecuteRequest:
        from ablate.run.execute import ExecuteRequest
        from ablate.run.scheduler import RunOptions

        o = self.options
        return ExecuteRequest(
            claude=claude,
            preflight=self.preflight,
            tree_hook=GradingHook(),
            options=RunOptions(jobs=o.jobs, budget_usd=o.budget_usd, limits=o.limits),
            work_dir=o.work_dir,
            guard_skip=(folder.parent,),  # the compare folder and the ledger beside it
        )

    def _execution(
        self,
        prep: PreparedRun,
        folder: Path,
        claude: ClaudeBinary,
        done: ExecutionResult,
        outcomes: list[ItemOutcome],
        arms: list[Arm],
    ) -> Execution:
        from ablate.folder.layout import read_manifest
        from ablate.isolate.registry import choice_json

        layer = self.options.layer
        layer_path = prep.catalog.get(layer).paths[0]
        built = {c.id: c.fingerprints.get(layer) for c in read_manifest(prep.folder).cells}
        return Execution(
            outcomes,
            {
                "run_folder": str(prep.folder.root.relative_to(folder)),
                "run_outcome": done.summary.outcome,
                "envs_built": done.summary.envs_built,
                "claude_version": claude.version,
                "cell_check": check_cells(arms, layer_path, built),
                "probe": probe_record(prep.folder.root, folder),
                "isolation": choice_json(done.isolation),
                "network": done.isolation.network,
                "real_files_changed": done.real_files_changed,
                "writes": done.writes,
                "exit_code": done.exit_code,
            },
        )

    def _prepare(
        self, items: Sequence[WorkItem], folder: Path, claude: ClaudeBinary, *, adaptive: bool = False
    ) -> PreparedRun:
        """The sweep's run folder ``<compare>/run/<id>``, made or reopened (an adaptive one plans its rounds so far)."""
        from ablate.run.prepare import RunRequest, prepare_run

        o = self.options
        tasks = [
            it.task for it in sorted({it.task_index: it for it in items}.values(), key=lambda i: i.task_index)
        ]
        cells = folder / "cells.toml"
        if not cells.exists():
            cells.write_text(cell_set_toml(_arms(items), o.layer))
        existing = sorted(p for p in (folder / "run").glob("*") if RunFolder(p).has_manifest)
        prep = prepare_run(
            RunRequest(
                tasks=[] if existing else [t.source for t in tasks],
                cells=str(cells),
                repeats=max(it.repeat for it in items) + 1,
                model=o.model,
                models=o.models,
                max_turns=o.max_turns,
                timeout_s=o.timeout_s,
                out=folder / "run",
                config_dir=o.config_dir,
                repo=o.repo,
                seed=o.seed,
                resume=existing[-1] if existing else None,
                ablate_toml=o.ablate_toml,
                defaulted=frozenset({"cells", "repeats"}),
            ),
            claude,
        )
        planned = [(p.item, p.order) for p in sorted(prep.folder.read_plan(), key=lambda p: p.order)]
        wanted = [(it.item, it.order) for it in sorted(items, key=lambda i: i.order)]
        if adaptive and existing:
            same = {item for item, _ in planned} <= {item for item, _ in wanted}
        else:
            same = planned == wanted
        if not same:
            raise AblateError(
                f"{prep.folder.root}: the runner's plan differs from the comparison's; refusing to run it",
                hint="this is a bug in ablate: please report it with both plan.jsonl files",
            )
        return prep


def _arms(items: Sequence[WorkItem]) -> list[Arm]:
    """The arms in declared order (the first is the control), so the runner draws the very same plan."""
    return [it.arm for it in sorted({it.arm_index: it for it in items}.values(), key=lambda i: i.arm_index)]


def _outcomes(
    run: RunFolder, items: Sequence[WorkItem], on_item: Callable[[ItemOutcome], None] | None
) -> list[ItemOutcome]:
    """Each item's outcome, read back from the run folder's results (``not_run`` when it has none)."""
    from ablate.folder.result import iter_results

    by_item = {it.item: it for it in items}
    outcomes: list[ItemOutcome] = []
    for res in iter_results(run):
        it = by_item.get(res.item)
        if it is None:
            raise AblateError(f"{run.root}: result {res.item} is not an item of this comparison")
        status = res.status if res.complete and not res.flags else ("flagged" if res.flags else res.status)
        out = ItemOutcome(
            res.item, res.task, res.cell, res.repeat, it.order, status, pitfall_hits=dict(res.pitfall_hits),
            turns=res.turns, cost_usd=res.cost_usd, error=res.error, session_id=res.session_id, model=it.model,
        )  # fmt: skip
        outcomes.append(out)
        if on_item:
            on_item(out)
    done = {o.item for o in outcomes}
    return outcomes + [
        ItemOutcome(it.item, it.task.id, it.arm.name, it.repeat, it.order, "not_run", model=it.model)
        for it in items
        if it.item not in done
    ]

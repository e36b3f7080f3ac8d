"""``report.json`` (schema_version 1): the report as data. Scripts, ``ablate compare`` and the renderers read it.

Field names are a contract: ``run``, ``n``, ``comparisons``, ``ranking``, ``caveats``, ``no_op_cells``,
``excluded_items``, ``families``, ``primary_metric``; everything else is welcome extra detail.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ablate.folder.adaptive import Look, Replan

# The metrics (their labels, which are rates, which are better higher) are declared in the registry.
from ablate.folder.metrics import (
    BINARY_METRICS as BINARY_METRICS,
    HIGHER_IS_BETTER as HIGHER_IS_BETTER,
    METRIC_LABELS as METRIC_LABELS,
)
from ablate.grade.finding import HoldoutFinding as HoldoutFinding
from ablate.report.piece_model import PieceDesignInfo, PieceRow

REPORT_SCHEMA_VERSION: Literal[1] = 1


#: One comparison's verdict about the layer the cell strips: ``helps`` (stripping it made the metric worse,
#: real), ``hurts`` (stripping it made the metric better, real), ``draw`` (not real), ``not computable``.
ComparisonVerdict = Literal["helps", "hurts", "draw", "not computable"]
#: A layer's verdict from every real comparison of its cell: all ``helps``, all ``hurts``, both (``mixed``),
#: or none real (``draw``).
LayerVerdict = Literal["helps", "hurts", "mixed", "draw"]
FamilyName = Literal["primary", "secondary"]


class Doc(BaseModel):
    """Base of the report's models: reading tolerates fields a newer ablate added."""

    model_config = ConfigDict(extra="ignore")


class RunInfo(Doc):
    id: str
    """The run id."""
    claude_version: str
    """``claude --version`` of the run."""
    claude_sha256: str
    """Hash of the CLI binary."""
    claude_pinned: bool
    """True when the CLI is the version ablate is pinned to."""
    model: str
    """The model every session was pinned to."""
    model_verified: bool
    """True when every scored transcript names that model and no other."""
    models_seen: dict[str, int] = Field(default_factory=dict)
    """Model id → sessions whose transcript names it."""
    sessions_without_model: int = 0
    """Scored sessions whose transcript names no model (they make ``model_verified`` false)."""
    cell_set: str
    """The cell set's name."""
    binary: bool
    """True for an ``ablate ab`` run (setup on C0 against setup off C11)."""
    control: str
    """The control cell."""
    isolation: str
    """The isolation backend, as recorded (or what this ablate's runner uses when the manifest predates it)."""
    repeats: int
    seed: int
    created_at: str
    ablate_version: str
    tasks: list[dict[str, object]] = Field(default_factory=list)
    """id, split, expects, sha256 of every task."""
    spend_usd: float
    """Sum of every scored and excluded session's recorded spend."""
    spend_list_usd: float | None = None
    """The same sessions at list price with cache reads priced as fresh input (None: a model without price)."""
    simulated: bool = False
    """The sessions reached ablate's simulated endpoint: every dollar figure is simulated, nothing was billed."""


class Counts(Doc):
    tasks: int
    repeats: int
    items: int
    """Items in the plan."""
    complete: int
    """Items with a complete result."""
    excluded: int
    """Items left out of every comparison (failed, not run, flagged by provenance)."""


class Comparison(Doc):
    cell: str
    control: str
    layers: list[str]
    """Layer ids the cell strips (that this setup has)."""
    task: str | None
    """None: pooled over every task."""
    metric: str
    cell_value: float | None
    control_value: float | None
    delta: float | None
    """cell − control."""
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None = None
    p: float | None
    p_adjusted: float | None
    """Holm-adjusted within the comparison's family (see :attr:`Report.families`)."""
    real: bool
    """p_adjusted <= alpha and delta != 0."""
    family: FamilyName = "secondary"
    """``primary``: the pooled primary metric of a cell; ``secondary``: everything else."""
    verdict: ComparisonVerdict = "not computable"
    """What this comparison says about the layer (``helps``/``hurts`` only when real)."""
    n_pairs: int
    method: str
    not_computable: str | None = None
    """Why p (or the interval) could not be computed."""
    gained: int | None = None
    lost: int | None = None


class RankEntry(Doc):
    rank: int
    """Position; every member of one tie group shares it."""
    cell: str
    layers: list[str]
    tie_group: str
    """``draw`` for layers with no real effect, else the cell id (or a shared id for identical effects)."""
    delta_pitfall_free: float | None = None
    delta_turns: float | None = None
    delta_cost_usd: float | None = None
    real_metrics: list[str] = Field(default_factory=list)
    """Metrics with a real difference (pooled or on some task), primary first."""
    real_on: list[str] = Field(default_factory=list)
    """Where each of them is real and which way: ``pitfall_free: pooled helps, greet-exclaim helps``."""
    verdict: LayerVerdict = "draw"
    """From the real comparisons only: the pooled primary one's direction when it is real (``helps``,
    ``hurts``); else ``helps``/``hurts`` when the real ones agree, ``mixed`` when they disagree, ``draw``."""
    evidence: Literal["primary", "secondary", "none"] = "none"
    """``primary``: the pooled primary comparison is real; ``secondary``: only secondary ones are."""
    primary_delta: float | None = None
    """Pooled Δ of the primary metric (cell − control)."""
    tradeoffs: list[str] = Field(default_factory=list)
    """Real pooled comparisons against a helps/hurts verdict, from the layer's side: ``costs 1.00 turns``."""


class Caveat(Doc):
    id: str
    text: str


class NoOpCell(Doc):
    cell: str
    layers: list[str]
    reason: str


class ExcludedItem(Doc):
    item: str
    task: str
    cell: str
    repeat: int
    reason: str


class MetricSummary(Doc):
    value: float | None
    """Rate (binary metrics) or mean."""
    n: int
    ci_low: float | None = None
    ci_high: float | None = None
    spread: float | None = None
    """Run-to-run spread: sd of the per-repeat means (None with one repeat)."""


class CostPerPass(Doc):
    """A cell's spend per session that passed (:mod:`ablate.report.cost_per_pass`)."""

    value: float
    """Σ cost / Σ passes over the cell's scored sessions (the wire's cost where the session crossed it)."""
    ci_low: float | None
    ci_high: float | None
    """The 1 − α BCa bootstrap interval over sessions (None: degenerate, or a bound without limit)."""
    passes: int
    sessions: int
    metric: str
    """The outcome counted as a pass (the primary when it is pass/fail, else pitfall-free)."""


class CellCarried(Doc):
    """How many distinct system prompts, tool lists and first-message contexts (the per-session reminders such
    as the date left out) one cell's sessions sent the model, from the wire (``wire/<item>.jsonl``)."""

    cell: str
    stripped: list[str]
    sessions: int
    """Sessions with a wire record (a links run, an unsealed session: none)."""
    system: int
    tools: int
    context: int
    unlike_probe: int | None = None
    """Sessions whose context is not the one the free probe captured for the cell (probe.json); None: not
    compared (no probe digest, or not a namespace run and probe, whose sessions share the real paths)."""
    same_as: list[str] = Field(default_factory=list)
    """Other cells that differ from this one in a layer that reaches the model at a session's start, yet whose
    sessions carried exactly the same prompts, tools and contexts: the cells did not differ on the wire."""


class CellSummary(Doc):
    cell: str
    label: str
    layers: list[str]
    pieces: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    """A piece run's cell: the pieces it cuts (``layers`` stays the layers it strips: none)."""
    no_op: bool
    items: int
    scored: int
    excluded: int
    metrics: dict[str, MetricSummary]
    spend_usd: float
    spend_list_usd: float | None
    cache_read_share: float | None
    """Cache-read tokens / all input tokens of the cell's scored sessions."""
    skills_invoked: int
    notes: list[str] = Field(default_factory=list)
    cost_per_pass: CostPerPass | None = None
    cost_per_pass_note: str | None = None
    """Why ``cost_per_pass`` is None (no session passed; a session without a known cost)."""


class TaskCellCell(Doc):
    """One (task, cell) entry of the per-task tables."""

    task: str
    cell: str
    n: int
    pitfall_free: float | None
    turns: float | None
    tool_calls: float | None
    cost_usd: float | None
    skills_invoked: float | None


class Family(Doc):
    """A family of comparisons Holm-adjusted together."""

    name: FamilyName
    metrics: list[str]
    scope: str
    """What it holds, in words."""
    m: int
    """Comparisons in the family (Holm's first step tests at alpha / m)."""
    testable: int
    """Of them, those with a computable p."""
    rule: str
    """How the family's error rate is controlled, in words."""


class GraderRate(Doc):
    """How often one named check (a plugin-eval grader) passed in one cell, over the scored items."""

    task: str
    grader: str
    kind: str
    weight: float
    cell: str
    passed: int
    """Items where it passed."""
    n: int
    """Items where it could be evaluated."""


class NoiseFloorRow(Doc):
    """``--aa``: one metric's pooled difference between the two independently built controls (A/A)."""

    metric: str
    cell: str
    """The A/A cell (a second copy of the control)."""
    blocks: int
    """Paired blocks compared."""
    flip_rate: float | None
    """Binary metrics: the share of blocks where the two controls disagree (a verdict that flips on an
    identical setup)."""
    spread: float | None
    """The standard deviation of the per-block differences (counts and costs; for binary metrics too)."""
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_adjusted: float | None
    real: bool
    """A real A/A difference: the run cannot tell its own noise from an effect (untrustworthy)."""


class PowerRow(Doc):
    metric: str
    cell: str | None = None
    """The cell the row is for (its own paired blocks and per-block sd)."""
    family: FamilyName = "secondary"
    blocks_per_cell: int
    """Paired blocks the cell's pooled comparison actually used."""
    alpha_each: float | None = None
    """The level the row is computed at: alpha / m of the metric's family (Holm's first step)."""
    sd_diff: float | None = None
    """Sd of this cell's per-block differences (counts and costs)."""
    test: str = ""
    """The test the row describes."""
    detectable: float | None
    """Smallest |Δ| this cell's comparison detects with 80% power at alpha_each."""
    detectable_note: str | None = None
    effect: float | None
    """The effect the repeats-needed figure is for."""
    repeats_needed: int | None
    repeats_note: str | None = None
    cost_usd: float | None
    """What a run with that many repeats would cost at this run's mean spend per session."""


class LayerUse(Doc):
    layer: str
    status: Literal["never loaded", "loaded, never used", "used", "not assessed"]
    evidence: str


class SequentialReport(Doc):
    """report.json's ``sequential`` block: the anytime-valid analysis of an adaptive run or of a peek."""

    mode: Literal["adaptive", "peek"]
    """``adaptive``: the run stopped by its own rule; ``peek``: a fixed run read before it was complete."""
    primary: str
    control: str
    alpha: float
    min_effect: float
    draw_beta: float
    max_repeats: int
    stopped: str | None
    """decided, max-repeats, budget, interrupted, rate-limited; None while the run goes on."""
    looks: list[Look]
    decisions: dict[str, dict[str, object]]
    """Per cell: decision, reason, round (the look it was decided at), blocks."""
    caveats: list[str]
    replans: list[Replan] = Field(default_factory=list)
    """A piece run's rebuilt rounds (adaptive.json's ``replans``)."""
    inert: dict[str, int] = Field(default_factory=dict)
    """Tasks no longer scheduled (every cell scored the same on them) → the round after which (``inert``)."""


class ProvenanceLine(Doc):
    layer: str
    sessions: int
    used_sessions: int
    loaded_sessions: int | None = None
    sentence: str


class Provenance(Doc):
    """What the user's own history (``ablate usage``) says about the stripped layers: context, not evidence."""

    heading: str
    sessions: int
    """Sessions of the run's repository read from the config dir's history (at most the last 500)."""
    lines: list[ProvenanceLine]


class Report(Doc):
    """``report.json``: the parts of the sections (:data:`ablate.report.sections.SECTIONS`); a section's own
    key that is not a field here is kept as is (``extra``), so a new section needs no field."""

    model_config = ConfigDict(extra="allow")

    schema_version: Literal[1] = REPORT_SCHEMA_VERSION
    generated_by: str
    alpha: float
    run: RunInfo
    n: Counts
    comparisons: list[Comparison]
    ranking: list[RankEntry]
    ranking_key: str
    caveats: list[Caveat]
    no_op_cells: list[NoOpCell]
    excluded_items: list[ExcludedItem]
    cells: list[CellSummary]
    task_table: list[TaskCellCell]
    power: list[PowerRow]
    regressions: list[Comparison]
    """Real comparisons where stripping a layer made the result better."""
    regressions_not_real: int = 0
    """Per-task changes in that direction that are not real (counted, not listed)."""
    layer_use: list[LayerUse]
    graders: list[GraderRate] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Named checks (plugin-eval graders) per task and cell; absent when no task has any."""
    primary_metric: str = "pitfall_free"
    families: list[Family] = Field(default_factory=list)
    holdout: list[HoldoutFinding] = Field(default_factory=list)
    holdout_note: str = ""
    """Why the dev/holdout check found nothing to report, or what it checked."""
    fingerprints: dict[str, object]
    probe: dict[str, object] | None = None
    sequential: SequentialReport | None = Field(default=None, exclude_if=lambda v: v is None)
    """The anytime-valid analysis (adaptive run, or a fixed run read early; absent for a complete fixed run): the
    only source of ``real`` then, on the pooled comparisons of its primary outcome (the rest is description)."""
    carried: list[CellCarried] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Per cell, what its sessions carried on the wire; absent when no session crossed ablate's forwarder."""
    provenance: Provenance | None = Field(default=None, exclude_if=lambda v: v is None)
    """Built only when the manifest's config dir has readable history of the run's repository."""
    noise_floor: list[NoiseFloorRow] = Field(default_factory=list, exclude_if=lambda v: not v)
    """``--aa`` runs: the A/A differences per metric, the run's measured noise floor."""
    pieces: list[PieceRow] = Field(default_factory=list, exclude_if=lambda v: not v)
    """A piece run (``ablate run --pieces``): each piece's effect, verdict and cost; absent for a layer run."""
    piece_design: PieceDesignInfo | None = Field(default=None, exclude_if=lambda v: v is None)
    """How the per-piece effects were estimated; absent for a layer run."""
    inputs_sha256: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """:func:`ablate.report.digest.inputs_digest` of the run folder as the report read it: ``ablate gate``
    rebuilds a report whose folder no longer has this digest (None: a report written before it was kept)."""

"""``compare.json``: the typed report of one comparison (the keys are those written before it was typed)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from ablate.core.specs import Spec
from ablate.report.model import SequentialReport

COMPARE_SCHEMA_VERSION: Literal[1] = 1


class TaskRef(Spec):
    id: str
    split: str
    sha256: str


class ArmInfo(Spec):
    """One arm as run: its name, the exact bytes' fingerprint and where they came from."""

    name: str
    fingerprint: str
    source: str
    source_sha256: str
    op: str
    """original, move or duplicate."""
    block: str | None = None
    bytes: int
    spec: str
    """The arm as the user wrote it."""


class Estimate(Spec):
    sessions: int
    calls: int
    usd: float | None = None
    basis: str

    def line(self) -> str:
        cost = "unknown cost" if self.usd is None else f"~${self.usd:.2f}"
        return f"{self.sessions} sessions, ~{self.calls} API calls, {cost} ({self.basis})"


class ArmRateRow(Spec):
    """An arm's pitfall-free rate (Wilson 95%) and mean turns, pooled (``task`` None) or for one task."""

    arm: str
    task: str | None = None
    n: int
    passed: int
    rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    turns_mean: float | None = None


class ContrastRow(Spec):
    """``b`` against ``a`` on one metric, paired on (task, repeat) blocks; ``delta`` = b − a."""

    a: str
    b: str
    metric: str
    task: str | None = None
    n: int
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p: float | None = None
    improved: int
    regressed: int
    p_adjusted: float | None = None
    real: bool = False
    scope: str = "all"
    method: str = ""
    notes: list[str] = Field(default_factory=list)


class CheckRow(Spec):
    name: str
    passed: bool
    detail: str


class VerdictRow(Spec):
    """Is ``arm`` better than the baseline: every check, and one line for people."""

    arm: str
    baseline: str
    better: bool
    failed: list[str] = Field(default_factory=list)
    checks: list[CheckRow] = Field(default_factory=list)
    line: str


class EffectRow(Spec):
    """One part of the layout decomposition (pitfall-free rate)."""

    a: str
    b: str
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_adjusted: float | None = None
    real: bool = False


class RolesInfo(Spec):
    """Which arm plays which role of the layout experiment, and how that was found."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    original: str
    moved: str
    duplicated: str
    found_by: Literal["block", "roles option", "content"] = Field(alias="from")

    def line(self) -> str:
        """``roles: original = a, moved = b, duplicated = c (recognised from the content)``."""
        how = {
            "block": "made by --block",
            "roles option": "given by --roles",
            "content": "recognised from the content",
        }
        return (
            f"roles: original = {self.original}, moved = {self.moved}, duplicated = {self.duplicated} "
            f"({how[self.found_by]})"
        )


class Claims(Spec):
    can: list[str] = Field(default_factory=list)
    cannot: list[str] = Field(default_factory=list)


class Excluded(Spec):
    """Items without an answer, left out of every contrast."""

    count: int = 0
    by_status: dict[str, int] = Field(default_factory=dict)
    items: list[str] = Field(default_factory=list)
    """The first 200 of them."""


class LooksInfo(Spec):
    """How often this task set was looked at before (multiple looks inflate false positives)."""

    earlier_same_tasks: int = 0
    earlier_ids: list[str] = Field(default_factory=list)
    holdout_uses: dict[str, int] = Field(default_factory=dict)
    unreadable_lines: int = 0
    statement: str


class FingerprintChange(Spec):
    """An arm whose file changed in place, between runs or during this one."""

    arm: str
    source: str
    earlier_compare_id: str | None = None
    earlier_fingerprint: str | None = None
    fingerprint: str | None = None
    when: str


class ModelRows(Spec):
    """One model's rows of a comparison of several (``--models``): the top level's, from its sessions alone."""

    model: str
    arm_rates: list[ArmRateRow]
    contrasts: list[ContrastRow]
    verdicts: list[VerdictRow]


class CompareReport(Spec):
    """compare.json."""

    schema_version: Literal[1] = COMPARE_SCHEMA_VERSION
    compare_id: str
    ablate_version: str
    started_at: str
    finished_at: str
    executor: str
    model: str
    layer: str | None = None
    """The file layer the arms replace (claude-code executor only)."""
    tier: str
    repeats: int
    seed: int
    tasks: list[TaskRef]
    task_set_sha256: str
    arms: list[ArmInfo]
    baseline: str
    items: int
    estimate: Estimate
    spent_usd: float
    spent_basis: str = ""
    arm_rates: list[ArmRateRow] = Field(default_factory=list)
    contrasts: list[ContrastRow] = Field(default_factory=list)
    holdout_contrasts: list[ContrastRow] = Field(default_factory=list)
    decomposition: dict[str, EffectRow] | None = None
    """position (moved − original), repetition (duplicated − moved), total (duplicated − original)."""
    roles: RolesInfo | None = None
    regressions: list[ContrastRow] = Field(default_factory=list)
    verdicts: list[VerdictRow] = Field(default_factory=list)
    claims: Claims = Field(default_factory=Claims)
    excluded: Excluded = Field(default_factory=Excluded)
    looks: LooksInfo
    fingerprint_changes: list[FingerprintChange] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    execution: dict[str, Any] = Field(default_factory=dict)
    models: list[ModelRows] = Field(default_factory=list, exclude_if=lambda v: not v)
    """``--models``: each model's rows (the top level's are the first model's); absent for one model."""
    model_interactions: list[dict[str, Any]] = Field(default_factory=list, exclude_if=lambda v: not v)
    """``--models``: per arm and model against the first, the model × arm interaction (report.json's rows)."""
    sequential: SequentialReport | None = Field(default=None, exclude_if=lambda v: v is None)
    """An adaptive comparison: its looks, each arm's decision and reason, how it stopped, the caveats of a
    sequential design (absent for a fixed comparison, whose compare.json is unchanged)."""
    """What the executor reports (request_check, cell_check, run folder, run_outcome): its own shape."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

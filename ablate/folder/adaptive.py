"""adaptive.json: the stopping rule an adaptive run started with and every look at its results (written by
``ablate.run.adaptive`` after every round, figures from ``ablate.stats.adaptive``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import orjson
from pydantic import Field

from ablate.core.constants import DEFAULT_DRAW_BETA
from ablate.core.errors import RunFolderError
from ablate.core.fsutil import atomic_write_bytes
from ablate.core.specs import Spec, read_json_object, require_schema
from ablate.folder.layout import RunFolder, RunManifest

ADAPTIVE_FILE = "adaptive.json"
ADAPTIVE_SCHEMA_VERSION: Literal[1] = 1
#: The primary outcome the stopping rule reads.
PRIMARY = "pitfall_free"

StopReason = Literal["decided", "max-repeats", "budget", "interrupted", "rate-limited", "tasks-inert"]


class AdaptiveOptions(Spec):
    """The stopping rule of an adaptive run (fixed when the run starts; a resume keeps them)."""

    max_repeats: int = Field(ge=1)
    """Rounds at most: a cell still undecided then stops undecided."""
    min_effect: float = Field(gt=0, lt=1)
    """The smallest difference in the primary rate worth finding; smaller ones are a draw."""
    alpha: float = Field(gt=0, lt=1)
    """Family-wise error of the "real" marks (Holm over all comparisons of the run)."""
    draw_beta: float = Field(default=DEFAULT_DRAW_BETA, gt=0, lt=0.5)
    """Largest chance that a cell whose effect is at least min-effect is called "no effect"."""
    budget_usd: float | None = Field(default=None, ge=0)
    """No round starts once the recorded spend reaches this."""


class CellLook(Spec):
    """One cell against the control at one look."""

    blocks: int
    """Paired blocks compared (both items complete and not flagged)."""
    gained: int
    """Blocks where only the cell was pitfall-free."""
    lost: int
    """Blocks where only the control was."""
    delta: float | None
    """Cell rate − control rate on those blocks."""
    e_value: float
    """The beta-binomial mixture e-value now."""
    p_anytime: float
    """1 / the largest e-value so far (capped at 1)."""
    p_holm: float
    """Holm-adjusted over every comparison of the run."""
    cs_low: float | None
    """Confidence sequence for delta at 1 − α (None: empty)."""
    cs_high: float | None
    futility_up: float = 1.0
    """Largest e-value so far against "the effect is at least +min-effect" (the "no effect" decision reads it
    and ``futility_down``: both at least 1 / draw_beta)."""
    futility_down: float = 1.0
    """Largest e-value so far against "the effect is at most −min-effect"."""
    draw_low: float | None = None
    draw_high: float | None = None
    """Runs recorded before the futility e-processes: the confidence sequence their "no effect" read."""
    decision: Literal["real", "no-effect", "undecided"]
    reason: str
    """The decision in words, with the figure that made it."""
    turns_blocks: int = 0
    """Secondary (never decides): blocks where both items report turns."""
    turns_delta: float | None = None
    """Mean paired difference in turns (cell − control)."""
    turns_cs_low: float | None = None
    """Confidence sequence for it at 1 − α (turns lie in [0, max turns], so differences are bounded)."""
    turns_cs_high: float | None = None


class PieceLook(Spec):
    """One piece of an adaptive piece run at one look (:func:`ablate.stats.screening_sequential.look`)."""

    blocks: int
    """Blocks that gave the piece a contrast: complete design blocks (every row run on one task and repeat), and
    after a re-plan the blocks that ran its one-out cell beside the control."""
    effect: float | None
    """The mean block contrast so far: with the piece − without it (None before any complete block)."""
    p_anytime: float
    p_holm: float
    """Holm-adjusted over the run's pieces."""
    decision: Literal["real", "no-effect", "undecided"]
    verdict: Literal["helps", "hurts", "draw", "undecided"]
    """The report's word: a real effect helps or hurts by its sign, no effect of interest is a draw."""
    reason: str = ""
    """The decision in words, with the figure that made it."""


class Look(Spec):
    """The analysis after one round."""

    round: int
    """Rounds complete (1 = the first)."""
    at: str
    """ISO-8601 UTC time of the look."""
    sessions: int
    """Complete items of the run so far."""
    spend_usd: float
    """Recorded spend so far."""
    analysis_s: float
    """Wall time of the analysis."""
    cells: dict[str, CellLook]
    pieces: dict[str, PieceLook] = Field(default_factory=dict, exclude_if=lambda v: not v)
    """A piece run: each piece's figures and decision (its cells are then not compared one by one)."""


class Replan(Spec):
    """``replans[]``: from round ``round`` + 1 on (repeat ``round``), a piece run's rounds test only ``pieces`` (the
    rest decided and kept) on one-out rounds: the control and each piece's one-out cell (docs/PIECES.md#runs)."""

    round: int
    """The look after which the design was rebuilt (= the first repeat it runs)."""
    pieces: list[str]


class AdaptiveState(Spec):
    """adaptive.json."""

    schema_version: Literal[1] = ADAPTIVE_SCHEMA_VERSION
    options: AdaptiveOptions
    control: str
    """The control cell (strips nothing)."""
    primary: str = PRIMARY
    looks: list[Look] = Field(default_factory=list)
    stopped: StopReason | None = None
    """Why the run stopped (None: not yet)."""
    stopped_at: str | None = None
    inert: dict[str, int] = Field(default_factory=dict, exclude_if=lambda v: not v)
    """Tasks no longer scheduled because every cell scored the same in the first
    :func:`~ablate.stats.adaptive.inert_after` blocks → the look after which they were dropped."""
    replans: list[Replan] = Field(default_factory=list, exclude_if=lambda v: not v)
    """A piece run's rebuilt designs, in order (empty: every round ran the whole design)."""

    def decisions(self) -> dict[str, CellLook]:
        """Each cell's latest figures and decision."""
        return dict(self.looks[-1].cells) if self.looks else {}

    def piece_decisions(self) -> dict[str, PieceLook]:
        """A piece run: each piece's latest figures and decision (empty for a layer run)."""
        return dict(self.looks[-1].pieces) if self.looks else {}


def state_path(folder: RunFolder) -> Path:
    return folder.root / ADAPTIVE_FILE


def read_state(folder: RunFolder) -> AdaptiveState | None:
    """adaptive.json, or None for a fixed run."""
    data = read_json_object(state_path(folder))
    if data is None:
        return None
    require_schema(
        data, state_path(folder), ADAPTIVE_SCHEMA_VERSION, "adaptive", hint="start the adaptive run again"
    )
    try:
        return AdaptiveState.model_validate(data)
    except ValueError as exc:
        raise RunFolderError(f"{state_path(folder)}: invalid adaptive state: {exc}") from exc


def write_state(folder: RunFolder, state: AdaptiveState) -> None:
    data = orjson.dumps(state.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
    atomic_write_bytes(state_path(folder), data + b"\n")


def control_of(manifest: RunManifest) -> str:
    """The cell that strips nothing and cuts no piece (the first cell when every cell removes something)."""
    return next((c.id for c in manifest.cells if not c.stripped and not c.pieces), manifest.cells[0].id)

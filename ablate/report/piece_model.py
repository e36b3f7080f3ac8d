"""The per-piece part of ``report.json`` (a piece run, ``ablate run --pieces``): one row per piece and the
design it was estimated from. Kept apart from :mod:`ablate.report.model` so the report's model gains two
fields, not a section."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Removal(_Doc):
    """What deleting the piece from the full setup does: the one-out confirmation stage's answer."""

    effect: float | None
    """The full setup minus the full setup without the piece, on the stage's blocks (positive when keeping it
    raises the metric: the sign of the piece's ``effect``)."""
    ci_low: float | None
    ci_high: float | None
    p_adjusted: float | None
    """Holm across the run's confirmed pieces (a family of its own)."""
    verdict: Literal["helps", "hurts", "draw", "undecided"]
    blocks: int = 0
    """The (task, repeat) blocks compared: the control and the piece's cell both scored."""
    reason: str | None = None
    """Why there is no p or interval."""


class PieceRow(_Doc):
    """One piece: its effect on the primary metric (on − off: what keeping the piece does) and its cost."""

    id: str
    layer: str = ""
    kind: str = ""
    tokens: int
    """What the piece adds to the first request of every session (4 characters a token)."""
    tokens_source: str = "estimate"
    effect: float | None
    """Mean with the piece minus mean without it, on the primary metric (a rate for pass/fail metrics). The
    opposite sign of a layer comparison's Δ (cell − control), which removes the layer."""
    ci_low: float | None
    ci_high: float | None
    p: float | None
    p_adjusted: float | None
    """Holm across the run's pieces."""
    verdict: Literal["helps", "hurts", "draw", "undecided"]
    tokens_per_point: float | None = None
    """Context per session for the effect it has: tokens ÷ |effect| in percentage points (pass/fail metric)
    or metric units; only for a piece that helps (one that hurts costs context for nothing; a draw buys
    nothing)."""
    reason: str | None = None
    """Why the effect has no interval or p (the model fits every session exactly, too few sessions)."""
    removal: Removal | None = None
    """A confirmed piece (real at screening, or named with ``--confirm``): its one-out answer, the row's
    headline. None for a piece the run did not confirm."""


class PieceDesignInfo(_Doc):
    """How the per-piece effects were estimated."""

    kind: Literal["screening", "one-out"]
    construction: str
    metric: str
    """The primary metric the effects are on."""
    method: str
    """The test (OLS with block fixed effects; the null-variance form for a pass/fail metric)."""
    sessions: int
    blocks: int
    df: int
    alpha: float
    min_effect: float
    cost_unit: str
    """What ``tokens_per_point`` divides by: ``percentage point`` or the metric's unit."""
    decided_by: Literal["fixed", "anytime"] = "fixed"
    """``anytime``: an adaptive run; each verdict and adjusted p come from the anytime-valid look it stopped
    on (adaptive.json), the effect and interval from the fixed-n fit, as description."""

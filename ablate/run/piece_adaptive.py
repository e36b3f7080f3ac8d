"""The look of an adaptive piece run (``ablate run --pieces --adaptive``): per piece, not per cell.

Every round runs every row of the design on every task (a block needs them all), so the driver
(:mod:`ablate.run.adaptive`) stops the whole run, not cells: when every piece is decided ``real`` or
``no-effect``. The figures are :func:`ablate.stats.screening_sequential.look`'s — anytime-valid on the
pass/fail primary outcome (pitfall-free), each complete block one contrast per piece, in the order the blocks
completed (the latest finish time of their items, :func:`ablate.stats.adaptive.block_time`; plan order breaks
ties), Holm over the pieces.
"""

from __future__ import annotations

from collections.abc import Sequence

from ablate.folder.adaptive import AdaptiveOptions, PieceLook
from ablate.folder.design import PieceDesignRecord
from ablate.folder.layout import RunManifest
from ablate.folder.result import ItemResult
from ablate.stats.adaptive import block_time, primary_outcome
from ablate.stats.multiplicity import holm
from ablate.stats.screening import design_of
from ablate.stats.screening_inference import Outcome
from ablate.stats.screening_sequential import look


def piece_outcomes(
    manifest: RunManifest, record: PieceDesignRecord, results: Sequence[ItemResult]
) -> tuple[list[Outcome], list[tuple[str, int]]]:
    """The design cells' primary outcomes and the blocks (task, repeat) in the order they completed."""
    row_of = record.row_of()
    outcomes: list[Outcome] = []
    finished: dict[tuple[str, int], list[str | None]] = {}
    for r in results:
        v = primary_outcome(r)
        if v is None or r.cell not in row_of or not record.screens(r.repeat):
            continue
        outcomes.append(Outcome(row_of[r.cell], r.task, r.repeat, float(v)))
        finished.setdefault((r.task, r.repeat), []).append(r.finished_at)
    task_index = {t.id: i for i, t in enumerate(manifest.tasks)}
    order = sorted(finished, key=lambda b: (block_time(*finished[b]), b[1], task_index.get(b[0], 0)))
    return outcomes, order


def piece_looks(
    manifest: RunManifest, results: Sequence[ItemResult], options: AdaptiveOptions
) -> dict[str, PieceLook]:
    """Each piece's anytime-valid figures and decision from the results so far (pure; no files)."""
    record = manifest.design
    if record is None:
        return {}
    outcomes, order = piece_outcomes(manifest, record, results)
    got = look(
        design_of(record), outcomes, order, alpha=options.alpha, min_effect=options.min_effect,
        beta=options.draw_beta, max_blocks=options.max_repeats * len(manifest.tasks),
    )  # fmt: skip
    adjusted = holm(got.p_anytime)
    return {
        p.id: PieceLook(
            blocks=got.blocks_used,
            effect=effect,
            p_anytime=p_any,
            p_holm=p_adj,
            decision=decision,
            verdict=verdict,
            reason=_reason(decision, verdict, effect, p_adj, got.blocks_used, options),
        )
        for p, effect, p_any, p_adj, decision, verdict in zip(
            record.pieces, got.effects, got.p_anytime, adjusted, got.decisions, got.verdicts(), strict=True
        )
    }


def _reason(
    decision: str, verdict: str, effect: float | None, p_holm: float, blocks: int, options: AdaptiveOptions
) -> str:
    """A piece's decision in words, with the figure that made it."""
    if effect is None:
        return "no complete block yet"
    said = f"effect {100 * effect:+.0f} pts over {blocks} blocks"
    if decision == "real":
        return f"{verdict}: {said}, Holm anytime p {p_holm:.3g} ≤ α {options.alpha}"
    if decision == "no-effect":
        return f"draw: {said}; an effect of ±{100 * options.min_effect:.0f} pts or more is rejected both ways"
    return f"undecided: {said}, Holm anytime p {p_holm:.3g}"

"""The look of an adaptive piece run, per piece, not per cell: :func:`ablate.stats.screening_sequential.look`'s
anytime-valid figures, Holm over the pieces (re-plans: docs/ARCHITECTURE.md#replan)."""

from __future__ import annotations

from collections.abc import Sequence

from ablate.folder.adaptive import AdaptiveOptions, AdaptiveState, PieceLook, Replan
from ablate.folder.design import PieceDesignRecord
from ablate.folder.layout import RunManifest
from ablate.folder.result import ItemResult
from ablate.stats.adaptive import block_time, primary_outcome
from ablate.stats.multiplicity import holm
from ablate.stats.screening import design_of
from ablate.stats.screening_inference import Outcome
from ablate.stats.screening_sequential import look, should_replan


def piece_outcomes(
    manifest: RunManifest,
    record: PieceDesignRecord,
    results: Sequence[ItemResult],
    one_out_from: int | None = None,
) -> tuple[list[Outcome], list[Outcome], list[tuple[str, int]]]:
    """The design rows' primary outcomes, those of the one-out rounds from ``one_out_from`` on (rows of the
    one-out design), and the (task, repeat) blocks in the order they completed."""
    rows, out = record.row_of(), record.one_out_cells() or {}
    one_out = {
        record.rows[0].cell: 0,
        **{out[p.id]: j + 1 for j, p in enumerate(record.pieces) if p.id in out},
    }
    outcomes: list[Outcome] = []
    removals: list[Outcome] = []
    finished: dict[tuple[str, int], list[str | None]] = {}
    for r in results:
        v = primary_outcome(r)
        late = one_out_from is not None and r.repeat >= one_out_from
        row = (one_out if late else rows).get(r.cell)
        if v is None or row is None or not record.screens(r.repeat):
            continue
        (removals if late else outcomes).append(Outcome(row, r.task, r.repeat, float(v)))
        finished.setdefault((r.task, r.repeat), []).append(r.finished_at)
    task_index = {t.id: i for i, t in enumerate(manifest.tasks)}
    order = sorted(finished, key=lambda b: (block_time(*finished[b]), b[1], task_index.get(b[0], 0)))
    return outcomes, removals, order


def piece_looks(
    manifest: RunManifest,
    results: Sequence[ItemResult],
    options: AdaptiveOptions,
    one_out_from: int | None = None,
) -> dict[str, PieceLook]:
    """Each piece's anytime-valid figures and decision from the results so far."""
    record = manifest.design
    if record is None:
        return {}
    outcomes, removals, order = piece_outcomes(manifest, record, results, one_out_from)
    design = design_of(record)
    got = look(
        design, outcomes, order, alpha=options.alpha, min_effect=options.min_effect,
        beta=options.draw_beta, max_blocks=options.max_repeats * len(manifest.tasks), removals=removals,
        one_out_test=design.drawn is not None and record.one_out_cells() is not None,
    )  # fmt: skip
    adjusted = holm(got.p_anytime)
    return {
        p.id: PieceLook(
            blocks=blocks,
            effect=effect,
            p_anytime=p_any,
            p_holm=p_adj,
            decision=decision,
            verdict=verdict,
            reason=_reason(decision, verdict, effect, p_adj, blocks, options),
        )
        for p, effect, p_any, p_adj, decision, verdict, blocks in zip(
            record.pieces,
            got.effects,
            got.p_anytime,
            adjusted,
            got.decisions,
            got.verdicts(),
            got.blocks,
            strict=True,
        )
    }


def next_replan(manifest: RunManifest, state: AdaptiveState, done: int) -> Replan | None:
    """The re-plan after round ``done``'s look (the pieces still undecided) when
    :func:`~ablate.stats.screening_sequential.should_replan` says so, else None."""
    record = manifest.design
    if record is None or record.one_out_cells() is None or not state.looks or state.looks[-1].round != done:
        return None
    left = [p for p, v in state.piece_decisions().items() if v.decision == "undecided"]
    tested = state.replans[-1].pieces if state.replans else record.piece_ids()
    return (
        Replan(round=done, pieces=left) if should_replan(design_of(record), len(tested), len(left)) else None
    )


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

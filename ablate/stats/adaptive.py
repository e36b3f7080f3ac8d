"""The statistics of an adaptive run's look: each cell against the control on the paired blocks, in the order
they completed, with the anytime-valid figures of :mod:`ablate.stats.sequential`. :func:`analyse` is pure; the
adaptive driver calls it after every round and the report at a peek. Pitfall-free decides; turns (bounded by
the run's largest ``--max-turns``) are described, never decide."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from scipy import stats as sps

from ablate.folder.adaptive import AdaptiveOptions, CellLook
from ablate.folder.layout import RunManifest
from ablate.folder.result import ItemResult
from ablate.stats.multiplicity import holm_adjust
from ablate.stats.sequential import (
    DECISIONS,
    anytime_p,
    betting_cs,
    decide,
    discordant_path,
    futility_log_e,
    prior_for,
)


def primary_outcome(result: ItemResult) -> bool | None:
    """Pitfall-free, or None when the item does not count (failed, or flagged by its provenance)."""
    return None if not result.complete or result.flags else not any(v for v in result.pitfall_hits.values())


def _turns(result: ItemResult) -> float | None:
    return None if primary_outcome(result) is None or result.turns is None else float(result.turns)


def paired_outcomes(
    manifest: RunManifest,
    results: Sequence[ItemResult],
    cell: str,
    control: str,
    value: Callable[[ItemResult], Any] = primary_outcome,
) -> tuple[list[Any], list[Any]]:
    """The cell's and the control's values (default: the primary outcome) on their common blocks, in the order
    the blocks completed (:func:`block_time`): the anytime figures are maxima over the path that happened in
    time; plan order breaks ties and places untimed results first, neither depending on an outcome, which
    keeps each e-process a test (super)martingale (docs/ARCHITECTURE.md#statistics)."""
    got: dict[tuple[str, str, int], tuple[Any, str | None]] = {}
    for r in results:
        v = value(r)
        if v is not None:
            got[(r.task, r.cell, r.repeat)] = (v, r.finished_at)
    blocks: list[tuple[tuple[float, int, int], Any, Any]] = []
    for rep in sorted({r for (_, _, r) in got}):
        for ti, t in enumerate(manifest.tasks):
            a, b = got.get((t.id, cell, rep)), got.get((t.id, control, rep))
            if a is not None and b is not None:
                blocks.append(((block_time(a[1], b[1]), rep, ti), a[0], b[0]))
    blocks.sort(key=lambda blk: blk[0])
    return [blk[1] for blk in blocks], [blk[2] for blk in blocks]


def inert_after(min_effect: float, beta: float) -> int:
    """The blocks without a discordant one after which a task is dropped as telling the cells nothing, at error
    β: n = ⌈ln β / ln(1 − d)⌉, the geometric distribution's 1 − β quantile (why: docs/ARCHITECTURE.md#inert-tasks)."""
    return int(sps.geom.ppf(1.0 - beta, min_effect))


def discordance(values: Mapping[tuple[str, str, int], Any]) -> dict[str, tuple[int, int]]:
    """Per task of ``values`` ((task, cell, repeat) → a session's outcome): its blocks (repeats with at least two
    cells scored) and how many of them are discordant (the cells' outcomes not all equal)."""
    seen: dict[tuple[str, int], list[Any]] = {}
    for (task, _cell, repeat), v in values.items():
        seen.setdefault((task, repeat), []).append(v)
    out: dict[str, tuple[int, int]] = {}
    for (task, _repeat), vs in seen.items():
        blocks, discordant = out.get(task, (0, 0))
        block = len(vs) >= 2
        out[task] = (blocks + block, discordant + (block and len(set(vs)) > 1))
    return out


def block_time(*finished_at: str | None) -> float:
    """When a block was complete: the latest of its items' finish times (POSIX seconds; −inf when an item
    has none, so such blocks keep plan order ahead of the timed ones)."""
    try:
        return max(datetime.fromisoformat(f or "").timestamp() for f in finished_at)
    except ValueError:  # an item without a finish time (""), or one that is not an ISO time
        return float("-inf")


def analyse(
    manifest: RunManifest, results: Sequence[ItemResult], options: AdaptiveOptions, control: str
) -> dict[str, CellLook]:
    """Every cell's anytime-valid figures and decision from the results so far (pure; no files)."""
    cells = [c.id for c in manifest.cells if c.id != control]
    if not cells:
        return {}
    pairs = [paired_outcomes(manifest, results, cell, control) for cell in cells]
    diffs = [np.asarray(xs, dtype=np.float64) - np.asarray(ys, dtype=np.float64) for xs, ys in pairs]
    cs = _last_bounds(diffs, 1.0, options.alpha)
    # the secondary outcome, turns: bounded by the run's largest --max-turns (a session stops there)
    bound = float(max([manifest.max_turns, *(t.max_turns or 0 for t in manifest.tasks)]))
    turn_pairs = [paired_outcomes(manifest, results, cell, control, _turns) for cell in cells]
    tdiffs = [np.asarray(xs, dtype=np.float64) - np.asarray(ys, dtype=np.float64) for xs, ys in turn_pairs]
    in_range = [d if bound > 0 and not np.any(np.abs(d) > bound) else d[:0] for d in tdiffs]
    tcs = _last_bounds(in_range, bound, options.alpha)
    figures: list[dict[str, Any]] = []
    for i, (xs, ys) in enumerate(pairs):
        f = _figures(xs, ys, cs[i], options.min_effect)
        f["turns_blocks"] = len(tdiffs[i])
        if len(in_range[i]):
            f.update(
                turns_delta=round(float(in_range[i].mean()), 6),
                turns_cs_low=tcs[i][0],
                turns_cs_high=tcs[i][1],
            )
        figures.append(f)
    p = np.array([f["p_anytime"] for f in figures], dtype=np.float64)
    up = np.log([f["futility_up"] for f in figures])
    down = np.log([f["futility_down"] for f in figures])
    codes = decide(p, up, down, alpha=options.alpha, beta=options.draw_beta)
    adjusted = holm_adjust(p)
    out: dict[str, CellLook] = {}
    for i, cell in enumerate(cells):
        f = figures[i]
        decision = DECISIONS[int(codes[i])]
        f["p_holm"] = float(adjusted[i])
        out[cell] = CellLook(**f, decision=decision, reason=_reason(decision, f, options))
    return out


Bounds = tuple[float | None, float | None]


def _last_bounds(diffs: Sequence[np.ndarray[Any, Any]], bound: float, alpha: float) -> list[Bounds]:
    """The betting confidence sequence's bounds after the last block of each series in [−bound, bound];
    series of one length are computed together (one vectorised pass instead of one per cell)."""
    out: list[Bounds] = [(None, None)] * len(diffs)
    for n in sorted({len(d) for d in diffs if len(d)}):
        idx = [i for i, d in enumerate(diffs) if len(d) == n]
        lo, hi = betting_cs(np.stack([diffs[i] for i in idx]), -bound, bound, alpha, every=n)
        for k, i in enumerate(idx):
            out[i] = (_num(lo[k, -1]), _num(hi[k, -1]))
    return out


def _figures(xs: list[bool], ys: list[bool], cs: Bounds, min_effect: float) -> dict[str, Any]:
    x, y = np.asarray(xs, dtype=bool), np.asarray(ys, dtype=bool)
    n = len(x)
    if n == 0:
        return dict(
            blocks=0, gained=0, lost=0, delta=None, e_value=1.0, p_anytime=1.0,
            cs_low=None, cs_high=None, futility_up=1.0, futility_down=1.0,
        )  # fmt: skip
    path = discordant_path(x, y, prior_for(min_effect))
    up, down = futility_log_e(x.astype(np.float64) - y, min_effect)
    return dict(
        blocks=n,
        gained=int(np.sum(x & ~y)),
        lost=int(np.sum(~x & y)),
        delta=float(np.mean(x.astype(np.float64) - y)),
        e_value=float(np.exp(path[-1])),
        p_anytime=float(anytime_p(path)[-1]),
        cs_low=cs[0],
        cs_high=cs[1],
        futility_up=float(np.exp(up[-1])),
        futility_down=float(np.exp(down[-1])),
    )


def _num(v: float) -> float | None:
    return None if np.isnan(v) else round(float(v), 6)


def _reason(decision: str, f: dict[str, Any], options: AdaptiveOptions) -> str:
    d = f"{100 * options.min_effect:.0f} pts"  # rate changes in pts, as the report
    bar = 1.0 / options.draw_beta
    if decision == "real":
        return (
            f"real: Holm-adjusted anytime p {f['p_holm']:.4g} <= {options.alpha} "
            f"({f['gained']} blocks gained, {f['lost']} lost of {f['blocks']})"
        )
    if decision == "no-effect":
        return (
            f"no effect of interest: effects of +{d} or more and of -{d} or less both rejected "
            f"(e-values {f['futility_up']:.3g} and {f['futility_down']:.3g} >= {bar:.3g}, "
            f"delta {100 * f['delta']:+.1f} pts) after {f['blocks']} blocks"
        )
    if f["blocks"] == 0:
        return "undecided: no paired blocks yet"
    return (
        f"undecided: anytime p {f['p_holm']:.3g} (Holm) > {options.alpha}, and the e-values against "
        f"an effect of +{d} or -{d} ({f['futility_up']:.3g}, {f['futility_down']:.3g}) have not both "
        f"reached {bar:.3g}"
    )

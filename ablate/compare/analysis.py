"""The statistics of a comparison (README.md's "Statistics" under ``ablate compare``): per-arm rates, paired
contrasts on (task, repeat) blocks, Holm, the decomposition and the verdict, all from :mod:`ablate.stats`. A
figure the data cannot give is None with the reason in ``notes``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ablate.compare.model import ArmRateRow, CheckRow, ContrastRow, EffectRow, VerdictRow
from ablate.folder.metrics import metric_named
from ablate.report.paired import Block, estimate, holm_real, not_computable, pair_blocks, paired_test
from ablate.stats.proportions import wilson
from ablate.stats.types import Interval

#: The metrics a comparison measures (names of the registry, :mod:`ablate.folder.metrics`).
METRICS: tuple[str, ...] = ("pitfall_free", "turns")
ALPHA = 0.05


@dataclass(frozen=True)
class Observation:
    """One answered item."""

    task: str
    arm: str
    repeat: int
    pitfall_free: bool
    turns: int | None

    def value(self, metric: str) -> float | None:
        v = self.pitfall_free if metric == "pitfall_free" else self.turns
        return None if v is None else float(v)


def arm_rates(obs: Sequence[Observation], arms: Sequence[str], tasks: Sequence[str]) -> list[ArmRateRow]:
    """Each arm's pitfall-free rate (Wilson 95%) and mean turns, pooled and per task."""
    out: list[ArmRateRow] = []
    for task in [None, *tasks]:
        for arm in arms:
            rows = [o for o in obs if o.arm == arm and (task is None or o.task == task)]
            k = sum(o.pitfall_free for o in rows)
            ci = wilson(k, len(rows))
            lo, hi = (ci.low, ci.high) if isinstance(ci, Interval) else (None, None)
            turns = [o.turns for o in rows if o.turns is not None]
            out.append(
                ArmRateRow(
                    arm=arm,
                    task=task,
                    n=len(rows),
                    passed=k,
                    rate=k / len(rows) if rows else None,
                    ci_low=lo,
                    ci_high=hi,
                    turns_mean=sum(turns) / len(turns) if turns else None,
                )
            )
    return out


def contrast(
    obs: Sequence[Observation],
    a: str,
    b: str,
    metric: str,
    *,
    tasks: Sequence[str] | None = None,
    task: str | None = None,
    seed: int = 0,
    scope: str = "all",
) -> ContrastRow:
    """``b`` − ``a`` on ``metric`` over the blocks of ``tasks`` (all when None) that both arms answered."""
    keep = set(tasks) if tasks is not None else None
    side: dict[str, dict[Block, float]] = {a: {}, b: {}}
    for o in obs:
        if o.arm in side and (keep is None or o.task in keep) and (v := o.value(metric)) is not None:
            side[o.arm][(o.task, o.repeat)] = v
    pairs = pair_blocks(side[b], side[a], sorted(side[a].keys() & side[b].keys()))
    res = paired_test(metric, pairs, seed=seed)
    kind = metric_named(metric)
    if kind.binary:  # discordant blocks: b pitfall-free where a was not, and the reverse
        improved, regressed = res.gained or 0, res.lost or 0
    else:  # blocks where b did better than a (fewer turns)
        better = 1.0 if kind.higher_is_better else -1.0
        diffs = [better * (y - x) for x, y in zip(pairs.control, pairs.cell, strict=True)]
        improved, regressed = sum(1 for d in diffs if d > 0), sum(1 for d in diffs if d < 0)
    fields = estimate(res)
    ci_method = fields.pop("ci_method")
    return ContrastRow(
        a=a,
        b=b,
        metric=metric,
        task=task,
        n=res.n_pairs,
        **fields,
        improved=improved,
        regressed=regressed,
        scope=scope,
        method=f"{res.method}; {ci_method or 'no interval'}",
        notes=sorted(not_computable(res)),
    )


def all_contrasts(
    obs: Sequence[Observation], arms: Sequence[str], tasks: Sequence[str], *, seed: int = 0
) -> list[ContrastRow]:
    """Every pair of arms (``b`` the later), pooled and per task, on each measured metric, Holm together."""
    out: list[ContrastRow] = []
    metrics = [m for m in METRICS if m != "turns" or any(o.turns is not None for o in obs)]
    for i, a in enumerate(arms):
        for b in arms[i + 1 :]:
            for metric in metrics:
                out.append(contrast(obs, a, b, metric, seed=seed))
                for t in tasks if len(tasks) > 1 else []:  # one task: the per-task contrast is the pooled one
                    out.append(contrast(obs, a, b, metric, tasks=[t], task=t, seed=seed))
    apply_holm(out)
    return out


def apply_holm(contrasts: Sequence[ContrastRow], alpha: float = ALPHA) -> None:
    """Fill ``p_adjusted`` (Holm) and ``real`` across the contrasts (one family)."""
    for c, (padj, real) in zip(contrasts, holm_real([(c.p, c.delta) for c in contrasts], alpha), strict=True):
        c.p_adjusted, c.real = padj, real


def find(
    contrasts: Sequence[ContrastRow], a: str, b: str, metric: str, task: str | None
) -> ContrastRow | None:
    return next(
        (c for c in contrasts if (c.a, c.b, c.metric, c.task, c.scope) == (a, b, metric, task, "all")), None
    )


def _effect(
    contrasts: Sequence[ContrastRow], a: str, b: str, metric: str, task: str | None
) -> EffectRow | None:
    """The effect ``b`` − ``a`` whichever order the pair was computed in; None when it was not."""
    sign, c = 1.0, find(contrasts, a, b, metric, task)
    if c is None:
        sign, c = -1.0, find(contrasts, b, a, metric, task)
    if c is None:
        return None
    lo, hi = (c.ci_low, c.ci_high) if sign > 0 else (c.ci_high, c.ci_low)  # b − a negates a − b: ends swap
    delta, ci_low, ci_high = (None if x is None else sign * x for x in (c.delta, lo, hi))
    return EffectRow(
        a=a, b=b, delta=delta, ci_low=ci_low, ci_high=ci_high, p_adjusted=c.p_adjusted, real=c.real
    )


def oriented(contrasts: Sequence[ContrastRow], a: str, b: str, metric: str = "pitfall_free") -> EffectRow:
    """The pooled effect ``b`` − ``a`` whichever order the pair was computed in."""
    return _effect(contrasts, a, b, metric, None) or EffectRow(a=a, b=b)


def decomposition(
    contrasts: Sequence[ContrastRow], original: str, moved: str, duplicated: str
) -> dict[str, EffectRow]:
    """moved − original = position; duplicated − moved = repetition; duplicated − original = total."""
    return {
        "position": oriented(contrasts, original, moved),
        "repetition": oriented(contrasts, moved, duplicated),
        "total": oriented(contrasts, original, duplicated),
    }


def _check(name: str, passed: bool, detail: str) -> CheckRow:
    return CheckRow(name=name, passed=passed, detail=detail)


def _verdict(arm: str, baseline: str, checks: Sequence[CheckRow]) -> VerdictRow:
    """The verdict of its checks: better when every one passed, the failed ones named, one line for people."""
    better = all(c.passed for c in checks)
    if better:
        line = f"{arm} is better than {baseline}: " + "; ".join(c.detail for c in checks)
    else:
        why = "; ".join(f"{c.name}: {c.detail}" for c in checks if not c.passed)
        line = f"{arm} is NOT shown better than {baseline} — failed {why}"
    failed = [c.name for c in checks if not c.passed]
    return VerdictRow(
        arm=arm, baseline=baseline, better=better, failed=failed, checks=list(checks), line=line
    )


def _pts(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f} pts"


def verdict(
    obs: Sequence[Observation],
    contrasts: Sequence[ContrastRow],
    baseline: str,
    arm: str,
    tasks: Sequence[str],
    holdout: Sequence[str],
    *,
    seed: int = 0,
) -> tuple[VerdictRow, ContrastRow | None]:
    """Better only if the pooled pitfall-free gain is real, nothing regressed significantly (a task's pass rate,
    the pooled turns) and the holdout tasks (there must be some) gain too; with the holdout contrast."""
    pooled = oriented(contrasts, baseline, arm)
    gain = _check(
        "significant gain",
        pooled.real and (pooled.delta or 0) > 0,
        f"pooled pitfall-free {_pts(pooled.delta)} [{_pts(pooled.ci_low)}, {_pts(pooled.ci_high)}], "
        f"Holm p={'n/a' if pooled.p_adjusted is None else f'{pooled.p_adjusted:.3g}'}",
    )
    regressions: list[str] = []
    for t in tasks:
        e = _effect(contrasts, baseline, arm, "pitfall_free", t)
        if e is not None and e.real and (e.delta or 0) < 0:
            regressions.append(f"{t} {_pts(e.delta)}")
    turns = oriented(contrasts, baseline, arm, "turns")
    if turns.real and (turns.delta or 0) > 0:
        regressions.append(f"turns +{turns.delta:.2f} per session")
    no_reg = _check(
        "nothing regressed",
        not regressions,
        "significant regressions: " + ", ".join(regressions) if regressions else "no significant regression",
    )
    hold: ContrastRow | None = None
    if not holdout:
        agree = _check("holdout agrees", False, 'no holdout tasks (mark some tasks split = "holdout")')
    else:
        hold = contrast(obs, baseline, arm, "pitfall_free", tasks=holdout, seed=seed, scope="holdout")
        ok = hold.delta is not None and hold.delta > 0
        agree = _check(
            "holdout agrees",
            ok,
            f"holdout ({len(holdout)} task(s), {hold.n} blocks) {_pts(hold.delta)} "
            f"[{_pts(hold.ci_low)}, {_pts(hold.ci_high)}]" + ("" if ok else ": not a gain"),
        )
    checks = (gain, no_reg, agree)
    return _verdict(arm, baseline, checks), hold

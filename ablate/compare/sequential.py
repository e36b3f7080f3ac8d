"""An adaptive comparison's statistics (``ablate compare --adaptive``): the arms are the cells of its run folder
(the first the control), and the looks of ``ablate run --adaptive``, read back as the run report reads them
(:func:`ablate.report.sequential.sequential_section`), replace the tier's fixed-n tests: each arm's pooled
pitfall-free contrast takes the anytime-valid p, Holm p and confidence sequence and is real only when decided
so; every other figure is description."""

from __future__ import annotations

from typing import Any

from ablate.compare.model import CheckRow, VerdictRow
from ablate.folder.adaptive import PRIMARY
from ablate.report.anytime import DESCRIPTIVE, anytime_figures
from ablate.report.model import SequentialReport


def sequential_stats(stats: dict[str, Any], seq: SequentialReport, baseline: str) -> dict[str, Any]:
    """``stats`` (:func:`ablate.compare.core.analyse`'s) rewritten for a sequential design, ``sequential`` added."""
    last = seq.looks[-1].cells if seq.looks else {}
    contrasts = []
    for c in stats["contrasts"]:
        look = last.get(c["b"]) if c["a"] == baseline else None
        if (
            c["task"] is None
            and c["metric"] == PRIMARY
            and c.get("scope", "all") == "all"
            and look is not None
        ):
            c = {**c, **anytime_figures(look), "real": look.decision == "real"}
        else:
            c = {**c, "real": False, "method": (c.get("method") or "") + DESCRIPTIVE}
        contrasts.append(c)
    decomposition = stats["decomposition"]
    if decomposition is not None:
        decomposition = {k: {**e, "real": False} for k, e in decomposition.items()}
    return {
        **stats,
        "contrasts": contrasts,
        "holdout_contrasts": [{**c, "real": False} for c in stats["holdout_contrasts"]],
        "regressions": [{**c, "real": False} for c in stats["regressions"]],
        "decomposition": decomposition,
        "verdicts": verdicts(seq, baseline),
        "claims": claims(seq),
        "sequential": seq.model_dump(mode="json"),
    }


def verdicts(seq: SequentialReport, baseline: str) -> list[dict[str, Any]]:
    """One verdict per arm: better only when decided real with a gain over the control."""
    last = seq.looks[-1].cells if seq.looks else {}
    out = []
    for arm, d in seq.decisions.items():
        look = last.get(arm)
        delta = look.delta if look is not None else None
        real = d["decision"] == "real"
        better = real and delta is not None and delta > 0
        word = "better" if better else "worse" if real else str(d["decision"])
        check = CheckRow(name="anytime-valid pooled gain", passed=better, detail=str(d["reason"]))
        line = f"{arm} vs {baseline}: {word} — {d['reason']}"
        failed = [] if better else [check.name]
        row = VerdictRow(arm=arm, baseline=baseline, better=better, failed=failed, checks=[check], line=line)
        out.append(row.model_dump(mode="json"))
    return out


def claims(seq: SequentialReport) -> dict[str, list[str]]:
    """What a sequential comparison can and cannot claim."""
    return {
        "can": [
            f"mark an arm real when its Holm-adjusted anytime-valid p-value is at most {seq.alpha}, an error "
            "rate that holds however many rounds were looked at",
            f"call an arm 'no effect of interest' when both futility e-processes — bets against a pitfall-free "
            f"effect of +{seq.min_effect} or more and against one of -{seq.min_effect} or less — have reached "
            f"1/{seq.draw_beta} (an arm whose effect is at least {seq.min_effect} either way is called so with "
            f"probability at most {seq.draw_beta}); an arm with a smaller effect often ends undecided instead",
        ],
        "cannot": [
            "read the fixed-n p-values of the contrasts table as tests: the number of blocks was chosen by the "
            "data, so they are description only",
            "speak for arms left undecided: neither an effect nor its absence was established for them",
            "speak for tasks beyond these (the task set was chosen, not sampled)",
            "speak for another model or Claude Code version than the pinned one",
        ],
    }

"""Statistics of a report: small, typed, pure functions on scipy.

Every function returns a value or a :class:`NotComputable` with the reason; none returns a magic number.
Its names load on first use, PEP 562: a submodule such as ``ablate.stats.screening`` is imported without
scipy.stats, which costs about a second of CPU, so `ablate run` starts without it."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ablate.stats.agreement import cohen_kappa
    from ablate.stats.multiplicity import holm
    from ablate.stats.power import (
        DEFAULT_POWER,
        blocks_to_detect,
        detectable_binary,
        detectable_mean,
        power_binary,
        power_mean,
        runs_needed_binary,
        runs_needed_mean,
        spread,
    )
    from ablate.stats.proportions import exact_paired_p, newcombe_paired, paired_binary, wilson
    from ablate.stats.resampling import (
        EXACT_MAX_BLOCKS,
        min_interval_blocks,
        paired_mean,
        resamples_for,
        sign_flip_p,
        sign_flip_p_batch,
        t_interval,
    )
    from ablate.stats.types import Interval, NotComputable, PairedResult

_WHERE = {
    name: module
    for module, names in (
        ("agreement", "cohen_kappa"),
        ("multiplicity", "holm"),
        ("power", "DEFAULT_POWER blocks_to_detect detectable_binary detectable_mean power_binary power_mean"),
        ("power", "runs_needed_binary runs_needed_mean spread"),
        ("proportions", "exact_paired_p newcombe_paired paired_binary wilson"),
        ("resampling", "EXACT_MAX_BLOCKS min_interval_blocks paired_mean resamples_for sign_flip_p"),
        ("resampling", "sign_flip_p_batch t_interval"),
        ("types", "Interval NotComputable PairedResult"),
    )
    for name in names.split()
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'ablate.stats' has no attribute {name!r}")
    return getattr(import_module(f"ablate.stats.{_WHERE[name]}"), name)


__all__ = [
    "DEFAULT_POWER",
    "EXACT_MAX_BLOCKS",
    "Interval",
    "NotComputable",
    "PairedResult",
    "blocks_to_detect",
    "cohen_kappa",
    "detectable_binary",
    "detectable_mean",
    "exact_paired_p",
    "holm",
    "min_interval_blocks",
    "newcombe_paired",
    "paired_binary",
    "paired_mean",
    "power_binary",
    "power_mean",
    "resamples_for",
    "runs_needed_binary",
    "runs_needed_mean",
    "sign_flip_p",
    "sign_flip_p_batch",
    "spread",
    "t_interval",
    "wilson",
]

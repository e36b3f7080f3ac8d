"""Statistics of a report: small, typed, pure functions on scipy.

Every function returns a value or a :class:`NotComputable` with the reason; none returns a magic number.
Its names load on first use, PEP 562: a submodule such as ``ablate.stats.screening`` is imported without
scipy.stats, which costs about a second of CPU, so `ablate run` starts without it."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ablate.stats.agreement import cohen_kappa as cohen_kappa
    from ablate.stats.multiplicity import holm as holm
    from ablate.stats.power import (
        DEFAULT_POWER as DEFAULT_POWER,
        blocks_to_detect as blocks_to_detect,
        detectable_binary as detectable_binary,
        detectable_mean as detectable_mean,
        power_binary as power_binary,
        power_mean as power_mean,
        runs_needed_binary as runs_needed_binary,
        runs_needed_mean as runs_needed_mean,
        spread as spread,
    )
    from ablate.stats.proportions import (
        exact_paired_p as exact_paired_p,
        newcombe_paired as newcombe_paired,
        paired_binary as paired_binary,
        wilson as wilson,
    )
    from ablate.stats.resampling import (
        EXACT_MAX_BLOCKS as EXACT_MAX_BLOCKS,
        min_interval_blocks as min_interval_blocks,
        paired_mean as paired_mean,
        resamples_for as resamples_for,
        sign_flip_p as sign_flip_p,
        sign_flip_p_batch as sign_flip_p_batch,
        t_interval as t_interval,
    )
    from ablate.stats.types import (
        Interval as Interval,
        NotComputable as NotComputable,
        PairedResult as PairedResult,
    )

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

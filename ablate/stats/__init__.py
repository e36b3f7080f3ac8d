"""Statistics of a report: small, typed, pure functions on scipy.

Every function returns a value or a :class:`NotComputable` with the reason; none returns a magic number."""

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

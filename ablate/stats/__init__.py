"""Statistics of a report: small, typed, pure functions on scipy.

Every function returns a value or a :class:`NotComputable` with the reason; none returns a magic number.

* :func:`wilson` — interval for one rate;
* :func:`paired_binary` — a binary metric on paired blocks (Newcombe interval, exact discordant-block test);
* :func:`paired_mean` — a count or cost on paired blocks (stratified bootstrap, sign-flip permutation);
* :func:`holm` — Holm adjustment across the comparisons of a report;
* :func:`runs_needed_binary`, :func:`runs_needed_mean`, :func:`detectable_binary`, :func:`detectable_mean`,
  :func:`power_binary`, :func:`power_mean` — power and sample size; :func:`spread` — run-to-run sd;
* :func:`cohen_kappa` — agreement of two raters.
"""

from ablate.stats.agreement import cohen_kappa
from ablate.stats.multiplicity import holm
from ablate.stats.power import (
    DEFAULT_POWER,
    detectable_binary,
    detectable_mean,
    power_binary,
    power_mean,
    runs_needed_binary,
    runs_needed_mean,
    spread,
)
from ablate.stats.proportions import exact_paired_p, newcombe_paired, paired_binary, wilson
from ablate.stats.resampling import paired_mean, sign_flip_p, stratified_bootstrap
from ablate.stats.types import Interval, NotComputable, PairedResult

__all__ = [
    "DEFAULT_POWER",
    "Interval",
    "NotComputable",
    "PairedResult",
    "cohen_kappa",
    "detectable_binary",
    "detectable_mean",
    "exact_paired_p",
    "holm",
    "newcombe_paired",
    "paired_binary",
    "paired_mean",
    "power_binary",
    "power_mean",
    "runs_needed_binary",
    "runs_needed_mean",
    "sign_flip_p",
    "spread",
    "stratified_bootstrap",
    "wilson",
]

"""benchmarks/bench_peek.py measures the peek's family-wise error with a fast path (each cell paired once, cut
at every peek): it must decide what the report's own peek analysis (``analyse``) decides, in both orders."""

from __future__ import annotations

import numpy as np

from benchmarks.bench_peek import check_against_analyse, manifest, peek_sizes


def test_the_peek_benchmark_decides_what_analyse_decides_at_every_peek() -> None:
    m = manifest(4, repeats=20)  # a family: four cells, the last one with an effect, so some peeks say real
    decisions = check_against_analyse(np.random.default_rng(3), m, shift=0.4)  # raises on any disagreement
    assert len(decisions) == 2 * len(peek_sizes(m, m.items)) == 14
    assert any(decisions) and not all(decisions)

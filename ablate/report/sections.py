"""The report's sections, in order: the one list that makes ``report.json``, ``report.md`` and ``report.html``.

Each section is one module with a ``SECTION`` (:class:`~ablate.report.context.Section`): its ``build`` returns
its part of ``report.json`` and may read the parts of the sections above it; its ``render`` gives its blocks
of the Markdown and HTML documents, in this order. The answer comes first (the ranking, or a piece run's
per-piece table), then what qualifies it. Adding a section is one module and one line here.
"""

from __future__ import annotations

from ablate.report import (
    carried,
    caveats,
    contributions,
    dead_layers,
    fingerprints,
    flipped,
    generalization,
    graders,
    header,
    holdout,
    interactions,
    isolation,
    layer_interactions,
    models,
    noise_floor,
    pieces,
    power_table,
    provenance,
    ranking,
    regressions,
    sequential,
    tables,
)
from ablate.report.context import Section

SECTIONS: list[Section] = [
    ranking.SECTION, pieces.SECTION, interactions.SECTION, models.SECTION, sequential.SECTION, noise_floor.SECTION,
    header.SECTION, tables.SECTION, contributions.SECTION, layer_interactions.SECTION, power_table.SECTION,
    regressions.SECTION, holdout.SECTION, generalization.SECTION, graders.SECTION, dead_layers.SECTION,
    isolation.SECTION, carried.SECTION, flipped.SECTION, provenance.SECTION, caveats.SECTION, fingerprints.SECTION,
]  # fmt: skip

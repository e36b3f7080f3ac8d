"""The report's sections, in order: the one list that makes ``report.json``, ``report.md`` and ``report.html``.

Each section is one module with a ``SECTION`` (:class:`~ablate.report.context.Section`): its ``build`` returns
its part of ``report.json`` and may read the parts of the sections above it; its ``render`` gives its blocks
of the Markdown and HTML documents, in this order. The answer comes first (the ranking, or a piece run's
per-piece table), then what qualifies it. Adding a section is one module and its name in :data:`ORDER`.
"""

from __future__ import annotations

from importlib import import_module

from ablate.report.context import Section

#: The section modules of ``ablate/report/``, in report order.
ORDER = (
    "ranking",
    "pieces",
    "interactions",
    "models",
    "sequential",
    "noise_floor",
    "header",
    "tables",
    "contributions",
    "layer_interactions",
    "power_table",
    "regressions",
    "holdout",
    "generalization",
    "discriminating",
    "graders",
    "dead_layers",
    "isolation",
    "carried",
    "flipped",
    "provenance",
    "caveats",
    "fingerprints",
)
SECTIONS: list[Section] = [import_module(f"ablate.report.{name}").SECTION for name in ORDER]

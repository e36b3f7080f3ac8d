"""What every report section is and reads: :class:`Section` (its JSON part and its rendering), the
:class:`Context` it builds from (the run folder, its manifest and plan, the scored items, and the choices —
the control, the primary metric, the metrics, the tested cells — made from them once) and the :class:`Page` it
renders onto. The sections, in order, are :data:`ablate.report.sections.SECTIONS`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.core.errors import RunFolderError, SpecError, UsageError
from ablate.folder.layout import ManifestCell, PlanItem, RunFolder, RunManifest, read_manifest
from ablate.folder.metrics import DEFAULT_PRIMARY, METRICS, PRIMARY_CHOICES, PRIMARY_NAMES
from ablate.folder.result import ItemResult, iter_results
from ablate.report.blocks import Block
from ablate.report.items import Items, collect_items
from ablate.report.model import METRIC_LABELS, NoOpCell, Report

#: Metrics every report compares (graded metrics join when ``grades/`` has them), from the registry.
BASE_METRICS = tuple(m.name for m in METRICS if not m.graded)
GRADED_METRICS = tuple(m.name for m in METRICS if m.graded)


@dataclass
class Context:
    """What every section builder reads: the run folder, its manifest and plan, the scored items."""

    run_dir: Path
    folder: RunFolder
    manifest: RunManifest
    model: str
    """The model the context reads: the run's one, or in a run of several (``--models``) the one its plan and
    results are narrowed to (the first by default: :func:`make_context`)."""
    plan: list[PlanItem]
    results: list[ItemResult]
    items: Items
    alpha: float
    control: ManifestCell
    primary: str
    metrics: list[str]
    task_ids: list[str]
    repeats: list[int]
    no_ops: list[NoOpCell]
    tested: list[ManifestCell]
    layers: dict[str, list[str]]
    """Cell id → the layers it strips that this setup has."""
    say: Callable[[str], None]

    def ranked(self) -> list[ManifestCell]:
        """The tested cells that strip layers: not the A/A cell (a noise floor), nor a leave-one-in cell beside
        a full control (:mod:`ablate.report.layer_interactions` compares those)."""
        beside_full = not self.control.empty_config
        return [c for c in self.tested if not c.aa_of and not (beside_full and c.kept)]


@dataclass
class Page:
    """Where the sections render: ``plots``, their figures' folder (None: none drawn); ``drawn``, key → files."""

    plots: Path | None = None
    drawn: dict[str, tuple[Path, Path]] = field(default_factory=dict)

    def figure(self, key: str, draw: Callable[[Path], tuple[Path, Path] | None]) -> tuple[str, str] | None:
        """Draw a section's figure into :attr:`plots`; its files relative to the report (None: not drawn)."""
        if self.plots is None or (files := draw(self.plots)) is None:
            return None
        self.drawn[key] = files
        return f"{self.plots.name}/{files[0].name}", f"{self.plots.name}/{files[1].name}"


@dataclass(frozen=True)
class Section:
    """One part of the report (docs/EXTENDING.md#adding-a-report-section): ``build`` returns its top-level
    ``report.json`` keys, ``render`` its blocks of ``report.md`` and ``report.html``."""

    key: str
    build: Callable[[Context, Report], dict[str, Any]] = lambda _ctx, _report: {}
    render: Callable[[Report, Page], list[Block]] = lambda _report, _page: []
    layer_runs_only: bool = False
    """Rendered for a layer run only (a piece run's answer is its per-piece table, not these)."""

    def part(self, report: Report) -> Any:
        """The value of this section's own key when it is not a field of :class:`Report` (a new section's)."""
        return (report.model_extra or {}).get(self.key)


def on_model(report: Report) -> str:
    """`` on M`` after the answer's heading in a run of several models (the answer is the first's), else ``""``."""
    return f" on {report.run.model}" if getattr(report, "models", None) else ""


def primary_metric(name: str | None) -> str:
    """``--primary`` → metric id; an unknown name is a :class:`UsageError`."""
    if name is None:
        return DEFAULT_PRIMARY
    key = name.strip().lower()
    if key not in PRIMARY_NAMES:
        raise UsageError(
            f"--primary {name}: not a metric",
            hint="use " + ", ".join(PRIMARY_CHOICES[:-1]) + " or " + PRIMARY_CHOICES[-1],
        )
    return PRIMARY_NAMES[key]


def _noop_reason(cell: ManifestCell, control: ManifestCell) -> str | None:
    if cell.noop is not None:
        return cell.noop
    if not cell.stripped or cell.empty_config:
        return None
    fp = control.fingerprints
    if fp and all(fp.get(lid, "") == "" for lid in cell.stripped):
        return f"{cell.id}: no {', '.join(cell.stripped)} in this setup — identical to the control by construction"
    return None


def make_context(
    run_dir: Path, *, alpha: float, control: str | None, primary: str | None, say: Callable[[str], None],
    model: str | None = None,
) -> Context:  # fmt: skip
    """Read the run folder and decide the control, the primary metric, the metrics and the tested cells; a run
    of several models is read as ``model``'s alone (by default the first), keyed as a run of one."""
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: must be between 0 and 1", hint="the usual value is 0.05")
    folder = RunFolder(run_dir)
    manifest = read_manifest(folder)
    plan = folder.read_plan()
    results = iter_results(folder)
    model = model or manifest.model
    if manifest.models:
        if model not in manifest.models:
            raise UsageError(
                f"--model {model}: not a model of this run", hint="models: " + ", ".join(manifest.models)
            )
        plan = [p for p in plan if p.model == model]
        mine = {p.item for p in plan}
        results = [r for r in results if r.item in mine]
    cells = {c.id: c for c in manifest.cells}
    if not manifest.cells:
        raise RunFolderError(f"{run_dir}: the manifest lists no cells")
    # the set's control is the cell that strips nothing (the manifest does not record the set's `control`)
    control_id = control or next(
        (c.id for c in manifest.cells if not c.stripped and not c.pieces), manifest.cells[0].id
    )
    if control_id not in cells:
        raise UsageError(f"--control {control_id}: not a cell of this run", hint="cells: " + ", ".join(cells))
    say(f"read {len(results)} results of {len(plan)} planned items")
    items = collect_items(folder, plan, results, model)
    metrics = list(BASE_METRICS) + [
        m for m in GRADED_METRICS if any(m in it.values for it in items.scored.values())
    ]
    prim = primary_metric(primary)
    if primary is None and "checks_score" in metrics and not any(r.pitfall_hits for r in results):
        prim = "checks_score"  # a plugin-eval suite without pitfalls: its weighted graders are the measure
        say("primary metric: the grader score (the tasks define graders and no pitfalls)")
    if prim not in metrics:
        raise UsageError(
            f"--primary {primary}: this run has no {METRIC_LABELS[prim]} (no grades/ verdicts for it)",
            hint="run `ablate judge` (judge) or the tasks' checks first, or choose another --primary",
        )
    ctrl = cells[control_id]
    no_ops = [
        NoOpCell(cell=c.id, layers=list(c.stripped), reason=why)
        for c in manifest.cells
        if c.id != control_id and (why := _noop_reason(c, ctrl))
    ]
    no_op_ids = {n.cell for n in no_ops}
    fp = ctrl.fingerprints  # a layer the control lacks is not one a cell strips (none recorded: all are)
    return Context(
        run_dir=run_dir,
        folder=folder,
        manifest=manifest,
        model=model,
        plan=plan,
        results=results,
        items=items,
        alpha=alpha,
        control=ctrl,
        primary=prim,
        metrics=[prim] + [m for m in metrics if m != prim],
        task_ids=[t.id for t in manifest.tasks],
        repeats=sorted({p.repeat for p in plan}),
        no_ops=no_ops,
        tested=[c for c in manifest.cells if c.id != control_id and c.id not in no_op_ids],
        layers={
            c.id: [] if c.id == control_id else [lid for lid in c.stripped if not fp or fp.get(lid, "") != ""]
            for c in manifest.cells
        },
        say=say,
    )


def read_probe(run_dir: Path) -> dict[str, Any] | None:
    """The run's probe.json (:func:`ablate.folder.probe.read_probe`); one the report cannot read becomes
    ``{"error": why}``, which the isolation section prints, instead of no report."""
    from ablate.folder.probe import read_probe as read

    try:
        return read(RunFolder(run_dir))
    except SpecError as exc:
        return {"error": str(exc)}

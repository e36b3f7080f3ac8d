"""Probe first, for free: before a run's first paid session, prove every cell faithful (the real CLI against
ablate.sim's capture endpoint) and keep the proof as ``probe.json``; an unfaithful cell stops the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.core.errors import AblateError, UsageError
from ablate.folder.layout import RunFolder, write_manifest
from ablate.folder.probe import probe_path, read_probe, write_probe

if TYPE_CHECKING:
    from ablate.core.claude import ClaudeBinary
    from ablate.run.prepare import PreparedRun

#: Probe sessions at once, at least: they cost no money, and a CLI start waits as much as it computes
#: (benchmarks/bench_probe.py: 4 at once beat 2 on the 2-core machine).
PROBE_JOBS = 4


class UnfaithfulCells(AblateError):
    """The probe found a cell that does not carry what it should: the run is refused (exit 1)."""


class WeakChecks(UsageError):
    """A task's checks pass when the model does nothing, or fail on its reference: the run is refused (exit 2)."""


Vetter = Callable[[], dict[str, Any]]
"""The graders' check of the run's tasks (``ablate.grade.vet.vet_tasks`` bound to them): probe.json's
``graders``, or a located error for a bad reference. Supplied by the caller: ``run`` does not import ``grade``."""


def vet_graders(prep: PreparedRun, vet: Vetter, *, allow_weak: bool) -> dict[str, Any]:
    """The run's tasks' checks against the untouched checkout and their references (kept from probe.json when
    its tasks are these); weak checks refused unless ``allow_weak``, which records them as ``weak_checks``."""
    earlier = read_probe(prep.folder) or {}
    kept = earlier.get("graders")
    hashes = {t.id: t.sha256 for t in prep.tasks}
    record = kept if isinstance(kept, dict) and kept.get("hashes") == hashes else vet()
    weak = [t for t in record["tasks"] if t["weak"] and t["id"] in record["weak"]]
    record = {**record, "allowed": bool(weak) and allow_weak}
    before = earlier or {"ok": None, "skipped": "the run stopped before its cells were probed"}
    path = write_probe(prep.folder, before | {"graders": record})
    if weak and not allow_weak:
        raise WeakChecks(
            "the graders refused this run before any session; nothing was spent: "
            + "; ".join(t["weak"] for t in weak)
            + f". The record: {path}",
            hint="make each check fail when nothing is done (check what the task asks for), fix the reference, "
            "mark a task whose checks only guard `guard_only = true`, or run anyway with --allow-weak-checks "
            "(the report says so); `ablate tasks check TASKS` checks them on its own",
        )
    if weak:
        prep.manifest = prep.manifest.model_copy(update={"weak_checks": [t["id"] for t in weak]})
        write_manifest(prep.folder, prep.manifest)
    return record


def kept_probe(run_dir: Path, cells: list[str]) -> dict[str, Any] | None:
    """The run folder's passing probe of exactly these cells (a resumed run keeps it), else None."""
    data = read_probe(RunFolder(run_dir))
    if data is None or data.get("ok") is not True:
        return None
    probed = sorted(str(c.get("id")) for c in data.get("cells", []) if isinstance(c, dict))
    return data if probed == sorted(cells) else None


def summary_line(data: dict[str, Any]) -> str:
    """``OK: 5 cells (4 faithful, 1 no-op), shadow fidelity equal, 9.8 s (2.0 s per cell)`` from probe.json."""
    cells = [c for c in data.get("cells", []) if isinstance(c, dict)]
    counts = Counter(str(c.get("verdict")) for c in cells)
    fid = data.get("fidelity") or {}
    fidelity = f"not checked ({fid.get('reason')})"
    if fid.get("checked"):
        fidelity = "equal" if fid.get("equal") else "DIFFERENT"
    took = float(data.get("duration_s") or 0.0)
    return (
        f"{'OK' if data.get('ok') else 'NOT FAITHFUL'}: {len(cells)} cells ("
        + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        + f"), shadow fidelity {fidelity}, {took:.1f} s ({took / max(1, len(cells)):.1f} s per cell)"
    )


def skip_probe(run_dir: Path, why: str) -> Path:
    """Record ``--no-probe``; a passing probe stays, a failing one is kept as ``earlier``."""
    folder = RunFolder(run_dir)
    earlier = read_probe(folder)
    if earlier is not None and earlier.get("ok") is True:
        return probe_path(folder)
    record: dict[str, Any] = {"ok": None, "skipped": why} | _graders(earlier)
    if earlier is not None and earlier.get("ok") is False:
        record["earlier"] = earlier
    return write_probe(folder, record)


def probe_first(
    prep: PreparedRun,
    claude: ClaudeBinary,
    *,
    isolation: str,
    work_dir: Path | None,
    jobs: int,
    on_cell: Callable[[str, str], None] | None = None,
) -> tuple[dict[str, Any], bool]:
    """Probe the run's cells unless the folder holds a passing probe of them; write ``probe.json``, return it
    and whether it was kept. An unfaithful cell raises :class:`UnfaithfulCells` (exit 1)."""
    from ablate.probe.probe import probe

    run_dir = prep.folder.root
    cells = [c.id for c in prep.cell_set.cells]
    kept = kept_probe(run_dir, cells)
    if kept is not None:
        return kept, True
    result = probe(
        prep.setup,
        prep.catalog,
        prep.cell_set,
        claude,
        work=None,
        jobs=max(jobs, PROBE_JOBS),
        isolation=isolation,
        work_parent=work_dir,
        on_cell=on_cell,
    )
    data = result.to_json() | _graders(read_probe(prep.folder))
    path = write_probe(prep.folder, data)
    if not result.ok:
        bad = [f"{c.id} {c.verdict}" for c in result.cells if c.verdict not in ("faithful", "no-op")]
        why = bad or (
            ["shadow fidelity: C0 differs from your untouched setup"]
            if not data["fidelity"].get("equal")
            else []
        )
        if not result.real_setup_unchanged:
            why.append("your real files changed during the probe")
        raise UnfaithfulCells(
            f"the probe refused this run before any paid session ({'; '.join(why)}); nothing was spent. "
            f"The proof: {path}; the run folder: {run_dir}",
            hint=f"`{_probe_command(prep)}` shows each cell; fix the cell or the setup, or run anyway with "
            "--no-probe (the report will say so)",
        )
    return data, False


def _graders(earlier: dict[str, Any] | None) -> dict[str, Any]:
    """The graders' record of an earlier probe.json, to keep in the one replacing it."""
    return {"graders": earlier["graders"]} if earlier and earlier.get("graders") else {}


def probe_or_skip(
    prep: PreparedRun,
    claude: ClaudeBinary,
    *,
    enabled: bool,
    isolation: str,
    work_dir: Path | None,
    jobs: int,
    say: Callable[[str], None],
    vet: Vetter | None = None,
    allow_weak: bool = False,
) -> None:
    """Before the first paid session of ``run``, ``ab`` and ``compare``: vet the tasks' checks, then probe the
    cells (or record ``--no-probe``); a run with nothing left to do is not probed."""
    todo = bool(prep.todo())
    if vet is not None and todo:
        graders = vet_graders(prep, vet, allow_weak=allow_weak)
        guards = sum(1 for t in graders["tasks"] if t["guard_only"])
        weak = prep.manifest.weak_checks
        say(
            f"graders: the checks of {len(graders['tasks'])} tasks tried on the untouched checkout and their "
            "references (free): "
            + (f"weak, run anyway (--allow-weak-checks): {', '.join(weak)}" if weak else "none weak")
            + (f"; {guards} guard only" if guards else "")
        )
    if not enabled:
        skip_probe(prep.folder.root, "--no-probe")
        say("probe: skipped (--no-probe); the report says so")
        return
    if not todo:
        return
    n = len(prep.cell_set.cells)
    say(f"probe: proving what reaches the model in each of the {n} cells (free: capture endpoint, no key)")
    data, kept = probe_first(prep, claude, isolation=isolation, work_dir=work_dir, jobs=jobs)
    say(f"probe: {summary_line(data)}" + (" (kept from this folder's earlier probe)" if kept else ""))


def _probe_command(prep: PreparedRun) -> str:
    """The probe that shows the run's cells: its cell set, or a piece run's pieces (one cell each)."""
    design = prep.manifest.design
    if design is not None:
        return "ablate probe --pieces " + ",".join(p.id for p in design.pieces)
    return f"ablate probe --cells {prep.cell_set.source or prep.cell_set.name}"

"""The pieces of ``ablate demo`` that are not presentation: where the demo lives, and a per-cell summary."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ablate.core.errors import UsageError
from ablate.run.folder import RunFolder
from ablate.run.result import ItemResult, iter_results

MARKER = ".ablate-demo"


def prepare_demo_folder(out: Path) -> Path:
    """Create (or empty) the demo folder; refuse to empty a folder ablate did not make for a demo."""
    out = out.resolve()
    if out.exists():
        if not (out / MARKER).exists():
            if any(out.iterdir()):
                raise UsageError(
                    f"{out}: exists and is not an ablate demo folder", hint="pick another --out or remove it"
                )
        else:
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by `ablate demo`; removed by the next demo run\n")
    return out


@dataclass(frozen=True)
class CellSummary:
    cell: str
    items: int
    complete: int
    pitfall_hits: dict[str, int]
    mean_turns: float | None
    cost_usd: float


def summarise_results(run_dir: Path) -> list[CellSummary]:
    """Descriptive per-cell totals over a run folder's results (no statistics: that is ``ablate report``)."""
    by_cell: dict[str, list[ItemResult]] = {}
    for res in iter_results(RunFolder(run_dir)):
        by_cell.setdefault(res.cell, []).append(res)
    out = []
    for cell, docs in by_cell.items():
        hits: dict[str, int] = {}
        for d in docs:
            for pid, n in d.pitfall_hits.items():
                if n:
                    hits[pid] = hits.get(pid, 0) + int(n)
        turns = [d.turns for d in docs if d.turns is not None]
        out.append(
            CellSummary(
                cell=cell,
                items=len(docs),
                complete=sum(1 for d in docs if d.complete),
                pitfall_hits=hits,
                mean_turns=sum(turns) / len(turns) if turns else None,
                cost_usd=sum(d.cost_usd or 0.0 for d in docs),
            )
        )
    return sorted(out, key=lambda s: (len(s.cell), s.cell))

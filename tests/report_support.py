"""Synthetic run folders for report tests: a manifest, a plan and one ItemResult per item, no CLI needed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ablate.folder.layout import ManifestCell, ManifestTask, PlanItem, item_id
from ablate.folder.result import ItemResult
from tests.run_folder import MODEL, new_manifest, write_run

LAYERS = ["user-claude-md", "axioms", "decisions", "output-styles"]


@dataclass(frozen=True)
class Outcome:
    pitfall: bool = False
    turns: int = 3
    tool_calls: int = 2
    cost: float = 0.01
    status: str = "completed"
    flags: tuple[str, ...] = ()
    model: str = MODEL


def _fingerprints(stripped: list[str], layers: list[str]) -> dict[str, object]:
    """Layer fingerprints as the builder records them: "" for a layer the cell lacks (output-styles: none)."""
    return {
        lid: "" if lid in stripped or lid == "output-styles" else f"{lid[:4]}{'0' * 60}" for lid in layers
    }


def make_run(
    root: Path,
    *,
    cells: dict[str, list[str]],
    tasks: list[str],
    repeats: int,
    outcome: Callable[..., Outcome],
    cell_set: str = "layered",
    layers: list[str] | None = None,
    splits: dict[str, str] | None = None,
    finished: Callable[[str, str, int], str | None] | None = None,
    kept: dict[str, list[str]] | None = None,
    empty: frozenset[str] = frozenset(),
    models: tuple[str, ...] = (),
) -> Path:
    """Write a complete run folder under ``root`` and return it (``finished``: each item's ``finished_at``;
    ``models``: a run of several, every cell on each, ``outcome`` then called with the model too)."""
    manifest = new_manifest(
        cell_set=cell_set,
        cells=[
            ManifestCell(
                id=cid,
                dirname=cid.lower(),
                label=f"no {', '.join(stripped)}" if stripped else "everything (control)",
                stripped=stripped,
                fingerprints=_fingerprints(stripped, layers or LAYERS),
                empty_config=cid in (kept or {}) or cid in empty,
                kept=(kept or {}).get(cid, []),
            )
            for cid, stripped in cells.items()
        ],
        tasks=[
            ManifestTask(
                id=t,
                sha256=f"{i:02d}" * 32,
                source=f"/tasks/{t}.toml",
                split=(splits or {}).get(t, "dev" if i % 2 == 0 else "holdout"),
                expects=["user-claude-md"] if i == 0 else ([] if i > 1 else ["decisions"]),
            )
            for i, t in enumerate(tasks)
        ],
        repeats=repeats,
        items=len(cells) * len(tasks) * repeats * max(1, len(models)),
        **({"models": list(models), "model": models[0]} if models else {}),
    )
    plan: list[PlanItem] = []
    order = 0
    for r in range(repeats):
        for t in tasks:
            for cid in cells:
                for m in models or (None,):
                    plan.append(
                        PlanItem(item=item_id(t, cid, r, m), task=t, cell=cid, repeat=r, order=order, model=m)
                    )
                    order += 1
    results: list[ItemResult] = []
    for p in plan:
        o = outcome(p.task, p.cell, p.repeat, *([p.model] if p.model else []))
        complete = o.status == "completed"
        session = {
            "schema_version": 1,
            "transcript": f"transcripts/{p.item}.a1/s-{p.order}.jsonl",
            "status": "completed",
            "models": [o.model] if o.model else [],
            "instruction_files": [{"path": "/home/u/.claude/CLAUDE.md", "type": "User"}],
            "skills_listed": [],
            "hooks_fired": {},
            "total": {
                "tool_calls": o.tool_calls,
                "input_tokens": 1000,
                "output_tokens": 100,
                "cache_creation_tokens": 0,
                "cache_read_tokens": 3000,
                "skills_invoked": [],
                "files_read": ["docs/decisions/0001.md"] if p.task == tasks[-1] else [],
            },
        }
        results.append(
            ItemResult(
                item=p.item,
                task=p.task,
                cell=p.cell,
                repeat=p.repeat,
                order=p.order,
                attempt=1,
                session_id=f"s-{p.order}",
                status=o.status,
                cost_usd=o.cost if complete else None,
                turns=o.turns if complete else None,
                pitfall_hits={"p": 1 if o.pitfall else 0},
                session=session if complete else None,
                flags=list(o.flags),
                error=None if complete else "API error 500",
                finished_at=finished(p.task, p.cell, p.repeat) if finished else None,
            )
        )
    write_run(root, manifest, plan, results)
    return root

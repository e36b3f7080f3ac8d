"""``ablate merge``: combine run folders of one plan (identical :meth:`RunManifest.identity`) into one; every
attempt's evidence is copied (renumbered per item), and per item the best result wins
(:func:`ablate.folder.result.should_replace`)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.core.errors import NotFound, OutputExists, RunFolderError
from ablate.folder.layout import (
    TASKS_DIR,
    Attempt,
    PlanItem,
    RunFolder,
    RunManifest,
    read_manifest,
    write_manifest,
)
from ablate.folder.lock import RunLock
from ablate.folder.result import ItemResult, read_result, should_replace, write_result
from ablate.folder.wire import append_wire, read_wire, wire_path


def _diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


AttemptCarrier = Callable[[RunFolder, RunFolder, str, Mapping[int, int]], None]
"""Copies what a later stage keeps per attempt (grades, diffs) from a source folder into the merged one:
``(source, dest, item, {old attempt: new attempt})``. ``ablate.grade.record.carry_grades`` is the one ablate has."""


def merge_runs(
    runs: Sequence[Path], out: Path, *, force: bool = False, carry: Sequence[AttemptCarrier] = ()
) -> dict[str, Any]:
    """Merge ``runs`` into a new folder ``out``; return a summary (items, results, complete)."""
    if not runs:
        raise RunFolderError("nothing to merge", hint="pass two or more run folders")
    for r in runs:
        if not r.is_dir():
            raise NotFound(f"{r}: no such run folder")
    if out.exists() and any(out.iterdir()):
        raise OutputExists(f"{out}: already exists", hint="pick a new --out folder")
    folders = [RunFolder(r) for r in runs]
    manifests = [read_manifest(f) for f in folders]
    base = manifests[0].identity()
    for f, m in zip(folders[1:], manifests[1:], strict=True):
        differs = _diff(base, m.identity())
        if differs and not force:
            raise RunFolderError(
                f"{f.root}: its manifest differs from {folders[0].root} in {', '.join(differs)}",
                hint="only folders of one plan merge; --force merges anyway (and says so in the manifest)",
            )
    dest = RunFolder(out)
    out.mkdir(parents=True, exist_ok=True)

    with contextlib.ExitStack() as stack:
        for f in folders:  # no live runner may add results while they are read
            stack.enter_context(RunLock(f))
        stack.enter_context(RunLock(dest))
        return _merge_locked(folders, manifests, dest, force=force, carry=carry)


def _merge_locked(
    folders: Sequence[RunFolder],
    manifests: Sequence[RunManifest],
    dest: RunFolder,
    *,
    force: bool,
    carry: Sequence[AttemptCarrier],
) -> dict[str, Any]:
    out = dest.root
    shutil.copytree(folders[0].root / TASKS_DIR, out / TASKS_DIR, dirs_exist_ok=True)
    merged: dict[str, PlanItem] = {}
    results: dict[str, ItemResult] = {}
    for folder in folders:
        for it in folder.read_plan():
            target = merged.setdefault(it.item, it.model_copy(update={"attempts": []}))
            renumber: dict[int, int] = {}
            for a in it.attempts:
                n = len(target.attempts) + 1
                renumber[a.n] = n
                target.attempts.append(Attempt(**{**a.model_dump(), "n": n}))
                _copy_attempt(folder, dest, it.item, a.n, n)
            for carrier in carry:
                carrier(folder, dest, it.item, renumber)
            res = read_result(folder, it.item)
            if res is None:
                continue
            res = _renumbered(res, dest, renumber.get(res.attempt, res.attempt))
            if should_replace(results.get(it.item), res):
                results[it.item] = res
    dest.write_plan(sorted(merged.values(), key=lambda p: p.order))
    for res in results.values():
        write_result(dest, res)

    first = manifests[0]
    cells = list(first.cells)
    for m in manifests[1:]:
        cells = [c if c.fingerprints else o for c, o in zip(cells, m.cells, strict=False)]
    sessions = [s for m in manifests for s in m.sessions]
    starts = first.cli_starts
    for m in manifests[1:]:
        starts = starts.plus(m.cli_starts.model_dump())
    update = {"shard": None, "cells": cells, "sessions": sessions, "cli_starts": starts}
    manifest = first.model_copy(update=update)
    if force:
        forced = manifest.setup.model_copy(update={"merged_with_force": [str(f.root) for f in folders]})
        manifest = manifest.model_copy(update={"setup": forced})
    write_manifest(dest, manifest)
    complete = sum(1 for r in results.values() if r.complete)
    return {"folder": str(out), "items": len(merged), "results": len(results), "complete": complete}


def _copy_attempt(src: RunFolder, dest: RunFolder, item: str, old: int, new: int) -> None:
    for path in (RunFolder.stdout_path, RunFolder.stderr_path):
        a, b = path(src, item, old), path(dest, item, new)
        if a.exists():
            b.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(a, b)
    tdir = src.transcript_dir(item, old)
    if tdir.is_dir():
        shutil.copytree(tdir, dest.transcript_dir(item, new), symlinks=True, dirs_exist_ok=True)
    for record in read_wire(wire_path(src.root, item)):  # what crossed the wire, under the new number
        if record.attempt == old:
            append_wire(wire_path(dest.root, item), record.model_copy(update={"attempt": new}))


def _renumbered(res: ItemResult, dest: RunFolder, n: int) -> ItemResult:
    """The result with its attempt number and evidence paths as they are in the merged folder (all relative)."""
    update: dict[str, Any] = {
        "attempt": n,
        "stdout": str(dest.stdout_path(res.item, n).relative_to(dest.root)),
    }
    if res.transcript:
        rel = str(dest.transcript_path(res.item, n, res.session_id).relative_to(dest.root))
        update["transcript"] = rel
        if res.session is not None:
            update["session"] = res.session.model_copy(update={"transcript": rel})
    return res.model_copy(update=update)

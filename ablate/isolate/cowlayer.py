"""Build a cell's repo layer: the difference between the run's pristine checkout and the cell's working tree.

Run as ``python -m ablate.isolate.cowlayer SPEC.json`` (in its own mount namespace): per layer of the spec
it mounts an overlay of the pristine checkout, replays the cell's worktree operations and resolves the repo
layers there (into ``report``). The upper folder is then the middle lower layer of the cell's sessions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ablate.core.fsutil import atomic_write_json
from ablate.isolate import nsexec, worktree
from ablate.setup.layers import Layer, resolve_layer


def build(spec: dict[str, Any]) -> None:
    layers = spec["layers"]
    nsexec.enter(
        [
            {"target": item["mnt"], "lower": item["lower"], "upper": item["upper"], "work": item["work"]}
            for item in layers
        ]
    )
    for item in layers:
        mnt = Path(item["mnt"])
        worktree.apply_ops(mnt, Path(item["pristine"]), item["ops"])
        report: dict[str, Any] = {}
        for raw in item.get("resolve", []):
            layer = Layer.model_validate(raw)
            lf = resolve_layer(layer, mnt, memory_slug=item["memory_slug"])
            report[layer.id] = {
                "present": lf.present,
                "entries": lf.entries,
                "fingerprint": lf.fingerprint,
                "digests": lf.digests,
            }
        atomic_write_json(Path(item["report"]), report)


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        build(spec)
    except OSError as exc:
        sys.stderr.write(f"ablate cowlayer: {exc}\n")
        return nsexec.SETUP_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

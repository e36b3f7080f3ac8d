"""The digest of every run-folder file a report is built from (``inputs_sha256`` in report.json), so that
``ablate gate`` can tell a stale report and rebuild it (docs/ARCHITECTURE.md#statistics)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ablate.folder.adaptive import ADAPTIVE_FILE
from ablate.folder.names import GRADES, MANIFEST, PLAN, RESULTS
from ablate.folder.probe import PROBE_FILE

#: Files of the run folder the report reads, besides ``results/`` and ``grades/``.
INPUT_FILES = (MANIFEST, PLAN, ADAPTIVE_FILE, PROBE_FILE)


def inputs_digest(run_dir: Path) -> str:
    """sha256 over (relative path, sha256 of the bytes) of every input file, in a fixed order."""
    files = [run_dir / name for name in INPUT_FILES]
    files += sorted((run_dir / RESULTS).glob("*.json")) + sorted((run_dir / GRADES).rglob("*.json"))
    h = hashlib.sha256()
    for f in (f for f in files if f.is_file()):
        h.update(f.relative_to(run_dir).as_posix().encode())
        h.update(b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()

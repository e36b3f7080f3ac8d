"""probe.json: the free probe of a run's cells before its first paid session, or ``{"ok": null, "skipped":
WHY}``; one written before the file had a ``schema_version`` is read as version 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson

from ablate.core.fsutil import atomic_write_bytes
from ablate.core.specs import read_json_object, require_schema
from ablate.folder.layout import RunFolder

PROBE_FILE = "probe.json"
PROBE_SCHEMA_VERSION: Literal[1] = 1


def probe_path(folder: RunFolder) -> Path:
    return folder.root / PROBE_FILE


def read_probe(folder: RunFolder) -> dict[str, Any] | None:
    """probe.json, or None when the run was not probed; a bad or newer one is a located error."""
    path = probe_path(folder)
    data = read_json_object(path)
    if data is None:
        return None
    require_schema(
        {"schema_version": PROBE_SCHEMA_VERSION} | data,
        path,
        PROBE_SCHEMA_VERSION,
        "probe",
        hint="probe the run's cells again with this ablate (`ablate run --resume` does)",
    )
    return data


def write_probe(folder: RunFolder, data: dict[str, Any]) -> Path:
    """Write probe.json atomically, its ``schema_version`` first; return its path."""
    path = probe_path(folder)
    doc = {"schema_version": PROBE_SCHEMA_VERSION} | {k: v for k, v in data.items() if k != "schema_version"}
    atomic_write_bytes(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    return path

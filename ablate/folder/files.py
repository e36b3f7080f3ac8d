"""Every file of a run folder, with its ``schema_version`` (None: a format not ablate's) and the module that
reads and writes it: the one list docs/ARCHITECTURE.md#run-folder is checked against."""

from __future__ import annotations

from dataclasses import dataclass

from ablate.folder import layout
from ablate.folder.adaptive import ADAPTIVE_FILE, ADAPTIVE_SCHEMA_VERSION
from ablate.folder.probe import PROBE_FILE, PROBE_SCHEMA_VERSION
from ablate.folder.result import RESULT_SCHEMA_VERSION
from ablate.folder.wire import WIRE, WIRE_SCHEMA_VERSION

#: report.json's version; ``ablate.report.model.REPORT_SCHEMA_VERSION`` is checked against it by the tests
#: (folder imports no stage).
REPORT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RunFile:
    """One file (or family of files) of a run folder."""

    path: str
    """Its path inside the run folder, ``<item>`` and ``<N>`` standing for an item id and an attempt."""
    version: int | None
    """The ``schema_version`` it is written at; None: not a format of ablate's."""
    owner: str
    """The module that reads and writes it."""


RUN_FILES: tuple[RunFile, ...] = (
    RunFile(layout.MANIFEST, layout.SCHEMA_VERSION, "ablate.folder.layout"),
    RunFile(layout.LOCK, None, "ablate.folder.lock"),
    RunFile(layout.PLAN, layout.SCHEMA_VERSION, "ablate.folder.layout"),
    RunFile(f"{layout.RESULTS}/<item>.json", RESULT_SCHEMA_VERSION, "ablate.folder.result"),
    RunFile(f"{layout.GRADES}/<item>.json", layout.GRADE_SCHEMA_VERSION, "ablate.grade.record"),
    RunFile(f"{layout.DIFFS}/<item>.a<N>.patch", None, "ablate.grade.record"),
    RunFile(f"{layout.STDOUT}/<item>.a<N>.json", None, "ablate.run.worker"),
    RunFile(f"{layout.STDERR}/<item>.a<N>.txt", None, "ablate.run.worker"),
    RunFile(f"{layout.TRANSCRIPTS}/<item>.a<N>/", None, "ablate.run.worker"),
    RunFile(f"{WIRE}/<item>.jsonl", WIRE_SCHEMA_VERSION, "ablate.folder.wire"),
    RunFile(f"{layout.TASKS_DIR}/", None, "ablate.run.create"),
    RunFile(ADAPTIVE_FILE, ADAPTIVE_SCHEMA_VERSION, "ablate.folder.adaptive"),
    RunFile(PROBE_FILE, PROBE_SCHEMA_VERSION, "ablate.folder.probe"),
    RunFile(layout.REPORT_JSON, REPORT_SCHEMA_VERSION, "ablate.report"),
    RunFile(layout.REPORT_MD, None, "ablate.report"),
    RunFile(layout.REPORT_HTML, None, "ablate.report"),
    RunFile(f"{layout.PLOTS}/", None, "ablate.report"),
    RunFile(layout.REPORT_LOG, None, "ablate.cli.run_display"),
)

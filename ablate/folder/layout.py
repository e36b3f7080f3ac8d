"""The run folder layout (docs/ARCHITECTURE.md#run-folder), the contract between `run`, `mine`, `recover` and
`report`: :class:`RunFolder` names every path. Item ids (:func:`item_id`) are stable across runs, shards and
merges; attempts are numbered from 1."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import Field, ValidationError

from ablate.core.claude import ClaudeBinary
from ablate.core.errors import RunFolderError, SpecError
from ablate.core.fsutil import atomic_write_bytes
from ablate.core.specs import Spec, problems_from_validation, read_json_object, require_schema
from ablate.folder.design import PieceDesignRecord
from ablate.folder.limits import Limits
from ablate.folder.names import (  # re-exported: readers name them from either module
    DIFFS as DIFFS,
    GRADES as GRADES,
    LOCK as LOCK,
    MANIFEST as MANIFEST,
    PLAN as PLAN,
    PLOTS as PLOTS,
    REPORT_HTML as REPORT_HTML,
    REPORT_JSON as REPORT_JSON,
    REPORT_LOG as REPORT_LOG,
    REPORT_MD as REPORT_MD,
    RESULTS as RESULTS,
    STDERR as STDERR,
    STDOUT as STDOUT,
    TASKS_DIR as TASKS_DIR,
    TRANSCRIPTS as TRANSCRIPTS,
)

#: Version of manifest.json and of each plan.jsonl line; another version is a located error on read.
SCHEMA_VERSION: Literal[1] = 1
#: Version of grades/<item>.json (``ablate.grade.record.GradeFile``).
GRADE_SCHEMA_VERSION: Literal[1] = 1


_HINT = "a run folder is read by the ablate version that wrote it; plan a new run with this one"


def utcnow() -> str:
    """The current time as ISO-8601 UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def item_id(task: str, cell: str, repeat: int, model: str | None = None) -> str:
    """The stable id of one (task, cell, repeat) item (and its model, in a run of several)."""
    return f"{task}__{cell}__{model + '__' if model else ''}r{repeat:02d}"


class Attempt(Spec):
    """One launch of `claude -p` for an item."""

    n: int = Field(ge=1)
    """Attempt number, from 1."""
    session_id: str
    """The `--session-id` passed to the CLI; names the transcript file."""
    started_at: str | None = None
    """ISO-8601 UTC time the process was launched."""
    outcome: str | None = None
    """What the runner concluded: completed, api_error, max_turns, killed, rate_limited, no_transcript, ..."""
    finished_at: str | None = None
    """ISO-8601 UTC time the process ended (None: still running, or the runner died)."""
    cost_usd: float | None = None
    """Spend of this attempt (from the transcript's cost records), counted against ``--budget-usd``."""
    returncode: int | None = None
    """The CLI's exit status (negative: killed by a signal)."""
    slot: str | None = None
    """The environment the attempt ran in (``c03`` or ``c03s1``)."""


class ItemRecord(Spec):
    """What every record about one item starts with: its format version and which item it is."""

    schema_version: int
    """Format version of the record (each record type fixes its own)."""
    item: str
    """The item id (`<task>__<cell>__r<repeat>`)."""
    task: str
    """Task id."""
    cell: str
    """Cell id (C0, C1, ...)."""
    repeat: int = Field(ge=0)
    """Repeat index, from 0."""
    order: int = Field(ge=0)
    """Global execution order of the item in the plan (randomised within each (task, repeat) block from the
    manifest's seed)."""


class PlanItem(ItemRecord):
    """One line of plan.jsonl: what to run, in which order, and every attempt made so far."""

    schema_version: Literal[1] = SCHEMA_VERSION
    """Format version of this line."""
    attempts: list[Attempt] = Field(default_factory=list)
    """Every attempt, oldest first."""
    model: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The model its session is pinned to in a run of several (``--models``); absent: the manifest's ``model``."""


class _At:
    """A fixed path of the run folder: ``folder.<attribute>`` is ``folder.root / rel``."""

    def __init__(self, rel: str) -> None:
        self.rel = rel

    def __get__(self, folder: RunFolder, owner: type[RunFolder] | None = None) -> Path:
        return folder.root / self.rel


class RunFolder:
    """Paths inside one run folder, plus reading and writing its plan."""

    manifest_path = _At(MANIFEST)
    report_json = _At(REPORT_JSON)
    report_md = _At(REPORT_MD)
    report_html = _At(REPORT_HTML)
    report_log = _At(REPORT_LOG)
    """The log of a detached report writer (``--report background``)."""
    plots_dir = _At(PLOTS)
    stdout_dir = _At(STDOUT)
    grades_dir = _At(GRADES)
    plan_path = _At(PLAN)

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def has_manifest(self) -> bool:
        """True when the folder holds a manifest.json (it is a run folder, not just a folder)."""
        return self.manifest_path.is_file()

    def grade_path(self, item: str) -> Path:
        return self.grades_dir / f"{item}.json"

    def result_path(self, item: str) -> Path:
        return self.root / RESULTS / f"{item}.json"

    def stdout_path(self, item: str, attempt: int) -> Path:
        return self.root / STDOUT / f"{item}.a{attempt}.json"

    def stderr_path(self, item: str, attempt: int) -> Path:
        return self.root / STDERR / f"{item}.a{attempt}.txt"

    def transcript_dir(self, item: str, attempt: int) -> Path:
        return self.root / TRANSCRIPTS / f"{item}.a{attempt}"

    def transcript_path(self, item: str, attempt: int, session_id: str) -> Path:
        return self.transcript_dir(item, attempt) / f"{session_id}.jsonl"

    def read_plan(self) -> list[PlanItem]:
        """Read plan.jsonl; a malformed line is a :class:`RunFolderError` naming the line."""
        if not self.plan_path.exists():
            raise RunFolderError.bad_input(f"{self.plan_path}: no plan.jsonl; is {self.root} a run folder?")
        items: list[PlanItem] = []
        with self.plan_path.open("rb") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:  # orjson's JSONDecodeError is a ValueError; a foreign schema_version is a SpecError
                    data = orjson.loads(line)
                    if isinstance(data, dict):
                        require_schema(data, f"{self.plan_path}:{lineno}", SCHEMA_VERSION, "plan", hint=_HINT)
                    items.append(PlanItem.model_validate(data))
                except ValueError as exc:
                    raise RunFolderError.bad_input(
                        f"{self.plan_path}:{lineno}: invalid plan line: {exc}"
                    ) from exc
        return items

    def write_plan(self, items: list[PlanItem]) -> None:
        """Rewrite plan.jsonl atomically."""
        data = b"".join(orjson.dumps(i.model_dump(mode="json")) + b"\n" for i in items)
        atomic_write_bytes(self.plan_path, data)


# ----------------------------------------------------------------------------------------------------------
# The manifest (manifest.json)


class ManifestCell(Spec):
    """One cell of the run, as built."""

    id: str
    """Cell id (``C0``)."""
    dirname: str
    """Folder name of the cell's environments (``c00``)."""
    label: str = ""
    """Human label."""
    stripped: list[str] = Field(default_factory=list)
    """Catalog layer ids the cell removes."""
    empty_config: bool = False
    """True when the cell starts from an empty config dir (``strip = "all"``)."""
    fingerprints: dict[str, object] = Field(default_factory=dict)
    """Per-layer fingerprints of the built environment (filled in when the cell is first built)."""
    leaks: list[object] = Field(default_factory=list)
    """Leaks the environment builder detected and could not remove (docs/ARCHITECTURE.md, "Leaks")."""
    notes: list[str] = Field(default_factory=list)
    """Builder notes (shared state, fingerprint mismatches)."""
    noop: str | None = None
    """Set when the cell is identical to the control by construction in this setup: why (then it is not
    tested)."""
    env: dict[str, str] = Field(default_factory=dict)
    """The effective process environment of the cell, secrets redacted."""
    aa_of: str | None = None
    """``--aa``: this cell is a second, independently built copy of that control (the A/A noise floor)."""
    kept: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    """``strip = "all"`` with ``keep``: the layers this cell keeps of nothing (a leave-one-in cell)."""
    pieces: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Piece ids the cell cuts (a piece run, docs/PIECES.md); absent for a layer cell."""


class ManifestTask(Spec):
    """One task of the run."""

    id: str
    """Task id."""
    sha256: str
    """Hash of the task file's bytes."""
    source: str
    """Where the task file was read from."""
    split: str
    """``dev`` or ``holdout``."""
    expects: list[str] = Field(default_factory=list)
    """Layers the author expects to matter."""
    max_turns: int | None = None
    """Per-task override of ``--max-turns``."""
    timeout_s: float | None = None
    """Per-task override of ``--timeout``."""


class ManifestSession(Spec):
    """One invocation of `ablate run` on this folder (the first one, each resume, a forced change)."""

    started_at: str
    """ISO-8601 UTC."""
    finished_at: str | None = None
    """ISO-8601 UTC; None while running or after a crash."""
    host: str
    """Host name."""
    pid: int
    """Process id of `ablate run`."""
    claude_version: str
    """The CLI version this invocation used."""
    claude_sha256: str
    """The CLI binary hash this invocation used."""
    model: str
    """The model this invocation used."""
    forced: bool = False
    """True when ``--force`` let it run despite a version or model mismatch."""
    outcome: str | None = None
    """finished, failed-items, budget, rate-limited, interrupted."""


class CliStarts(Spec):
    """How often the run started the ``claude`` binary, by purpose, over all its invocations; ``total`` is
    their sum (docs/ARCHITECTURE.md#manifest)."""

    total: int = 0
    sessions: int = 0
    """One per session attempt launched."""
    probe: int = 0
    """The probe's session of each probed cell (none when the folder's probe was kept, or ``--no-probe``)."""
    fidelity: int = 0
    """The probe's untouched-setup session, and the extra pairs drawn when its first pair differs."""
    baseline: int = 0
    """The probe's no-setup session, only when its cache (one per CLI build) had none."""
    version: int = 0
    """``claude --version``, only when ablate had not identified this binary build before."""

    def plus(self, counts: dict[str, int]) -> CliStarts:
        """These starts and ``counts`` (purpose → starts) together."""
        data = {k: v + counts.get(k, 0) for k, v in self.model_dump(exclude={"total"}).items()}
        return CliStarts(total=sum(data.values()), **data)


class EndpointInfo(Spec):
    """How the user's endpoint and auth reach the cells (values redacted)."""

    settings_env: dict[str, str] = Field(default_factory=dict)
    """Endpoint/auth keys the setup's settings files set."""
    helpers: list[str] = Field(default_factory=list)
    """Credential helpers the settings name (``apiKeyHelper``)."""
    applied: dict[str, str] = Field(default_factory=dict)
    """The endpoint/auth variables every cell gets from ablate's own environment."""
    simulated: bool = False
    """The endpoint was ablate.sim: every dollar figure of the run is simulated, not spent."""


class SetupInfo(Spec):
    """The manifest's ``setup``: the setup ablated, at which commit, and how its endpoint reaches the cells."""

    config_dir: str | None = None
    """The real config dir (``~/.claude``)."""
    repo: str | None = None
    """The real repository."""
    head: str | None = None
    """Its HEAD when the run was planned; a resume at another HEAD needs ``--force``."""
    dirty: bool = False
    """True when the repository had uncommitted changes."""
    dirty_files: list[str] = Field(default_factory=list)
    """The first 200 of them."""
    cell_set_source: str | None = None
    """The cell-set file (or built-in name) the cells came from."""
    ablate_toml: str | None = None
    """The setup's ``ablate.toml``, when one was used."""
    endpoint: EndpointInfo | None = None
    """Set by the run's one-endpoint check."""
    merged_with_force: list[str] = Field(default_factory=list)
    """Folders ``ablate merge --force`` combined despite differing identities."""


#: The ``isolation.network`` of a run opted in with ``--unsealed`` (also the id of the report's caveat that says so).
UNSEALED = "unsealed"
#: How a cell's note begins when its sessions saw an empty ``/tmp`` (the report's isolation caveat quotes it).
TMP_EMPTY = "/tmp shown empty"


class IsolationInfo(Spec):
    """The manifest's ``isolation``: the backend of the last invocation and why it was chosen."""

    backend: str
    """``namespace`` or ``links`` (see docs/ARCHITECTURE.md, "Isolation backends")."""
    mode: str = ""
    """``namespace``: ``root`` or ``user-namespace``; ``links``: ``fenced`` where a write fence ran, else empty."""
    reason: str = ""
    """Why it was chosen, in words."""
    locked: bool = False
    """The session ran in a further user and PID namespace with no capabilities: its view cannot be undone."""
    auth: dict[str, str] | None = None
    """How every cell authenticates (method and source, never the secret)."""
    real_files_changed: list[str] | None = None
    """Real home, config-dir and repo paths that changed during the invocation (the before/after listing)."""
    network: str = ""
    """``sealed``: each session had a network namespace of its own (no host port, abstract or file-system
    socket, private ``/dev`` and IPC) and reached the model only through ablate's forwarder (``wire/``);
    ``host``: ``--allow-network`` kept the host's network; ``unsealed``: no fence could be had; empty:
    recorded before this existed."""
    wire_differs: dict[str, list[str]] | None = None
    """Items whose transcript disagrees with what ablate's forwarder saw cross the wire (``wire/``) → how;
    their token totals and cost are the wire's."""
    limits: Limits | None = None
    """Each session's limits and how each was enforced here (docs/ARCHITECTURE.md#limits); None: recorded
    before limits existed."""
    fence_denied: dict[str, list[str]] | None = None
    """``links`` under a write fence: each path it refused a write to (``~/.gitconfig``) → the items whose
    sessions tried, over every result in the folder. A refused write changed those sessions' course."""
    hidden: list[str] | None = None
    """The credential paths every session read as empty (``~/.ssh``; those that existed at the start: the
    defaults and ``--hide``, docs/ARCHITECTURE.md#secrets); ``[]``: none hidden (no fence ran); None:
    recorded before this existed."""
    exposed: list[str] | None = None
    """Default credential paths ``--expose`` left readable."""

    def describe(self) -> str:
        """One line for people: ``namespace (user-namespace) — user namespaces work here``."""
        words = self.backend + (f" ({self.mode})" if self.mode else "")
        if self.reason:
            words += f" — {self.reason}"
        if self.real_files_changed:
            shown = ", ".join(self.real_files_changed[:5])
            words += f"; {len(self.real_files_changed)} real file(s) changed during the run: {shown}"
        return words


#: Fields that define the experiment; folders whose identities differ cannot be merged or resumed.
IDENTITY_FIELDS: tuple[str, ...] = (
    "claude",
    "model",
    "max_turns",
    "timeout_s",
    "argv",
    "max_retries",
    "cell_set",
    "tasks",
    "repeats",
    "seed",
    "plan_sha256",
    "items",
    "design",
    "models",
)


class RunManifest(Spec):
    """manifest.json: everything that defines a run, written at plan time and updated by each invocation."""

    schema_version: Literal[1] = SCHEMA_VERSION
    """Format version of this file."""
    run_id: str
    """The run's id (also the folder name, with a ``-shard-K-of-N`` suffix for a shard)."""
    created_at: str
    """ISO-8601 UTC time the plan was made."""
    ablate_version: str
    """ablate's version."""
    claude: ClaudeBinary
    """The CLI the run is pinned to."""
    model: str
    """``--model``, pinned for every session."""
    max_turns: int
    """``--max-turns`` (tasks may override)."""
    timeout_s: float | None = None
    """Per-session wall-clock limit in seconds (tasks may override)."""
    argv: list[str]
    """The pinned command line, with ``{session_id}`` and ``{prompt}`` placeholders."""
    max_retries: int
    """``CLAUDE_CODE_MAX_RETRIES`` given to every session (ablate owns the rate-limit backoff)."""
    cell_set: str
    """The cell set's name."""
    cells: list[ManifestCell]
    """The cells, in set order."""
    tasks: list[ManifestTask]
    """The tasks, in plan order."""
    repeats: int
    """Repeats per (task, cell)."""
    seed: int
    """The seed every block's order is drawn from."""
    plan_sha256: str
    """Hash of the plan's (item, order) lines: identical plans have identical hashes."""
    items: int
    """Number of items in the plan."""
    shard: str | None = None
    """``K/N`` when this folder runs one shard of the plan."""
    jobs: int = 1
    """Parallel sessions of the last invocation."""
    budget_usd: float | None = None
    """Spend limit of the last invocation."""
    setup: SetupInfo = Field(default_factory=SetupInfo)
    """The setup ablated: config dir, repo, HEAD, dirty files, endpoint."""
    host: str = ""
    """Host that made the plan."""
    isolation: IsolationInfo | None = None
    """The isolation backend of the last invocation (None until a session ran)."""
    sessions: list[ManifestSession] = Field(default_factory=list)
    """Every `ablate run` invocation on this folder, oldest first."""
    cli_starts: CliStarts = Field(default_factory=CliStarts, exclude_if=lambda v: not v.total)
    """The ``claude`` starts of the invocations that reached their sessions (:class:`CliStarts`); absent
    until one did (a planned folder reads as before)."""
    design: PieceDesignRecord | None = Field(default=None, exclude_if=lambda v: v is None)
    """A piece run's design (``ablate run --pieces``): its rows, cells and pieces; absent for a layer run."""
    models: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    """``--models``: every model the run pins its sessions to, the reference (``model``) first; each plan item
    names its own. Absent for a run of one model."""
    weak_checks: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Tasks run with ``--allow-weak-checks`` although their checks pass untouched or fail on their reference
    (probe.json's ``graders`` says how); absent when none."""

    @property
    def pinned_models(self) -> list[str]:
        """Every model the run's sessions are pinned to (``models``, else ``model``)."""
        return self.models or [self.model]

    def identity(self) -> dict[str, object]:
        """The experiment-defining part of the manifest (no times, hosts, shards or invocation history)."""
        data = self.model_dump(mode="json", include=set(IDENTITY_FIELDS))
        data["claude"].pop("path", None)
        for t in data["tasks"]:
            t.pop("source", None)
        data["cells"] = [
            {"id": c.id, "stripped": c.stripped, "empty_config": c.empty_config}
            | ({"pieces": c.pieces} if c.pieces else {})
            for c in self.cells
        ]
        data["setup_head"] = self.setup.head
        return data


def parse_manifest(data: dict[str, Any], source: str) -> RunManifest:
    """Validate a manifest document; another ``schema_version`` or a bad field: a :class:`SpecError`."""
    require_schema(data, source, SCHEMA_VERSION, "manifest", hint=_HINT)
    # an empty ``isolation`` object was written before any session had run
    if data.get("isolation") == {}:
        data = {**data, "isolation": None}
    try:
        return RunManifest.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problems_from_validation(source, exc)) from exc


def read_manifest(folder: RunFolder) -> RunManifest:
    """Read and validate manifest.json (missing: :class:`RunFolderError`; invalid: :class:`SpecError`)."""
    path = folder.manifest_path
    data = read_json_object(path)
    if data is None:
        raise RunFolderError.bad_input(f"{folder.root}: no manifest.json; is this a run folder?")
    return parse_manifest(data, str(path))


def write_manifest(folder: RunFolder, manifest: RunManifest) -> None:
    """Write manifest.json atomically."""
    data = orjson.dumps(manifest.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
    atomic_write_bytes(folder.manifest_path, data + b"\n")

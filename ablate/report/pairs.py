"""Flipped pairs: the control's session and a cell's of one block (task, repeat) where one passed and the other
failed on the primary outcome (a binary primary; otherwise pitfall-free), read from the run folder — results,
grades, transcripts (:func:`ablate.mine.parse.main_thread_records`, :mod:`ablate.mine.attachments`) and the
wire records (:func:`ablate.folder.wire.read_wire`). One data model for ``ablate show`` (text, ``--json``) and
the report's "Flipped pairs" section (``report.json``'s ``pairs``; report.html renders it lazily)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ablate.core.errors import UsageError
from ablate.folder.layout import ManifestCell
from ablate.folder.result import ItemResult
from ablate.folder.wire import read_wire, wire_path
from ablate.report.context import Context
from ablate.report.cost_per_pass import pass_metric
from ablate.report.items import Item
from ablate.report.model import Doc

#: Pairs per cell report.json embeds in full (every flip is counted and listed), and the caps of one session.
SHOWN_PER_CELL, MAX_TURNS, MAX_TEXT, MAX_ARG, MAX_DIFF = 5, 40, 800, 160, 200
#: The tool-input keys that name what a call acts on, most telling first.
_MAIN_ARGS = ("command", "file_path", "path", "pattern", "url", "skill", "subagent_type", "prompt", "description")  # fmt: skip


class Call(Doc):
    name: str
    arg: str = ""
    """The main argument (the command, the file, the pattern)."""


class Turn(Doc):
    text: str = ""
    calls: list[Call] = Field(default_factory=list)


class Outcome(Doc):
    name: str
    kind: Literal["check", "pitfall"]
    passed: bool | None
    detail: str = ""


class Side(Doc):
    """One session of a pair, as far as the run folder has it (``missing`` says what it lacks)."""

    item: str
    cell: str
    passed: bool | None = None
    status: str = ""
    prompt: str = ""
    turns: list[Turn] = Field(default_factory=list)
    answer: str = ""
    outcomes: list[Outcome] = Field(default_factory=list)
    context: list[str] = Field(default_factory=list)
    """What the transcript says reached the model: instruction files (by type and name), skills offered."""
    tokens: int | None = None
    """Input tokens of the first request on the wire (cached ones included)."""
    digests: dict[str, str] = Field(default_factory=dict)
    """The first request's system / tools / context digests on the wire."""
    missing: list[str] = Field(default_factory=list)


class Pair(Doc):
    task: str
    cell: str
    repeat: int
    control: Side
    other: Side
    diff: list[str] = Field(default_factory=list)
    """The context diff: the control's lines the cell lacked (``-``), the cell's the control lacked (``+``)."""
    differs: list[str] = Field(default_factory=list)
    """What the wire's digests say differed (system prompt, tool list, attached context)."""


class Flip(Doc):
    task: str
    repeat: int
    control_passed: bool


class CellFlips(Doc):
    cell: str
    strips: list[str] = Field(default_factory=list)
    """The layers (or a piece run's pieces) the cell strips."""
    pieces: bool = False
    blocks: int = 0
    """Blocks where both sessions are scored."""
    flipped: list[Flip] = Field(default_factory=list)


class Pairs(Doc):
    """``report.json``'s ``pairs``: every tested cell's flips, and the first pairs of each in full."""

    control: str
    metric: str
    cells: list[CellFlips] = Field(default_factory=list)
    shown: list[Pair] = Field(default_factory=list)


def _passed(it: Item | None, metric: str) -> bool | None:
    v = None if it is None else it.values.get(metric)
    return None if v is None else v >= 0.5


def cell_flips(ctx: Context, cell: ManifestCell) -> CellFlips:
    metric, scored = pass_metric(ctx.primary), ctx.items.scored
    out = CellFlips(cell=cell.id, strips=cell.pieces or ctx.layers[cell.id], pieces=bool(cell.pieces))
    for t in ctx.task_ids:
        for r in ctx.repeats:
            a, b = (_passed(scored.get((t, c, r)), metric) for c in (ctx.control.id, cell.id))
            if a is None or b is None:
                continue
            out.blocks += 1
            if a != b:
                out.flipped.append(Flip(task=t, repeat=r, control_passed=a))
    return out


def build_pairs(ctx: Context) -> Pairs:
    cells = [cell_flips(ctx, c) for c in ctx.tested]
    shown = [read_pair(ctx, c.cell, f.task, f.repeat) for c in cells for f in c.flipped[:SHOWN_PER_CELL]]
    return Pairs(control=ctx.control.id, metric=pass_metric(ctx.primary), cells=cells, shown=shown)


def _clip(text: str, n: int) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 1] + "…"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _call(block: dict[str, Any], cwd: str) -> Call:
    inp = _dict(block.get("input"))
    arg = str(next((inp[k] for k in _MAIN_ARGS if isinstance(inp.get(k), str)), ""))
    arg = arg.removeprefix(cwd + "/") if cwd else arg  # a file of the checkout by its path in the repository
    return Call(name=str(block.get("name", "?")), arg=_clip(" ".join(arg.split()), MAX_ARG))


def _read_transcript(side: Side, path: Path) -> None:
    """The prompt, the turns (one per model answer) and the context lines of one transcript."""
    from ablate.mine.attachments import read_load_evidence
    from ablate.mine.parse import main_thread_records

    turns: dict[str, Turn] = {}
    for rec in main_thread_records(path):
        msg = _dict(rec.get("message"))
        content = msg.get("content")
        if (
            not side.prompt
            and rec.get("type") == "user"
            and not rec.get("isMeta")
            and isinstance(content, str)
        ):
            side.prompt = _clip(content, MAX_TEXT * 2)
        if rec.get("type") != "assistant" or not isinstance(content, list):
            continue
        turn = turns.setdefault(str(msg.get("id") or len(turns)), Turn())
        for b in (b for b in content if isinstance(b, dict)):
            if b.get("type") == "text" and str(b.get("text", "")).strip():
                turn.text = _clip(f"{turn.text}\n{b['text']}", MAX_TEXT)
            elif b.get("type") == "tool_use":
                turn.calls.append(_call(b, str(rec.get("cwd") or "")))
    side.turns = list(turns.values())[:MAX_TURNS]
    side.answer = next((t.text for t in reversed(side.turns) if t.text), "")
    ev = read_load_evidence(path)
    for f in ev.instruction_files:
        side.context += [f"# {f['type']} {Path(f['path']).name}", *f["content"].splitlines()]
    if ev.listed:
        side.context += ["# skills and agents offered", *sorted(ev.listed)]
    if ev.hook_commands:
        side.context += ["# hooks run", *dict.fromkeys(ev.hook_commands)]


def read_side(ctx: Context, res: ItemResult | None, item: str, cell: str) -> Side:
    """One session of a pair from its result, grade, transcript and wire record."""
    from ablate.grade.record import read_grade

    side = Side(item=item, cell=cell)
    if res is None:
        side.missing.append("result (the session has not finished)")
        return side
    folder = ctx.folder
    side.status = res.status
    it = ctx.items.scored.get((res.task, res.cell, res.repeat))
    side.passed = _passed(it, pass_metric(ctx.primary))
    transcript = folder.transcript_path(item, res.attempt, res.session_id)
    try:
        _read_transcript(side, transcript)
    except OSError:
        side.missing.append(f"transcript ({transcript})")
    if res.wire is not None and res.wire.answer:
        side.answer = _clip(res.wire.answer, MAX_TEXT * 2)
    grade = read_grade(folder, item)
    checks = grade.checks_for(res.attempt) if grade is not None else None
    side.outcomes = [
        Outcome(name=c.name or f"{c.kind} {c.target}", kind="check", passed=c.passed, detail=c.detail)
        for c in (checks.results if checks is not None else [])
    ] + [Outcome(name=p, kind="pitfall", passed=not n) for p, n in sorted(res.pitfall_hits.items())]
    wire = [w for w in read_wire(wire_path(folder.root, item)) if w.attempt in (None, res.attempt)]
    if not wire:
        side.missing.append(f"wire record ({wire_path(folder.root, item)})")
        return side
    first = wire[0]
    side.tokens = sum(first.usage.get(k, 0) for k in ("input_tokens", "cache_creation_input_tokens"))
    side.tokens += first.usage.get("cache_read_input_tokens", 0)
    side.digests = {
        k: v
        for k, v in (("system prompt", first.system_sha256), ("tool list", first.tools_sha256),
                     ("attached context", first.context_sha256))
        if v
    }  # fmt: skip
    return side


def read_pair(ctx: Context, cell: str, task: str, repeat: int) -> Pair:
    """The control's and ``cell``'s sessions of block (task, repeat), and what the model received differently."""
    from ablate.folder.layout import item_id
    from ablate.folder.result import read_result

    model = ctx.model if ctx.manifest.models else None  # a run of several models: the context's
    items = {c: item_id(task, c, repeat, model) for c in (ctx.control.id, cell)}
    a, b = (read_side(ctx, read_result(ctx.folder, i), i, c) for c, i in items.items())
    diff = [
        ln
        for ln in difflib.unified_diff(a.context, b.context, lineterm="", n=0)
        if ln[:1] in "+-" and ln[:3] not in ("---", "+++")
    ]
    differs = [k for k in a.digests if k in b.digests and a.digests[k] != b.digests[k]]
    return Pair(
        task=task, cell=cell, repeat=repeat, control=a, other=b, diff=diff[:MAX_DIFF], differs=differs
    )


def choose(ctx: Context, pairs: list[CellFlips], cell: str, task: str | None, repeat: int | None) -> Pair:
    """The pair ``ablate show --cell C [--task T] [--repeat R]`` names (by default the first flipped one); a
    cell, task or repeat not in the run is a :class:`UsageError` listing the ones that are."""
    flips = {c.cell: c for c in pairs}
    if cell not in flips:
        raise UsageError(f"--cell {cell}: not a tested cell of this run", hint="cells: " + ", ".join(flips))
    if task is not None and task not in ctx.task_ids:
        raise UsageError(f"--task {task}: not a task of this run", hint="tasks: " + ", ".join(ctx.task_ids))
    if repeat is not None and repeat not in ctx.repeats:
        raise UsageError(
            f"--repeat {repeat}: not a repeat of this run",
            hint="repeats: " + ", ".join(map(str, ctx.repeats)),
        )
    if mine := [f for f in flips[cell].flipped if task in (None, f.task) and repeat in (None, f.repeat)]:
        return read_pair(ctx, cell, mine[0].task, mine[0].repeat)
    if task is None:
        raise UsageError(f"--cell {cell}: no pair of it flipped", hint="name one with --task T [--repeat R]")
    return read_pair(ctx, cell, task, ctx.repeats[0] if repeat is None else repeat)

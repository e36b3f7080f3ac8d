"""``ablate mine``, ``ablate recover`` and ``ablate usage``: thin shells over the transcript miner, recovery and
the history count (:mod:`ablate.mine.usage`: the library counts, this module renders)."""

from __future__ import annotations

import os
import re
import sys
from datetime import UTC, datetime
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from ablate.cli.common import ConfigDir, Json, cli_errors, default_config_dir, print_json
from ablate.core.errors import EXIT_PARTIAL, NotFound, UsageError

if TYPE_CHECKING:  # the miner is loaded by the commands that mine, not by every `ablate` command
    from ablate.mine.model import SessionResult
    from ablate.setup.tasks import PitfallPattern

app = typer.Typer()


Workers = Annotated[
    int, typer.Option("--jobs", "-j", min=1, help="Worker processes (default: the number of CPUs).")
]


class By(StrEnum):
    tool = "tool"
    skill = "skill"
    file = "file"


def _pitfalls(specs: list[str]) -> list[PitfallPattern]:
    if not specs:
        return []
    from ablate.setup.tasks import PitfallPattern  # pydantic-backed: loaded only when --pitfall is given

    out = []
    for spec in specs:
        pid, sep, pattern = spec.partition("=")
        if not sep or not pid or not pattern:
            raise UsageError(f"--pitfall {spec!r}: expected ID=REGEX")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"--pitfall {spec!r}: invalid regex: {exc}") from None
        out.append(PitfallPattern(pid, pattern, "text"))
    return out


def _row(r: SessionResult) -> list[Any]:
    cost = "" if r.cost_usd is None else f"{r.cost_usd:.4f}{'*' if r.cost_estimated else ''}"
    t = r.total
    return [
        (r.session_id or r.transcript.stem)[:13],
        r.status + (f" {r.api_error_status}" if r.api_error_status else ""),
        r.turns,
        f"{r.main.api_calls}/{r.subagents.api_calls}",
        t.input_tokens,
        t.output_tokens,
        t.cache_read_tokens,
        cost,
        t.tool_calls,
        len(t.file_reads),
        ",".join(s.skill for s in t.skills_invoked),
        t.retry_records,
    ]


def _items(r: SessionResult, by: By) -> list[tuple[str, int, str | None]]:
    """What one session adds to the ``--by`` table: (key, calls, skill outcome)."""
    t = r.total
    if by is By.tool:
        return [(k, v, None) for k, v in t.tool_histogram.items()]
    if by is By.file:
        return [(k, v, None) for k, v in t.file_reads.items()]
    return [(s.skill, 1, s.outcome) for s in t.skills_invoked]


def _view(r: SessionResult, by: By | None, json: bool) -> tuple[Any, str | None]:
    """One session's share of the output and its damage note, computed where it was mined (a worker
    process sends back these few bytes, not the whole result)."""
    note = None
    if r.malformed_lines or r.truncated_lines or r.unknown_record_types:
        note = (
            f"note: {r.transcript}: {r.malformed_lines} malformed, {r.truncated_lines} truncated lines, "
            f"unknown record types {r.unknown_record_types or '{}'}"
        )
    if by is not None:
        return _items(r, by), note
    return (orjson.dumps(r.to_json(), option=orjson.OPT_NON_STR_KEYS) if json else _row(r)), note


_HEADERS = ["session", "status", "turns", "calls m/s", "in", "out", "cache rd", "cost $", "tools", "files"]
_HEADERS += ["skills", "retries"]


def _emit_jsonl(obj: object) -> None:
    typer.echo(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode())


@app.command()
@cli_errors
def mine(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Session transcripts (.jsonl) or folders: a `projects/` tree, a run folder."),
    ],
    json: Json = False,
    by: Annotated[
        By | None,
        typer.Option(
            "--by", help="Aggregate over all sessions by tool, skill or file instead of per session."
        ),
    ] = None,
    pitfall: Annotated[
        list[str] | None,
        typer.Option(
            "--pitfall", help="ID=REGEX: count case-insensitive matches in assistant text (repeat)."
        ),
    ] = None,
    jobs: Workers = os.cpu_count() or 1,
) -> None:
    """Mine Claude Code session transcripts: calls, tokens, cost, turns, tools, files, skills, status.

    Prints one table row per session, or with --json one JSON object per line (fields in docs/GUIDE.md,
    "Mining transcripts"). Sub-agent transcripts (<session>/subagents/) are folded into their session.
    Malformed lines and unknown record types are counted, never fatal. Cost marked * is estimated from
    list prices.

    Exit codes: 0 ok; 2 a path does not exist, no session transcript was found, or a bad --pitfall;
    3 some transcripts could not be read (the others are still printed); 130 interrupted.
    """
    from ablate.mine.discover import iter_sessions, mine_each

    missing = [p for p in paths if not p.exists()]
    if missing:
        raise NotFound(f"{missing[0]}: no such file or folder")
    pitfalls = _pitfalls(pitfall or [])
    rows: list[list[Any]] = []
    agg: dict[str, dict[str, Any]] = {}
    found = unreadable = 0
    out = getattr(sys.stdout, "buffer", None) if json and by is None else None  # none in a StringIO
    view = partial(_view, by=by, json=json)
    for _transcript, r in mine_each(iter_sessions(paths), view, pitfalls=pitfalls, jobs=jobs):
        if isinstance(r, OSError):
            unreadable += 1
            typer.echo(f"warning: {r}", err=True)
            continue
        found += 1
        part, note = r
        if by is not None:
            _aggregate(agg, part, by)
        elif out is not None:
            out.write(part + b"\n")
        elif json:
            typer.echo(part.decode())
        else:
            rows.append(part)
        if note:
            typer.echo(note, err=True)
    if not found and not unreadable:
        raise NotFound("no session transcripts found in " + ", ".join(str(p) for p in paths))
    if by is not None:
        _print_aggregate(agg, by, json)
    elif not json:
        from tabulate import tabulate

        typer.echo(tabulate(rows, headers=_HEADERS))
    if unreadable:
        raise typer.Exit(EXIT_PARTIAL)


def _aggregate(agg: dict[str, dict[str, Any]], items: list[tuple[str, int, str | None]], by: By) -> None:
    seen: set[str] = set()
    for key, n, outcome in items:
        entry = agg.setdefault(key, {by.value: key, "calls": 0, "sessions": 0})
        entry["calls"] += n
        if outcome is not None:
            entry[outcome] = entry.get(outcome, 0) + 1
        if key not in seen:
            entry["sessions"] += 1
            seen.add(key)


def _print_aggregate(agg: dict[str, dict[str, Any]], by: By, json: bool) -> None:
    entries = sorted(agg.values(), key=lambda e: (-e["calls"], e[by.value]))
    if json:
        for e in entries:
            _emit_jsonl(e)
        return
    from tabulate import tabulate

    cols = [by.value, "calls", "sessions"]
    if by is By.skill:
        cols += ["ok", "unknown", "denied", "error", "no_result"]
    typer.echo(tabulate([[e.get(c, 0) for c in cols] for e in entries], headers=cols))


@app.command()
@cli_errors
def recover(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (runs/<run-id>).")],
    json: Json = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would be recovered; write nothing.")
    ] = False,
    jobs: Workers = os.cpu_count() or 1,
) -> None:
    """Rebuild results from transcripts where stdout is missing, empty, corrupt or a rate-limit stub.

    For each item, the latest attempt's stdout is checked; when it is not a valid result, the result is
    mined from the transcript and written to results/<item>.json (atomically, never over a better result),
    marking which fields were recovered or estimated and the difference between the transcript's cost and
    turns and the CLI's, wherever both exist. Rate-limited sessions are not results: they need a re-run.

    Exit codes: 0 every item has a result or a valid stdout; 2 the folder does not exist or is not a run
    folder (no plan.jsonl, a torn one), or cannot be written; 3 some items could not be recovered (no transcript, rate limited);
    130 interrupted.
    """
    from ablate.run.recover import recover_run  # pydantic-backed run-folder models: loaded only when needed

    rows: list[list[Any]] = []
    unrecovered = 0
    for rec in recover_run(run_dir, write=not dry_run, jobs=jobs):
        if rec.action == "needs_rerun":
            unrecovered += 1
        if json:
            _emit_jsonl(rec.to_json())
            continue
        r = rec.result
        diffs = ", ".join(
            f"{k} {v.get('difference'):+g}"
            for k, v in (r.reconciliation.items() if r else [])
            if isinstance(v.get("difference"), (int, float))
        )
        rows.append(
            [
                rec.item,
                rec.attempt,
                rec.stdout_kind,
                rec.action,
                r.status if r else "",
                "" if not r or r.cost_usd is None else f"{r.cost_usd:.4f}{'*' if r.cost_estimated else ''}",
                r.turns if r else "",
                ",".join(r.estimated_fields) if r else "",
                diffs,
                rec.reason,
            ]
        )
    if not json:
        from tabulate import tabulate

        headers = ["item", "att", "stdout", "action", "status", "cost $", "turns", "estimated", "vs cli"]
        typer.echo(tabulate(rows, headers=[*headers, "reason"]))
    if unrecovered:
        raise typer.Exit(EXIT_PARTIAL)


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--since {value!r}: not a date", hint="use an ISO date such as 2026-11-01 or 2026-11-01T09:00"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _cell(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _render(doc: dict[str, Any], facts: list[str]) -> None:
    from tabulate import tabulate

    s, w = doc["sessions"], doc["window"]
    where = w["repo"] or "all projects"
    span = f"{(w['first'] or '')[:10]} .. {(w['latest'] or '')[:10]}" if w["first"] else "no sessions"
    typer.echo(f"{s['count']} sessions of {where} in {w['config_dir']} ({span})")
    rows = [
        [
            r["id"],
            {True: "yes", False: "no", None: "?"}[r["on_disk"]],
            _cell(r["loaded_sessions"]) if r["loads"] != "on demand" else "on demand",
            r["used_sessions"],
            "".join(f"{t['what']} ({t['kind']} x{t['count']})" for t in r["uses"][:1]),
        ]
        for r in doc["layers"]
    ]
    typer.echo(tabulate(rows, headers=["layer", "on disk", "loaded", "used", "most used"]))
    skipped = {k: s[k] for k in ("empty_files", "junk_files", "unreadable_files") if s[k]}
    lines = {k: s[k] for k in ("malformed_lines", "truncated_lines") if s[k]}
    if skipped or lines:
        typer.echo(f"\ncounted, not sessions: {skipped or '{}'}; lines skipped: {lines or '{}'}")
    if facts:
        typer.echo("")
        for fact in facts:
            typer.echo(f"- {fact}")


def _render_suggest(sug: dict[str, Any]) -> None:
    typer.echo("\ncells worth running (strip one layer each, against C0):")
    for c in sug["cells"]:
        typer.echo(
            f"  {c['strip']:18s} used in {c['used_sessions']}, loaded in {_cell(c['loaded_sessions'])}"
        )
    for c in sug["left_out"]:
        typer.echo(f"  (left out) {c['layer']}: {c['why']}")
    if sug["tasks"]:
        typer.echo("\ntask candidates from your own sessions (turn them into tasks/*.toml):")
        for t in sug["tasks"]:
            typer.echo(
                f"  {t['date'] or '?':10s} {t['session_id']}  [{t['layer']}]  {t['first_prompt'][:90]}"
            )


@app.command()
@cli_errors
def usage(
    config_dir: ConfigDir = None,
    repo: Annotated[
        Path | None,
        typer.Option("--repo", help="The repository whose sessions are read (default: the current folder)."),
    ] = None,
    all_projects: Annotated[
        bool, typer.Option("--all-projects", help="Read the sessions of every project, not one repository.")
    ] = False,
    since: Annotated[
        str | None, typer.Option("--since", help="Only sessions started on or after this ISO date.")
    ] = None,
    suggest: Annotated[
        bool,
        typer.Option(
            "--suggest", help="Also print the cells worth running and task candidates from real prompts."
        ),
    ] = False,
    json: Json = False,
    jobs: Workers = os.cpu_count() or 1,
) -> None:
    """What your own session history says about each layer: loaded in how many sessions, used in how many.

    Reads <config dir>/projects/**/*.jsonl (sub-agent transcripts folded in) and never writes there. Every
    count is exact. Empty, junk and unreadable .jsonl files and torn lines are counted, never fatal.
    It tells which cells are worth running; it is never mixed into a run's counterfactual numbers.

    Exit codes: 0 ok; 2 bad input (missing config dir, --repo with --all-projects, bad --since); 130 interrupted.
    """
    from ablate.mine.suggest import key_facts, suggest as suggest_cells
    from ablate.mine.usage import Scope, usage_report

    if all_projects and repo is not None:
        raise UsageError("--repo and --all-projects exclude each other", hint="pass one of them")
    scope_repo = None if all_projects else (repo or Path("."))
    if scope_repo is not None and not scope_repo.is_dir():
        raise UsageError(f"{scope_repo}: not a folder", hint="pass --repo with the repository's folder")
    scope = Scope(config_dir or default_config_dir(), scope_repo, since=_since(since))
    result = usage_report(scope, jobs=jobs)
    doc = result.doc
    sug = suggest_cells(result) if suggest else None
    if json:
        out = {**doc, "suggest": sug} if sug is not None else doc
        print_json(out)
        return
    _render(doc, key_facts(doc))
    if sug is not None:
        _render_suggest(sug)

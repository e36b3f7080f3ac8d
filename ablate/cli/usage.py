"""``ablate usage``: a thin shell over :mod:`ablate.mine.usage` (the library counts, this module renders)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from ablate.cli.common import ConfigDir, Json, cli_errors, default_config_dir, print_json
from ablate.cli.mine import Workers
from ablate.core.errors import UsageError

app = typer.Typer()


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

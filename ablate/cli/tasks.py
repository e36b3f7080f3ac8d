"""``ablate tasks suggest``: a thin shell over :mod:`ablate.mine.drafts` (the library drafts, this module writes
and says where)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ablate.cli.common import ConfigDir, Json, cli_errors, default_config_dir, print_json
from ablate.core.errors import UsageError

app = typer.Typer(
    help="Tasks: `ablate tasks suggest` drafts them from your history; `ablate tasks check` vets their checks."
)


@app.command()
@cli_errors
def suggest(
    config_dir: ConfigDir = None,
    repo: Annotated[
        Path,
        typer.Option("--repo", help="The repository whose sessions are read (default: the current folder)."),
    ] = Path("."),
    count: Annotated[int, typer.Option("--count", "-n", min=1, help="Most drafts to write.")] = 5,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder the drafts are written to.")] = Path(
        "tasks/drafts"
    ),
    force: Annotated[bool, typer.Option("--force", help="Replace draft files that exist.")] = False,
    json: Json = False,
) -> None:
    """Draft task files from the most representative sessions of your history (as `ablate usage` reads it).

    Each draft holds a session's first prompt, the repository's HEAD and pitfalls suggested from the session's
    tool errors and your corrections, and carries `draft = true`: `run`, `ab` and `compare` refuse it (exit 2)
    until you have reviewed it and deleted that line. Nothing is run.

    Exit codes: 0 ok (also when there is nothing to draft); 2 bad input (missing config dir, a draft file
    exists without --force); 130 interrupted.
    """
    from ablate.mine.drafts import draft_tasks, write_drafts
    from ablate.mine.usage import Scope

    if not repo.is_dir():
        raise UsageError(f"{repo}: not a folder", hint="pass --repo with the repository's folder")
    drafts = draft_tasks(Scope(config_dir or default_config_dir(), repo), count=count)
    paths = write_drafts(drafts, out, force=force) if drafts else []
    if json:
        doc = [
            {"id": d.id, "file": str(p), "session_id": d.session_id, "started": d.started, "why": d.why,
             "pitfalls": d.pitfalls}
            for d, p in zip(drafts, paths, strict=True)
        ]  # fmt: skip
        print_json({"drafts": doc})
        return
    if not drafts:
        typer.echo("no session with a prompt in this repository's history: nothing to draft")
        return
    for d, p in zip(drafts, paths, strict=True):
        typer.echo(f"{p}  ({d.pitfalls} suggested pitfalls) — {d.why}")
    typer.echo("\nreview each draft, then delete its `draft = true` line; until then `ablate run` refuses it")


@app.command("check")
@cli_errors
def check(
    tasks: Annotated[list[Path], typer.Argument(help="Task files, folders of them or plugin-eval suites.")],
    repo: Annotated[
        Path, typer.Option("--repo", help="The repository the tasks run in (default: the current folder).")
    ] = Path("."),
    json: Json = False,
) -> None:
    """Check the tasks' checks for free, as `ablate run` does before its first session: each task's checks on
    the untouched checkout (HEAD with its seed files, as if the model did nothing) and on its `reference`.

    A task whose checks all pass untouched, or fail on its reference, cannot tell doing nothing from doing the
    task: it is named with each check and what it saw, unless it says `guard_only = true`. Nothing is run.

    Exit codes: 0 every task's checks tell (or it has none, or is guard only); 2 a weak task, or bad input (a
    task file, a reference patch that does not apply, not a git repository); 130 interrupted.
    """
    from ablate.core.errors import NotARepo
    from ablate.core.gitutil import run_git
    from ablate.grade.vet import vet_tasks
    from ablate.setup.taskset import load_tasks

    loaded = load_tasks(tasks)
    head = run_git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False)
    if head.returncode != 0:
        raise NotARepo(f"{repo}: not a git repository with commits", hint="pass --repo with the repository")
    record = vet_tasks(loaded, repo, head.stdout.strip())
    if json:
        print_json(record)
    else:
        vetted = {t["id"]: t for t in record["tasks"]}
        for t in loaded:
            v = vetted.get(t.id)
            if v is None:
                typer.echo(f"{t.id}: no checks")
            elif v["weak"]:
                typer.echo(f"{t.id}: WEAK — {v['weak']}")
            else:
                passed = sum(1 for r in v["untouched"] if r["passed"])
                ref = v["reference"]
                said = f"{passed}/{len(v['untouched'])} checks pass untouched" + (
                    f", {sum(1 for r in ref if r['passed'])}/{len(ref)} on the reference"
                    if ref is not None
                    else ""
                )
                typer.echo(f"{t.id}: {'guard only' if v['guard_only'] else 'ok'} ({said})")
    if record["weak"]:
        raise typer.Exit(2)

"""``ablate pieces``: the setup's pieces (docs/PIECES.md), what each weighs, and their ids."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ablate.cli.common import (
    PROBE_OPTIONS,
    SETUP_OPTIONS,
    Json,
    cli_errors,
    load_setup_options,
    print_json,
    takes,
)
from ablate.core.errors import EXIT_FAILURE

app = typer.Typer()

PiecesOpt = Annotated[
    str | None,
    typer.Option(
        "--pieces",
        metavar="ID,...",
        help="Only these pieces (ids as listed); an unknown id is an error (exit 2).",
    ),
]


@app.command("pieces")
@cli_errors
@takes(SETUP_OPTIONS, PROBE_OPTIONS)
def pieces_cmd(
    json_out: Json = False,
    only: PiecesOpt = None,
    measure: Annotated[
        bool,
        typer.Option(
            "--measure",
            help="Measure tokens from the captured first requests: the real CLI once per piece and once "
            "for the control, against the local capture endpoint (free; ~1.5 s of CPU per start).",
        ),
    ] = False,
    **options: Any,
) -> None:
    """List the setup's pieces: the units below a layer that a piece cell removes one by one.

    A piece is one CLAUDE.md section (a Markdown heading and the text up to the next heading; the text
    before the first heading is the `preamble` piece), one imported file (axioms.md, lessons.md), one skill
    folder, one hook entry of settings.json (event, matcher, command), one MCP server (mcpServers of
    .claude.json, settings.json and the repository's .mcp.json), one agent, command, rule file or output style, one auto-memory file: in
    the config dir and in the repository (its CLAUDE.md files, .claude/ skills, commands, agents and
    settings hooks, and each file of its knowledge: MEMORY.md, docs/runbooks, docs/decisions, findings,
    handoffs and plans, nested CLAUDE.md files).

    Each piece has a stable readable id, `<layer>#<name>` (`user-claude-md#money`); a heading repeated in
    one file gets `-2`, `-3` in file order (a note names them). `tokens` is what the piece adds to the first
    request, estimated from its text as the simulated endpoint counts (4 characters a token):
    `tokens_source` = `estimate`. A section, imported file, rule or output style counts whole; a skill,
    agent or command its listing line; a hook, MCP server or knowledge file 0 (its output, tools or text
    appear only at run time); an auto-memory file 0 but MEMORY.md, the index the CLI loads.

    --measure runs the real CLI instead (against the local capture endpoint: free): the control and one
    cell per piece, each proved to differ from the control by exactly its piece (as `ablate probe
    --pieces`); `tokens` is then the difference of the two first requests' characters / 4, with
    `tokens_source` = `request` (a piece whose cell failed the check keeps its estimate, and says so).

    Without --measure: reads the config dir and the repository's live working tree; writes nothing, runs
    nothing.

    Exit codes: 0 ok; 1 --measure: a piece cell failed the probe's check; 2 bad input (missing config dir
    or repo, an unknown piece id, fewer than two pieces: a piece design needs two).
    """
    from ablate.setup.piece_cut import require_pieces, select_pieces
    from ablate.setup.pieces import repeated_headings, setup_pieces

    catalog, setup = load_setup_options(options)
    pieces = setup_pieces(setup, catalog)
    if only is not None:
        pieces = select_pieces(pieces, [i.strip() for i in only.split(",") if i.strip()])
    require_pieces(pieces, where=f"{setup.config_dir} + {setup.repo}")
    notes = repeated_headings(pieces)
    rows = [p.to_json() for p in pieces]
    ok = True
    if measure:
        from ablate.core.claude import find_claude
        from ablate.probe.piece_tokens import measure_pieces

        measured = measure_pieces(
            setup,
            catalog,
            pieces,
            find_claude(options["claude_bin"]),
            isolation=options["isolation"],
            with_mcp=options["with_mcp"],
        )
        rows, ok = measured.rows, measured.probe.ok
        notes += [f"{c.id}: {c.verdict}: {'; '.join(c.problems)}" for c in measured.probe.cells if c.problems]
    if json_out:
        print_json({"pieces": rows, "notes": notes, "ok": ok})
    else:
        table = [
            [r["id"], r["kind"], r["side"], r["file"], r["bytes"], r["tokens"], r["tokens_source"]]
            for r in rows
        ]
        from tabulate import tabulate

        typer.echo(tabulate(table, headers=["id", "kind", "side", "file", "bytes", "tokens", "source"]))
        typer.echo(
            f"{len(pieces)} pieces; tokens: estimate = from the piece's text, request = measured from the "
            "captured first requests (both 4 characters a token)"
        )
        for note in notes:
            typer.echo(f"note: {note}")
    if not ok:
        raise typer.Exit(EXIT_FAILURE)

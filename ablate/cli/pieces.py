"""``ablate pieces``: the setup's pieces (docs/PIECES.md), what each weighs, and their ids."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from tabulate import tabulate

from ablate.cli.common import AblateToml, ConfigDir, Json, Repo, cli_errors, default_config_dir, print_json

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
def pieces_cmd(
    config_dir: ConfigDir = None,
    repo: Repo = Path("."),
    json_out: Json = False,
    ablate_toml: AblateToml = None,
    only: PiecesOpt = None,
) -> None:
    """List the setup's pieces: the units below a layer that a piece cell removes one by one.

    A piece is one CLAUDE.md section (a Markdown heading and the text up to the next heading; the text
    before the first heading is the `preamble` piece), one imported file (axioms.md, lessons.md), one skill
    folder, one hook entry of settings.json (event, matcher, command), one MCP server (mcpServers of
    .claude.json and settings.json), one agent, command, rule file or output style: in the config dir and
    in the repository (its CLAUDE.md files and .claude/ skills, commands, agents and settings hooks).

    Each piece has a stable readable id, `<layer>#<name>` (`user-claude-md#money`); a heading repeated in
    one file gets `-2`, `-3` in file order (a note names them). `tokens` is what the piece adds to the first
    request, estimated from its text as the simulated endpoint counts (4 characters a token):
    `tokens_source` = `estimate`. A section, imported file, rule or output style counts whole; a skill,
    agent or command its listing line; a hook or MCP server 0 (its output or tools appear at run time:
    `ablate probe` on piece cells measures the real difference of the captured requests).

    Reads the config dir and the repository's live working tree; writes nothing, runs nothing.

    Exit codes: 0 ok; 2 bad input (missing config dir or repo, an unknown piece id, fewer than two
    pieces: a piece design needs two).
    """
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import load_setup
    from ablate.setup.piece_cut import require_pieces, select_pieces
    from ablate.setup.pieces import repeated_headings, setup_pieces

    catalog = load_catalog(ablate_toml)
    setup = load_setup(config_dir or default_config_dir(), repo)
    pieces = setup_pieces(setup, catalog)
    if only is not None:
        pieces = select_pieces(pieces, [i.strip() for i in only.split(",") if i.strip()])
    require_pieces(pieces, where=f"{setup.config_dir} + {setup.repo}")
    notes = repeated_headings(pieces)
    if json_out:
        print_json({"pieces": [p.to_json() for p in pieces], "notes": notes})
        return
    rows = [[p.id, p.kind, p.side, p.file, p.bytes, p.est_tokens] for p in pieces]
    typer.echo(tabulate(rows, headers=["id", "kind", "side", "file", "bytes", "~tokens"]))
    typer.echo(f"{len(pieces)} pieces; ~tokens: estimated from the text (4 characters a token)")
    for note in notes:
        typer.echo(f"note: {note}")

"""``ablate probe`` (the free isolation proof: the real CLI against the capture endpoint, once per cell) and
``ablate pieces`` (the setup's pieces, docs/PIECES.md: what each weighs, measured the same way with --measure)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from ablate.probe.probe import ProbeResult

from ablate.cli.common import (
    JOBS,
    PROBE_OPTIONS,
    SETUP_OPTIONS,
    Cells,
    Jobs,
    Json,
    cli_errors,
    load_setup_options,
    print_json,
    takes,
)
from ablate.core.errors import EXIT_FAILURE

app = typer.Typer()

_MARK = {
    "ok": "ok",
    "leak": "LEAK",
    "missing": "MISSING",
    "generic": "?",
    "unprobed": "n/p",
    "unobservable": "~",
    "not-in-setup": ".",
}


def _mark(chk: Any) -> str:
    """A layer's mark in the matrix: ``+``/``-`` when it was seen as expected, else its status's."""
    if chk.status == "ok":
        return "+" if chk.expected == "present" else "-"
    return _MARK[chk.status]


def render(result: ProbeResult) -> str:
    from tabulate import tabulate

    layer_ids = [lid for lid, fp in result.fingerprints.items() if fp["kind"] != "absent"]
    header = ["cell", "verdict", *layer_ids]
    rows = [[c.id, c.verdict, *(_mark(c.layers[lid]) for lid in layer_ids)] for c in result.cells]
    lines = [
        tabulate(rows, headers=header),
        "legend: + kept and seen, - stripped and not seen, LEAK stripped but seen, MISSING kept but not seen,",
        "        ~ not observable in a probe session, ? too generic to fingerprint, n/p not probed",
    ]
    for c in result.cells:
        if c.verdict != "faithful":
            detail = "; ".join(
                [
                    f"{lid}: {chk.status} ({chk.evidence})"
                    for lid, chk in c.layers.items()
                    if chk.status in ("leak", "missing")
                ]
                + [f"foreign instruction file {f}" for f in c.foreign_files]
                + c.problems
            )
            lines.append(f"{c.id} {c.verdict}: {detail or c.note}")
        for pid, chk in c.pieces.get("pieces", {}).items():
            lines.append(f"  {c.id} piece {pid}: {chk['status']} ({chk['evidence']})")
    for lid, fp in result.fingerprints.items():
        if fp["kind"] in ("unobservable", "unprobed") or "cannot show" in fp["reason"]:
            lines.append(f"note: {lid}: {fp['reason']}")
    fid = result.fidelity
    if fid.get("checked"):
        lines.append(
            f"shadow fidelity: {'equal' if fid['equal'] else 'DIFFERENT'} ({fid['compared']}; ignoring {', '.join(fid['ignored'])})"
        )
        lines.extend(f"  {d}" for d in fid.get("differences", []))
    else:
        lines.append(f"shadow fidelity: not checked ({fid.get('reason')})")
    if result.leaks:
        lines.append("leaks ablate cannot remove (every cell alike):")
        lines.extend(f"  - [{lk.kind}] {lk.path}: {lk.detail}" for lk in result.leaks)
    lines.extend(f"note: {n}" for n in result.notes)
    if result.isolation:
        lines.append(f"isolation: {result.isolation['backend']} ({result.isolation['reason']})")
    if not result.real_setup_unchanged:
        lines.append(
            "ERROR: your real home, config dir or repository changed during the probe (see the notes)"
        )
    per_cell = result.duration_s / max(1, len(result.cells))
    lines.append(
        f"{'OK' if result.ok else 'NOT FAITHFUL'}: {len(result.cells)} cells in {result.duration_s:.1f} s "
        f"({per_cell:.1f} s per cell), claude {result.claude['version']}"
    )
    return "\n".join(lines)


@app.command("probe")
@cli_errors
@takes(SETUP_OPTIONS, PROBE_OPTIONS)
def probe_cmd(
    cells: Cells = "layered",
    only: Annotated[
        list[str] | None, typer.Option("--cell", help="Probe only these cell ids (repeatable).")
    ] = None,
    jobs: Jobs = JOBS,
    work: Annotated[
        Path | None,
        typer.Option("--work", help="Keep the probe's cells, requests and transcripts in this folder."),
    ] = None,
    json_out: Json = False,
    pieces: Annotated[
        str | None,
        typer.Option(
            "--pieces",
            metavar="all|ID,...",
            help="Probe piece cells instead of --cells: the control and one cell per piece (ids as "
            "`ablate pieces` lists them), each checked to differ from the control by exactly that piece.",
        ),
    ] = None,
    **options: Any,
) -> None:
    """Prove which layers reach the model in every cell, for free.

    Builds every cell, runs the real claude CLI once per cell against a local capture endpoint (no API key,
    no cost) and prints a matrix cells x layers: expected (from the cell) against observed (from the captured
    requests and the transcript's instructions, skill_listing and hook records; repo docs, which are
    never auto-loaded, from each cell's checkout). Fingerprints come from your real layer content; a layer
    too generic to fingerprint is said to be so, and a kept layer that cannot show in a one-prompt session
    (silent, async, tool or end-of-session hooks; a skill the CLI does not list) is shown as ~, not MISSING.
    Every session is forced to the capture endpoint whatever your environment (provider switches, cloud
    credentials, proxies and real keys are removed). It also checks shadow fidelity: C0's request equals the
    one your untouched setup produces (with --isolation namespace, in its own copy-on-write view at the real
    paths: byte for byte apart from the session id, the billing header and the order of concurrent hook
    outputs, nothing about git ignored; with links, apart from paths and project slugs too). When the first
    pair differs, up to two more pairs run (namespace) and C0 passes only if one of its requests equals one
    of the untouched setup's: a SessionStart hook that edits the repository makes your own start-up differ
    from session to session, and the output says so.

    With --pieces, every piece cell's first request must be the control's with exactly that piece's text
    gone (docs/PIECES.md#probe); a cell set whose cells cut pieces (`strip_pieces`) is checked the same way.

    Exit codes: 0 every cell faithful (or no-op), 1 a cell leaked, missed a layer or failed, or the fidelity
    check failed, 2 bad input (setup, cell set, claude binary).
    """
    from ablate.core.claude import find_claude
    from ablate.probe.probe import probe
    from ablate.setup.cells import load_cell_set
    from ablate.setup.piece_cells import piece_probe_set

    catalog, setup = load_setup_options(options)
    cell_set = load_cell_set(cells, catalog) if pieces is None else piece_probe_set(setup, catalog, pieces)
    claude = find_claude(options["claude_bin"])
    if not claude.pinned and not json_out:
        typer.echo(
            f"warning: claude {claude.version} is not the pinned version; recording and continuing", err=True
        )
    result = probe(
        setup,
        catalog,
        cell_set,
        claude,
        work=work,
        cell_ids=only,
        with_mcp=options["with_mcp"],
        jobs=jobs,
        isolation=options["isolation"],
        on_cell=None if json_out else lambda cid, what: typer.echo(f"  {cid}: {what}", err=True),
    )
    if json_out:
        print_json(result.to_json())
    else:
        typer.echo(render(result))
    if not result.ok:
        raise typer.Exit(EXIT_FAILURE)


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

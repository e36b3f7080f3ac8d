"""``ablate layers`` and ``ablate cells``: what a setup is made of, and what each cell would strip."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ablate.cli.common import (
    SETUP_OPTIONS,
    AblateToml,
    ConfigDir,
    Json,
    cell_set_names,
    cli_errors,
    default_config_dir,
    load_setup_options,
    print_json,
    takes,
)
from ablate.core.errors import AblateError

if TYPE_CHECKING:
    from ablate.setup.load import Inventory, Setup

app = typer.Typer()


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _layer_notes(rows: list[dict[str, Any]]) -> None:
    """The notes under the layers table: never-loaded layers, imports by name, plugins, missing imports."""
    for r in rows:
        if r["present"] and r["loaded"] is not None and not r["loaded"]["files"]:
            typer.echo(
                f"\nnote: {r['id']} is on disk but the CLI loads none of it "
                f"({', '.join(r['loaded']['not_loaded'][:3])}...): a cell stripping it is a no-op."
            )
        if r["imports"]:
            typer.echo(
                f"\nnote: {r['id']} @imports {', '.join(r['imports'])}: stripping it removes them too."
            )
        if r["import_files"]:
            typer.echo(
                f"\nnote: {r['id']} imports {len(r['import_files'])} file(s) (+{_human_bytes(r['import_bytes'])} "
                f"outside any layer; ~{r['est_tokens_with_imports']} tokens with imports): "
                + "; ".join(r["import_edges"])
            )
        plugins = r["plugins"]
        if r["present"] and plugins is not None and not plugins["loaded_files"]:
            why = (
                f"installed but not enabled: {', '.join(plugins['installed'])}"
                if plugins["installed"]
                else "no plugin installed (plugins/installed_plugins.json)"
            )
            typer.echo(
                f"\nnote: {r['id']}: plugins/ holds {plugins['files']} file(s) and loads none of them ({why}); "
                "it counts for nothing here"
            )
        for m in r["import_missing"]:
            typer.echo(f"warning: {r['id']}: missing import target {m}")
        for c in r["import_cycles"]:
            typer.echo(f"warning: {r['id']}: import cycle {c}")


@app.command("layers")
@cli_errors
@takes(SETUP_OPTIONS)
def layers_cmd(json_out: Json = False, **options: Any) -> None:
    """List every layer of the setup: side, paths, on disk vs loaded by the CLI, size, fingerprint, and leaks.

    On disk is what the layer's files hold; loaded is what the CLI puts in front of the model by itself
    (skills/_internal/*/SKILL.md and flat .claude/skills/*.md are never listed; axioms.md and lessons.md load
    only when @imported; an output style only when selected; plugins/ only inside a plugin that is installed
    and enabled). @imports are followed recursively from every instruction file and each one is named
    (missing targets and cycles reported). Markdown under docs/, notes/ and .claude/ that no layer claims is
    listed as unclassified, with the ablate.toml table that maps it.

    Reads the config dir and the repository's live working tree; writes nothing. Leaks are things outside
    ablate's control that reach the model in every cell alike (ancestor CLAUDE.md/AGENTS.md, managed
    settings in /etc/claude-code, AGENTS.md in the repo, ~/.bashrc, the git identity).

    Exit codes: 0 ok, 2 bad input (missing config dir or repo, not a git work tree, invalid ablate.toml).
    """
    from ablate.setup.inventory import inventory_json, layer_rows
    from ablate.setup.load import inventory

    catalog, setup = load_setup_options(options)
    inv = inventory(setup, catalog)
    if json_out:
        print_json(inventory_json(inv, catalog))
        return
    rows = layer_rows(inv, catalog)
    typer.echo(f"config dir: {setup.config_dir}\nrepo:       {setup.repo} (HEAD {setup.head[:10]})")
    from ablate.isolate.procenv import SETTINGS_SKIPPED, settings_files, settings_problem

    for path in settings_files(setup.config_dir, setup.repo):
        if why := settings_problem(path):
            typer.echo(f"WARNING: {path}: {why}. {SETTINGS_SKIPPED}", err=True)
    typer.echo(_layers_table(rows))
    typer.echo(
        "(on disk: what the files hold; loaded by CLI: what the CLI puts in front of the model by itself; n/a: "
        "repo docs the model reads on demand, settings keys (confirmed by `ablate probe`))"
    )
    _layer_notes(rows)
    _inventory_notes(inv, setup)


def _loaded_cell(r: dict[str, Any]) -> str:
    if not r["present"]:
        return "-"
    got = r["loaded"]
    if got is None:
        return "n/a"
    return f"{got['files']}/{r['files']} files, ~{got['est_tokens']} tok" if got["files"] else "NONE"


def _layers_table(rows: list[dict[str, Any]]) -> str:
    """The layer table of ``ablate layers``: one row per layer of the catalog."""
    from tabulate import tabulate

    table = [
        [
            r["id"],
            r["side"],
            "yes" if r["present"] else "-",
            ", ".join(r["paths"]) or "-",
            r["files"],
            _human_bytes(r["bytes"]) if r["present"] else "-",
            r["est_tokens"] if r["present"] else "-",
            _loaded_cell(r),
            r["fingerprint"][:12] or "-",
        ]
        for r in rows
    ]
    headers = ["layer", "side", "on disk", "paths", "files", "bytes", "~tokens", "loaded by CLI"]
    return tabulate(table, headers=[*headers, "fingerprint"])


def _inventory_notes(inv: Inventory, setup: Setup) -> None:
    """Dangling references, unclassified knowledge files, uncommitted files and leaks, after the table."""
    from ablate.setup.inventory import dangling_lines

    for line in dangling_lines(inv.layers):
        typer.echo(f"\nnote: {line}")
    if inv.unclassified:
        from ablate.setup.load import mapping_hint

        typer.echo(f"\nunclassified knowledge files ({len(inv.unclassified)}; no layer claims them):")
        for hint in mapping_hint(inv.unclassified):
            typer.echo(f"  - {hint}")
    if setup.dirty:
        typer.echo(
            f"\nnote: {len(setup.dirty_files)} uncommitted file(s) in the repo: {', '.join(setup.dirty_files[:5])}"
        )
    if inv.leaks:
        typer.echo("\nleaks ablate cannot remove (they reach every cell alike):")
        for leak in inv.leaks:
            typer.echo(f"  - [{leak.kind}] {leak.path}: {leak.detail}")
    else:
        typer.echo("\nleaks: none found")


@app.command("cells")
@cli_errors
def cells_cmd(
    cell_set: Annotated[
        str, typer.Argument(help=f"A shipped set ({cell_set_names()}) or a cell-set .toml file.")
    ] = "layered",
    config_dir: ConfigDir = None,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo", envvar="ABLATE_REPO", help="The git repository (default: the current folder)."
        ),
    ] = None,
    json_out: Json = False,
    ablate_toml: AblateToml = None,
) -> None:
    """Show what each cell of a set strips, and flag cells that change nothing for this setup (no-ops).

    With no --config-dir/--repo, the setup is the default one (~/.claude and the current folder) when that
    is usable; otherwise only the set itself is shown.

    Exit codes: 0 ok, 2 bad input (unknown set, invalid cell file, unknown layer, unusable setup).
    """
    from tabulate import tabulate

    from ablate.setup.cells import load_cell_set
    from ablate.setup.inventory import cell_rows
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import inventory, load_setup

    catalog = load_catalog(ablate_toml)
    cells = load_cell_set(cell_set, catalog)
    inv: Inventory | None = None
    explicit = config_dir is not None or repo is not None
    try:
        inv = inventory(load_setup(config_dir or default_config_dir(), repo or Path(".")), catalog)
    except AblateError as exc:
        if explicit:
            raise
        typer.echo(f"(no setup checked: {exc.message})", err=True)
    rows = cell_rows(cells, inv)
    if json_out:
        print_json(
            {"set": cells.name, "description": cells.description, "control": cells.control, "cells": rows}
        )
        return
    typer.echo(f"{cells.name}: {cells.description}")
    headers = ["cell", "dir", "label", "strips"]
    if inv is not None:
        headers.append("effect in this setup")
    table = []
    for r in rows:
        strips = "everything" if r["empty_config"] else (", ".join(r["strips"]) or "-")
        if r["keeps"]:
            strips += f" except {', '.join(r['keeps'])}"
        line = [r["id"] + (" (control)" if r["control"] else ""), r["dir"], r["label"], strips]
        if inv is not None:
            line.append(("NO-OP: " if r["noop"] else "") + r["note"])
        table.append(line)
    typer.echo(tabulate(table, headers=headers))

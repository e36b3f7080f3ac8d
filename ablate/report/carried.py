"""What each cell's sessions really carried to the model, from the wire's digests of the system prompt, the tool
list and the first message's context (docs/ARCHITECTURE.md#carried): two cells that differ in a layer that
reaches the model at the start of a session yet carried the same digests are a provenance failure, named in
a caveat."""

from __future__ import annotations

from typing import Any

from ablate.folder.layout import RunManifest
from ablate.report.blocks import Block, Para, Table
from ablate.report.context import Context, Page, Section
from ablate.report.model import Caveat, CellCarried, Report

Digests = tuple[frozenset[str], frozenset[str], frozenset[str]]
#: The kinds of layer (:mod:`ablate.setup.kinds`, by how the probe sees them) that reach the model in the
#: first request of every session: two cells that differ in one of them must differ on the wire.
AT_START = frozenset({"text", "names", "mcp", "style"})


def at_start_layers(ctx: Context) -> set[str]:
    """The control's present layers of a kind in :data:`AT_START` (shipped catalog; an unknown layer is not)."""
    from ablate.setup.kinds import layer_kind
    from ablate.setup.layers import load_catalog

    try:
        catalog = load_catalog()
    except Exception:
        return set()
    present = {lid for lid, fp in ctx.control.fingerprints.items() if fp not in ("", None)}
    return {lid for lid in present if lid in catalog and layer_kind(catalog.get(lid).shows).probe in AT_START}


def probe_contexts(ctx: Context) -> dict[str, str]:
    """Per cell, the probe's context digest, when the run and its probe both saw the real paths; else none."""
    from ablate.isolate.registry import capabilities_of, kind_of
    from ablate.report.context import read_probe

    probe = read_probe(ctx.run_dir)
    iso = ctx.manifest.isolation
    run_caps = capabilities_of(iso) if iso is not None else None
    if probe is None or run_caps is None or not run_caps.real_paths:
        return {}
    probe_iso = probe.get("isolation")
    probe_kind = kind_of(str(probe_iso.get("backend"))) if isinstance(probe_iso, dict) else None
    if probe_kind is None or not probe_kind.capabilities.real_paths:
        return {}
    cells = probe.get("cells")
    return {
        str(c["id"]): c["context_sha256"]
        for c in (cells if isinstance(cells, list) else [])
        if isinstance(c, dict) and isinstance(c.get("context_sha256"), str)
    }


def carried_section(ctx: Context, report: Report) -> dict[str, Any]:
    """``carried``: per cell of the manifest, the distinct digests its sessions sent (every attempt)."""
    seen: dict[str, list[set[str]]] = {c.id: [set(), set(), set()] for c in ctx.manifest.cells}
    sessions = dict.fromkeys(seen, 0)
    probed = probe_contexts(ctx)
    unlike: dict[str, int | None] = {cid: (0 if cid in probed else None) for cid in seen}
    for r in ctx.results:
        if r.wire is None or r.wire.requests == 0 or r.cell not in seen:
            continue
        sessions[r.cell] += 1
        count = unlike[r.cell]
        if count is not None and r.wire.context_sha256 != [probed[r.cell]]:
            unlike[r.cell] = count + 1
        wire = r.wire
        for part, digests in zip(
            seen[r.cell], (wire.system_sha256, wire.tools_sha256, wire.context_sha256), strict=True
        ):
            part.update(digests)
    if not any(sessions.values()):
        return {"carried": []}
    no_ops = {n.cell for n in ctx.no_ops}
    key: dict[str, Digests] = {  # only cells whose context was digested (a wire before it was kept: none)
        cid: (frozenset(s), frozenset(t), frozenset(c)) for cid, (s, t, c) in seen.items() if c
    }
    stripped = {c.id: set(c.stripped) for c in ctx.manifest.cells}
    at_start = at_start_layers(ctx)
    carried = [
        CellCarried(
            cell=c.id,
            stripped=list(c.stripped),
            sessions=sessions[c.id],
            system=len(seen[c.id][0]),
            tools=len(seen[c.id][1]),
            context=len(seen[c.id][2]),
            unlike_probe=unlike[c.id] if sessions[c.id] else None,
            same_as=[
                o
                for o in key
                if c.id in key
                and o != c.id
                and c.id not in no_ops
                and o not in no_ops
                and (stripped[o] ^ stripped[c.id]) & at_start
                and key[o] == key[c.id]
            ],
        )
        for c in ctx.manifest.cells
    ]
    return {"carried": carried}


def carried_identical(report: Report, manifest: RunManifest) -> Caveat | None:
    """Cells that strip different layers but whose sessions carried the same prompts, tools and context."""
    pairs = sorted({tuple(sorted((c.cell, o))) for c in report.carried for o in c.same_as})
    if not pairs:
        return None
    shown = "; ".join(f"{a} and {b}" for a, b in pairs)
    return Caveat(
        id="carried-identical",
        text=f"Cells that strip different layers sent the model exactly the same system prompts, tools and "
        f"first-message context (wire/<item>.jsonl digests): {shown}. On the wire they are the same cell, "
        "so a difference between them is not the stripped layers' doing; check the cells with `ablate probe`.",
    )


def carried_unlike_probe(report: Report, manifest: RunManifest) -> Caveat | None:
    """Cells whose sessions carried another context than the probe proved for them."""
    unlike = [
        f"{c.cell} ({c.unlike_probe} of {c.sessions} sessions)" for c in report.carried if c.unlike_probe
    ]
    if not unlike:
        return None
    return Caveat(
        id="carried-unlike-probe",
        text="Sessions that sent the model another first-message context (instruction files, memory, listings, "
        f"hook output) than the free probe captured for their cell (probe.json): {', '.join(unlike)}. "
        "What they carried is not what the probe proved; a hook's or memory's output that changes between "
        "sessions does this too (wire/<item>.jsonl has each request's digest).",
    )


def carried_blocks(report: Report, page: Page) -> list[Block]:
    """The per-cell table of what crossed the wire (nothing when no session crossed ablate's forwarder)."""
    if not report.carried:
        return []
    headers = ["cell", "strips", "sessions", "system prompts", "tool lists", "contexts", "unlike the probe",
               "same on the wire as"]  # fmt: skip
    rows = [
        [c.cell, ", ".join(c.stripped) or "nothing", *map(str, (c.sessions, c.system, c.tools, c.context)),
         "n/a" if c.unlike_probe is None else str(c.unlike_probe), ", ".join(c.same_as) or "-"]
        for c in report.carried
    ]  # fmt: skip
    return [
        Para(
            "What each cell's sessions sent the model, from ablate's forwarder (wire/): the number of distinct "
            "system prompts, tool lists and first-message contexts (instruction files, memory, listings, hook "
            "output; the date, working directory and git status left out), and how many sessions carried another "
            "context than the free probe captured for the cell (compared in namespace runs only, whose views "
            "share the real paths; n/a otherwise)."
        ),
        Table(headers, rows, id="carried"),
    ]


SECTION = Section("carried", carried_section, carried_blocks)

"""The probe's piece check (docs/PIECES.md#probe states the rules): a piece cell's first request is the control's
with exactly its pieces gone, both read as a multiset of non-blank lines after the fidelity check's
normalisation. A hook's output and an MCP server's tools cannot be read from the setup: those pieces are
checked by the transcript (the hook fired in the control, not in the cell) or by their ``mcp__<server>__`` tools."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ablate.core.jsonl import json_strings
from ablate.core.slug import slug
from ablate.core.tokens import tokens_of_chars
from ablate.probe.fingerprints import normalise_request
from ablate.probe.observe import Observation, canon_command
from ablate.setup.layers import Layer
from ablate.setup.load import parse_imports
from ablate.setup.pieces import Piece

PieceStatus = Literal["gone", "still-there", "unobservable"]
#: Lines shown per problem.
SHOWN = 3


@dataclass
class PieceCheck:
    status: PieceStatus
    evidence: str = ""


@dataclass
class PiecesVerdict:
    """What the piece check found for one cell."""

    pieces: dict[str, PieceCheck] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    removed_chars: int = 0
    """How many characters the strings of the cell's first request (normalised: system, messages, tools)
    have fewer than the control's: what the pieces add to the first request; ``removed_chars / 4`` is the
    sim's token estimate of it."""

    @property
    def ok(self) -> bool:
        return not self.problems and all(c.status != "still-there" for c in self.pieces.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "pieces": {k: asdict(v) for k, v in self.pieces.items()},
            "problems": list(self.problems),
            "removed_chars": self.removed_chars,
            "removed_tokens_estimate": tokens_of_chars(self.removed_chars),
        }


def cell_replacements(cenv: Any) -> dict[str, str]:
    """Each spelling of a ``links`` cell's own folder → ``<CELL>`` (a ``namespace`` cell needs none)."""
    root = getattr(cenv, "root", None)
    if root is None or getattr(cenv, "real_config", None) is not None:
        return {}
    return {str(root): "<CELL>", slug(str(root)): "<CELL-SLUG>"}


def request_strings(body: dict[str, Any], replacements: dict[str, str]) -> list[str]:
    """Every string of the normalised request (``system``, ``messages``, ``tools``, paths replaced)."""
    return json_strings(json.loads(normalise_request(body, replacements)))


def request_lines(strings: list[str]) -> Counter[str]:
    """The non-blank lines (stripped) of the request's strings."""
    return Counter(line.strip() for text in strings for line in text.splitlines() if line.strip())


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if line.strip()}


def _imported_text(piece: Piece, base: Path | None) -> str:
    """The text of the files a cut section ``@imports`` (they go with it), one level deep."""
    if piece.kind != "section" or base is None:
        return ""
    out = []
    for imp in parse_imports(piece.text):
        target = Path(imp).expanduser() if imp.startswith(("/", "~")) else (base / piece.file).parent / imp
        try:
            out.append(target.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return "\n".join(out)


def _explains(piece: Piece, line: str, own: set[str]) -> bool:
    if line in own:
        return True
    if piece.kind in ("skill", "agent", "command", "output-style"):
        return piece.name in line
    # the header the CLI puts above an inlined file: the piece's own, or one a cut section imports
    names = [Path(piece.file).name] + [Path(imp).name for imp in parse_imports(piece.text)]
    return any(f"/{name} (" in line or line.endswith(f"/{name}:") for name in names)


def _check_piece(
    piece: Piece, control: Observation, cell: Observation, c_lines: Counter[str], x_lines: Counter[str]
) -> PieceCheck:
    if piece.kind == "hook":
        command = canon_command(piece.name.split("] ", 1)[-1], [control.config_dir])
        fired = [canon_command(c, [control.config_dir]) for c in control.hooks_fired]
        if command not in fired:
            return PieceCheck("unobservable", "the hook did not run in the control's first turn")
        if cell.hook_seen(command):
            return PieceCheck("still-there", f"the hook ran in the cell: {command}")
        return PieceCheck("gone", "ran in the control, not in the cell")
    if piece.kind == "mcp":
        needle = f"mcp__{piece.name}__"
        if needle not in control.request_text:
            return PieceCheck("unobservable", f"no {needle}* tool in the control (probe with --with-mcp)")
        if needle in cell.request_text:
            return PieceCheck("still-there", f"{needle}* tools in the cell's request")
        return PieceCheck("gone", f"{needle}* tools in the control only")
    needles = _lines(piece.shown_text) if piece.kind not in ("skill", "agent", "command") else set()
    if piece.kind in ("skill", "agent", "command"):
        needles = {line for line in c_lines if piece.name in line and piece.name not in control.config_dir}
    seen = sorted(n for n in needles if c_lines[n] > x_lines.get(n, 0))
    if any(n in c_lines for n in needles) and not seen:
        left = sorted(n for n in needles if n in x_lines)
        return PieceCheck("still-there", f"the cell's request still has: {left[:SHOWN]}")
    if not seen:
        return PieceCheck("unobservable", "the control's first request does not show it")
    return PieceCheck("gone", f"{len(seen)} line(s) of the control's request gone, e.g. {seen[0][:80]!r}")


def verify_piece_cell(
    pieces: Sequence[Piece],
    control: Observation,
    cell: Observation,
    *,
    control_env: Any = None,
    cell_env: Any = None,
    setup_base: dict[str, Path] | None = None,
) -> PiecesVerdict:
    """Check that ``cell``'s first request is ``control``'s with exactly ``pieces`` gone (see the module)."""
    verdict = PiecesVerdict()
    if control.first_request is None or cell.first_request is None:
        verdict.problems.append("no first request captured (control or cell): the pieces are unproven")
        return verdict
    c_strings = request_strings(control.first_request, cell_replacements(control_env))
    x_strings = request_strings(cell.first_request, cell_replacements(cell_env))
    verdict.removed_chars = sum(map(len, c_strings)) - sum(map(len, x_strings))
    c_lines, x_lines = request_lines(c_strings), request_lines(x_strings)
    for piece in pieces:
        verdict.pieces[piece.id] = _check_piece(piece, control, cell, c_lines, x_lines)
    new = sorted((x_lines - c_lines).elements())
    if new:
        verdict.problems.append(
            f"{len(new)} line(s) in the cell's first request that the control's has not: {new[:SHOWN]}"
        )
    lost = c_lines - x_lines
    own = {p.id: _lines(p.text) | _lines(_imported_text(p, (setup_base or {}).get(p.side))) for p in pieces}
    # a hook's output and a server's tools are not in the setup's text: lines lost with them are theirs
    opaque = any(p.kind in ("hook", "mcp") and verdict.pieces[p.id].status == "gone" for p in pieces)
    unexplained = sorted(line for line in lost if not any(_explains(p, line, own[p.id]) for p in pieces))
    if unexplained and not opaque:
        verdict.problems.append(
            f"{len(unexplained)} line(s) of the control's first request are gone from the cell but belong to "
            f"none of its pieces (a wrong cut): {unexplained[:SHOWN]}"
        )
    return verdict


def _file_left(piece: Piece, cenv: Any, layers: Mapping[str, Layer]) -> str | None:
    """A knowledge or auto-memory file piece the first request need not show, looked for where the cell's
    session finds it: its path when still there, "" when gone, None when the cell cannot be read."""
    if cenv is None:
        return None
    if piece.kind == "file":
        return piece.file if piece.file in cenv.checkout_layer(layers[piece.layer], "").files else ""
    parts = Path(piece.file).parts  # projects/<slug>/memory/...: the cell keeps auto-memory under its slug
    rel = Path(parts[0], getattr(cenv, "memory_slug", "") or parts[1], *parts[2:])
    return str(rel) if (cenv.config_source / rel).exists() else ""


def check_piece_cells(
    results: Sequence[Any],
    observations: dict[str, Observation],
    envs: dict[str, Any],
    control_id: str,
    all_pieces: Sequence[Piece],
    setup_base: dict[str, Path],
    layers: Mapping[str, Layer],
) -> None:
    """Add the piece check to each judged cell that cuts pieces (its verdict no better than ``missing``)."""
    by_id = {p.id: p for p in all_pieces}
    control = observations.get(control_id)
    for result in results:
        cell_pieces = getattr(result, "cut_pieces", ())
        if not cell_pieces:
            continue
        if control is None:
            result.problems.append(f"piece check: the control {control_id} was not probed with this cell")
            result.verdict = "missing" if result.verdict in ("faithful", "no-op") else result.verdict
            continue
        found = verify_piece_cell(
            [by_id[i] for i in cell_pieces if i in by_id],
            control,
            observations[result.id],
            control_env=envs.get(control_id),
            cell_env=envs.get(result.id),
            setup_base=setup_base,
        )
        for piece in (by_id[i] for i in cell_pieces if i in by_id and by_id[i].kind in ("file", "memory")):
            if (left := _file_left(piece, envs.get(result.id), layers)) is not None:
                found.pieces[piece.id] = (
                    PieceCheck("still-there", f"still in the cell: {left}")
                    if left
                    else PieceCheck("gone", "absent from the cell")
                )
        result.pieces = found.to_json()
        result.problems.extend(f"piece check: {p}" for p in found.problems)
        if result.verdict in ("faithful", "no-op") and not found.ok:
            still = any(c.status == "still-there" for c in found.pieces.values())
            result.verdict = "leak" if still or any("not:" in p for p in found.problems) else "missing"

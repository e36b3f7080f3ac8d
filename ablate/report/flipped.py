"""The "Flipped pairs" section: per tested cell, the blocks where the control and the cell disagreed on the pass/fail
outcome, each with the command that opens it (``ablate show``); report.html embeds the first pairs of each cell
as JSON and a small inline script draws one (the context diff above, the two sessions in two columns, the turns
collapsible) when its link is opened. The ranking's and the piece table's rows link here (:func:`link`)."""

from __future__ import annotations

import html
import re
from typing import Any

import orjson

from ablate.report.blocks import Block, Heading, Para, Raw, Table, strips_text
from ablate.report.context import Context, Page, Section
from ablate.report.model import METRIC_LABELS, Report
from ablate.report.pairs import CellFlips, Flip, Pairs, build_pairs


def build(ctx: Context, _report: Report) -> dict[str, Any]:
    return {"pairs": build_pairs(ctx).model_dump(mode="json")}


def pairs_of(report: Report) -> Pairs | None:
    part = SECTION.part(report)
    return Pairs.model_validate(part) if part else None


def _piece_flips(pairs: Pairs) -> dict[str, list[tuple[str, Flip]]]:
    """Piece id → the flips of every cell that cuts it (a piece run)."""
    out: dict[str, list[tuple[str, Flip]]] = {}
    for c in (c for c in pairs.cells if c.pieces):
        for p in c.strips:
            out.setdefault(p, []).extend((c.cell, f) for f in c.flipped)
    return out


def links(report: Report, *, piece: bool = False) -> dict[str, str]:
    """The ranking's cells (or the piece table's pieces) with flipped pairs → their anchor (``Table.links``)."""
    pairs = pairs_of(report)
    if pairs is None:
        return {}
    keys = (
        [p for p, f in _piece_flips(pairs).items() if f]
        if piece
        else [c.cell for c in pairs.cells if c.flipped]
    )
    return {k: anchor(k, piece) for k in keys}


def anchor(key: str, piece: bool = False) -> str:
    return re.sub(r"[^\w-]", "-", f"pairs-{'piece-' if piece else ''}{key}")


def strips_of(c: CellFlips) -> str:
    return strips_text([] if c.pieces else c.strips, c.strips if c.pieces else [])


def command(run: str, cell: str, f: Flip, model: str | None = None) -> str:
    """The ``ablate show`` command that opens flip ``f`` (``model``: of a run of several)."""
    return f"ablate show {run} --cell {cell} --task {f.task} --repeat {f.repeat}" + (
        f" --model {model}" if model else ""
    )


def flip_words(control: str, cell: str, f: Flip) -> str:
    return f"{f.task} r{f.repeat}: " + (
        f"{control} passed, {cell} failed" if f.control_passed else f"{control} failed, {cell} passed"
    )


def _flip_items(pairs: Pairs, run: str, flips: list[tuple[str, Flip]], shown: set[str]) -> str:
    out = []
    for cell, f in flips:
        key = f"{cell}|{f.task}|{f.repeat}"
        words = html.escape(flip_words(pairs.control, cell, f))
        label = f'<a href="#" data-pair="{html.escape(key)}">{words}</a>' if key in shown else words
        out.append(f"<li>{label} <code>{html.escape(command(run, cell, f))}</code></li>")
    return "<ul>" + "".join(out) + "</ul>"


def _details(anchor: str, title: str, body: str) -> str:
    return f'<details class="flips" id="{anchor}"><summary>{html.escape(title)}</summary>{body}<div class="pair-view"></div></details>'


def render(report: Report, _page: Page) -> list[Block]:
    pairs = pairs_of(report)
    if pairs is None:
        return []
    title = Heading("Flipped pairs: where the control and a cell disagreed")
    if not pairs.cells:
        return [title, Para("No cell was tested against the control: there are no pairs to look at.")]
    run = f"runs/{report.run.id}"
    label = METRIC_LABELS.get(pairs.metric, pairs.metric)
    rows = [
        [c.cell, strips_of(c), f"{len(c.flipped)} of {c.blocks}",
         str(sum(f.control_passed for f in c.flipped)), str(sum(not f.control_passed for f in c.flipped)),
         command(run, c.cell, c.flipped[0]) if c.flipped else "–"]
        for c in pairs.cells
    ]  # fmt: skip
    shown = {f"{p.cell}|{p.task}|{p.repeat}": p.model_dump(mode="json") for p in pairs.shown}
    parts = [
        _details(anchor(c.cell), f"{c.cell}: {len(c.flipped)} of {c.blocks} pairs flipped",
                 _flip_items(pairs, run, [(c.cell, f) for f in c.flipped], set(shown)))
        for c in pairs.cells if c.flipped
    ] + [
        _details(anchor(p, True), f"piece {p}: {len(fl)} flipped pairs", _flip_items(pairs, run, fl, set(shown)))
        for p, fl in _piece_flips(pairs).items() if fl
    ]  # fmt: skip
    data = orjson.dumps(shown).decode().replace("</", "<\\/")
    page = f'<div id="flipped">{"".join(parts)}<script type="application/json" id="pairs-data">{data}</script><script>{SCRIPT}</script></div>'
    return [
        title,
        Para(
            f"A pair is the control's ({pairs.control}) session and a cell's of one (task, repeat); it flipped when one "
            f"passed and the other failed on {label}. Open one to see both sessions side by side and what the model "
            "received differently (the context diff)."
        ),
        Table(
            ["cell", "strips", "flipped", "control passed", "cell passed", "open the first"], rows, id="pairs"
        ),
        Raw(page),
    ]


SECTION = Section("pairs", build, render)

#: Draws a pair into its box when opened: the context diff, then the two sessions in two columns.
SCRIPT = """(()=>{let D;const data=()=>D||(D=JSON.parse(document.getElementById('pairs-data').textContent));
const el=(t,c,x)=>{const e=document.createElement(t);if(c)e.className=c;if(x!=null)e.textContent=x;return e};
const mark=s=>s.passed==null?'not scored':s.passed?'passed':'failed';
const cols=(a,b,t,o)=>{const g=el('div','cols');g.append(a,b);if(!t)return g;const d=el('details','turn');d.open=o;
d.append(el('summary',null,t),g);return d};
const turn=t=>{const d=el('div','side');if(!t)return d;if(t.text)d.append(el('p',null,t.text));
for(const c of t.calls)d.append(el('code','call',c.name+(c.arg?': '+c.arg:'')));return d};
const outs=s=>{const d=el('ul','side');for(const o of s.outcomes)d.append(el('li',o.passed?'ok':'bad',
`${o.kind} ${o.name}: ${o.passed==null?'not evaluated':o.passed?'passed':'failed'}${o.detail?' — '+o.detail:''}`));return d};
function show(box,key){const p=data()[key];if(!p)return;const a=p.control,b=p.other;box.replaceChildren();
const diff=el('pre','ctxdiff');for(const l of p.diff)diff.append(el('span',l[0]=='-'?'del':'ins',l+'\\n'));
if(!p.diff.length)diff.textContent='(the transcripts show the same context loaded)';
box.append(el('h4',null,`Context diff: what ${b.cell} received differently from ${a.cell}`),
el('p',null,`first request: ${a.cell} ${a.tokens??'?'} tokens, ${b.cell} ${b.tokens??'?'} tokens`+
(p.differs.length?`; on the wire these differ: ${p.differs.join(', ')}`:'')),diff,
cols(el('h4',null,`${a.cell} (control): ${mark(a)} · ${a.status}`),el('h4',null,`${b.cell}: ${mark(b)} · ${b.status}`)));
for(const s of[a,b])if(s.missing.length)box.append(el('p','bad',`${s.cell}: missing ${s.missing.join(', ')}`));
box.append(cols(el('p','prompt',a.prompt),el('p','prompt',b.prompt)));const n=Math.max(a.turns.length,b.turns.length);
for(let i=0;i<n;i++)box.append(cols(turn(a.turns[i]),turn(b.turns[i]),`turn ${i+1}`,i<3));
box.append(el('h4',null,'Final answers'),cols(el('p','answer',a.answer||'(none)'),el('p','answer',b.answer||'(none)')),
el('h4',null,'Checks and pitfalls'),cols(outs(a),outs(b)))}
const open=()=>{const d=location.hash&&document.getElementById(location.hash.slice(1));if(!d||!d.matches('details.flips'))return;
d.open=true;const f=d.querySelector('a[data-pair]');const v=d.querySelector('.pair-view');if(f&&!v.childNodes.length)show(v,f.dataset.pair)};
document.addEventListener('click',e=>{const t=e.target.closest('a[data-pair]');if(!t)return;e.preventDefault();
show(t.closest('details').querySelector('.pair-view'),t.dataset.pair)});
window.addEventListener('hashchange',open);open()})();"""

"""Render the report document as one self-contained HTML file: inline CSS, inline SVG, no network assets."""

from __future__ import annotations

import html
import re
from pathlib import Path

from ablate.report.blocks import Bullets, Document, Figure, Heading, Para, Raw, Table

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1180px;margin:1.5rem auto;padding:0 1rem;
color:#1d1d1d;line-height:1.45}
h1{font-size:1.5rem}h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:.86rem;display:block;overflow-x:auto}
th,td{border:1px solid #d6d6d6;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f5f7}tr.real td{background:#eaf2fb}tr.draw td{color:#555}
.strong{font-weight:600;background:#fff4d6;padding:.5rem;border-left:4px solid #e0a800}
figure{margin:1rem 0}figure svg{max-width:100%;height:auto}figcaption{font-size:.85rem;color:#555}
caption{caption-side:top;text-align:left;font-style:italic;color:#555}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:.2rem 1rem}.cols>*{min-width:0;overflow-wrap:anywhere;margin:.2rem 0}
.side p,.prompt,.answer{white-space:pre-wrap}.call{display:block;font-size:.82rem;background:#f3f5f7}
.ctxdiff{white-space:pre-wrap;font-size:.8rem;max-height:24rem;overflow:auto;background:#fafafa;padding:.4rem}
.del{background:#fde8e8;display:block}.ins{background:#e6f6e6;display:block}.bad{color:#a00}.ok{color:#060}
details.turn{border-top:1px solid #eee}details.flips{margin:.4rem 0}summary{cursor:pointer}
"""

_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _inline(text: str) -> str:
    return _BOLD.sub(r"<strong>\1</strong>", html.escape(text))


_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)


def _svg_text(path: Path) -> str:
    """The SVG element of a file, without its XML prolog and RDF metadata (inline, nothing to fetch)."""
    text = path.read_text()
    start = text.find("<svg")
    return _METADATA.sub("", text[start:]) if start >= 0 else ""


def _cell(text: str, links: dict[str, str]) -> str:
    if text in links:
        return f'<td><a href="#{links[text]}">{html.escape(text)}</a></td>'
    return f"<td>{_inline(text)}</td>"


def render_html(doc: Document, base: Path) -> str:
    """HTML for ``doc``; figures are read from ``base`` and inlined."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(doc.title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(doc.title)}</h1>",
    ]
    for b in doc.blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            cls = ' class="strong"' if b.strong else ""
            out.append(f"<p{cls}>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            tid = f' id="{html.escape(b.id)}"' if b.id else ""
            out.append(f"<table{tid}>")
            if b.caption:
                out.append(f"<caption>{html.escape(b.caption)}</caption>")
            if any(b.headers):
                out.append(
                    "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in b.headers) + "</tr></thead>"
                )
            out.append("<tbody>")
            for i, row in enumerate(b.rows):
                style = b.row_styles[i] if i < len(b.row_styles) else ""
                cls = f' class="{style}"' if style else ""
                out.append(f"<tr{cls}>" + "".join(_cell(c, b.links) for c in row) + "</tr>")
            out.append("</tbody></table>")
        elif isinstance(b, Raw):
            out.append(b.html)
        elif isinstance(b, Figure):
            svg = _svg_text(base / b.svg) if b.svg else ""
            out.append(
                f'<figure id="{Path(b.svg or b.png).stem}-plot">{svg}<figcaption>{html.escape(b.alt)}</figcaption>'
                "</figure>"
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"

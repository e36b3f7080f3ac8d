"""Render the report document as Markdown (report.md)."""

from __future__ import annotations

from ablate.report.blocks import Bullets, Document, Figure, Heading, Para, Table


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: Document) -> str:
    out = [f"# {doc.title}", ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Para):
            out += [f"**{b.text}**" if b.strong else b.text, ""]
        elif isinstance(b, Bullets):
            out += [f"- {i}" for i in b.items] + [""]
        elif isinstance(b, Table):
            if b.caption:
                out += [f"*{b.caption}*", ""]
            headers = b.headers if any(b.headers) else ["", ""]
            out.append("| " + " | ".join(_cell(h) for h in headers) + " |")
            out.append("|" + "|".join("---" for _ in headers) + "|")
            for row in b.rows:
                out.append("| " + " | ".join(_cell(c) for c in row) + " |")
            out.append("")
        elif isinstance(b, Figure):
            out += [f"![{b.alt}]({b.png or b.svg})", ""]
    return "\n".join(out).rstrip() + "\n"

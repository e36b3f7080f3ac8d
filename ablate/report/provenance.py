"""The report's optional "your own history" section: what ``ablate usage`` says about the run's layers.

A separate section under its own heading, built only on a machine whose history can be read. It never
feeds the counterfactual figures (deltas, tests, ranking): it says how often the user's real sessions
loaded and used each layer the run strips, which is context for reading those figures, not evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablate.mine.usage import provenance_for
from ablate.report.blocks import Block, Bullets, Heading, Para
from ablate.report.model import Provenance

HEADING = "Your own history (context, not part of the measurement)"


def provenance_block(run_dir: Path, config_dir: Path, *, last: int = 500) -> dict[str, Any] | None:
    """``{"heading", "sessions", "lines": [...]}`` for ``report.json``, or None when the config dir holds
    no session of the run's repository (nothing to say, so no section)."""
    if not (config_dir / "projects").is_dir():
        return None
    lines = provenance_for(run_dir, config_dir, last=last)
    if not lines:
        return None
    return {"heading": HEADING, "sessions": lines[0]["sessions"], "lines": lines}


def _note(sessions: int) -> str:
    return (
        f"From the last {sessions} sessions in your config dir (`ablate usage`): how often the CLI "
        "loaded each stripped layer and how often a session used it. These counts are not part of the "
        "measured effects above."
    )


def provenance_markdown(block: dict[str, Any] | None) -> str:
    """The Markdown section for a block from :func:`provenance_block` ("" for None)."""
    if not block:
        return ""
    body = "\n".join(f"- {line['sentence']}" for line in block["lines"])
    return f"## {block['heading']}\n\n{_note(block['sessions'])}\n\n{body}\n"


def provenance_blocks(prov: Provenance) -> list[Block]:
    """The report document's section for a report's :attr:`~ablate.report.model.Report.provenance`."""
    return [Heading(prov.heading), Para(_note(prov.sessions)), Bullets([ln.sentence for ln in prov.lines])]

"""How each kind of layer (the catalog's ``shows``) reaches the model: the one table the probe, the loaded-file
analysis and the report dispatch on; a new kind fails type checking (``assert_never``) until it has a row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, assert_never

from ablate.setup.layers import Shows

#: How the probe fingerprints a layer of the kind in what reached the model.
ProbeBy = Literal["text", "names", "files", "hook", "mcp", "style"]
#: How to tell which of the layer's files the CLI loads by itself.
LoadedBy = Literal["imports", "listing", "style", "memory", "not_applicable"]
#: What in a mined session shows the layer was used.
UsedBy = Literal["instructions", "memory", "reads", "not_mined"]


@dataclass(frozen=True)
class LayerKind:
    """One row of the table."""

    shows: Shows
    probe: ProbeBy
    loaded: LoadedBy
    used: UsedBy


def layer_kind(shows: Shows) -> LayerKind:
    """The row of ``shows``."""
    match shows:
        case "instructions":
            return LayerKind(shows, probe="text", loaded="imports", used="instructions")
        case "memory":
            return LayerKind(shows, probe="text", loaded="memory", used="memory")
        case "skill_listing" | "agent_listing":
            return LayerKind(shows, probe="names", loaded="listing", used="not_mined")
        case "hook":
            return LayerKind(shows, probe="hook", loaded="not_applicable", used="not_mined")
        case "mcp":
            return LayerKind(shows, probe="mcp", loaded="not_applicable", used="not_mined")
        case "files":
            return LayerKind(shows, probe="files", loaded="not_applicable", used="reads")
        case "output_style":
            return LayerKind(shows, probe="style", loaded="style", used="not_mined")
        case _:
            assert_never(shows)

#!/usr/bin/env python3
"""PostToolUse hook of the example setup: counts tool calls in $HOME/.claude/data/tool_calls.log."""

import os
import pathlib

data = pathlib.Path(os.environ["HOME"]) / ".claude" / "data"
data.mkdir(parents=True, exist_ok=True)
with (data / "tool_calls.log").open("a") as fh:
    fh.write("tool\n")

#!/usr/bin/env python3
"""SessionStart hook of the example setup: prints a reminder and appends to $HOME/.claude/data/sessions.log."""

import datetime
import os
import pathlib

data = pathlib.Path(os.environ["HOME"]) / ".claude" / "data"
data.mkdir(parents=True, exist_ok=True)
with (data / "sessions.log").open("a") as fh:
    fh.write(datetime.datetime.now(datetime.UTC).isoformat() + " session start\n")
print(
    "Reminder from the session-start hook: check docs/runbooks before deploying. (fp ablate-example hooks e3b9)"
)

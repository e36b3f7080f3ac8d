"""Values more than one stage relies on, declared once."""

from __future__ import annotations

#: The model sessions are pinned to unless told otherwise (``--model`` / ``$ABLATE_MODEL``).
DEFAULT_MODEL = "claude-sonnet-4-6"
#: Sessions running at once, unless ``--jobs`` says otherwise.
DEFAULT_JOBS = 2
#: The CLI's own retry count for API errors: kept low so that ablate owns the rate-limit backoff.
MAX_RETRIES_ENV = "CLAUDE_CODE_MAX_RETRIES"

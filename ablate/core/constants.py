"""Values more than one stage relies on, declared once."""

from __future__ import annotations

#: The model sessions are pinned to unless told otherwise (``--model`` / ``$ABLATE_MODEL``).
DEFAULT_MODEL = "claude-sonnet-4-6"
#: Turns a session may take unless told otherwise (``--max-turns``; a task's ``max_turns`` overrides it).
DEFAULT_MAX_TURNS = 30
#: Seconds a session may run unless told otherwise (``--timeout``; a task's ``timeout_s`` overrides it).
DEFAULT_TIMEOUT_S = 1800
#: After a stop request, seconds running sessions may take to finish before they are killed (``--grace``).
DEFAULT_GRACE_S = 30.0
#: Sessions running at once, unless ``--jobs`` says otherwise.
DEFAULT_JOBS = 2
#: The CLI's own retry count for API errors: kept low so that ablate owns the rate-limit backoff.
MAX_RETRIES_ENV = "CLAUDE_CODE_MAX_RETRIES"
#: The longest a session may be given (``--timeout``, a task's ``timeout_s``): a week, in seconds.
MAX_TIMEOUT_S = 7 * 24 * 3600.0
#: The most turns a session may be given (``--max-turns``, a task's ``max_turns``).
MAX_TURNS = 10_000
#: "No effect of interest" errs for a cell whose true effect is at least min-effect with probability at most
#: this (Ville's inequality on the futility e-process). A fixed design sized for 80% power misses an effect
#: of exactly min-effect 20% of the time, but one well beyond it almost never; β = 0.05 keeps the adaptive
#: design's misses of large effects as rare as the fixed design's (``benchmarks/bench_adaptive.py``).
DEFAULT_DRAW_BETA = 0.05
#: The smallest effect of interest (``--min-effect``): a draw's margin, in the metric's units (0.2 = 20 pts).
DEFAULT_MIN_EFFECT = 0.2

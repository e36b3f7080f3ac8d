"""Where ablate keeps what it may reuse across commands, and the check that nobody else can write there
(README.md's "Where ablate keeps its caches"). The before/after listing of the home skips it
(:func:`ablate.isolate.guard.take`); it is made before the first listing (:func:`ensure_cache_dir`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ablate.core.errors import UnsafeEnvironment


def cache_dir() -> Path:
    """``$ABLATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/ablate`` (an absolute path only, as the XDG base
    directory specification says), else ``~/.cache/ablate``."""
    explicit = os.environ.get("ABLATE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "ablate"


def ensure_cache_dir() -> Path:
    """Make ablate's cache dir if it can (an unusable one is said by whatever uses it) and return it; called
    before the home is listed (preflight, probe), so its making is never taken for a change of the user's."""
    import contextlib

    from ablate.core.errors import AblateError

    ours = cache_dir()
    with contextlib.suppress(OSError, AblateError):
        private_dir(ours)
    return ours


def private_dir(folder: Path) -> None:
    """Make ``folder`` (mode 0700) or check that it is this user's alone: what is cached there is trusted
    (a checkout every session sees as the repository, a binary's identity), so nobody else may plant it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = folder.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise UnsafeEnvironment(
            f"{folder}: ablate's cache is not private to this user (owner uid {st.st_uid}, "
            f"mode {stat.filemode(st.st_mode)})",
            hint="remove it, or set ABLATE_CACHE_DIR to a folder of your own",
        )

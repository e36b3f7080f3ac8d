"""Where ablate keeps what it may reuse across runs (``$ABLATE_CACHE_DIR``), and the check that nobody
else can write there."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from ablate.core.errors import UnsafeEnvironment


def cache_dir() -> Path:
    """``$ABLATE_CACHE_DIR``, else a folder of this user's in the temporary directory (never the home,
    which ablate leaves as it found it)."""
    explicit = os.environ.get("ABLATE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(tempfile.gettempdir()) / f"ablate-cache-{os.getuid()}"


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

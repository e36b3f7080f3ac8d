"""The one deliberate write-through, checked: a session's ``.credentials.json`` reaches the real file only
when it is a refreshed login of the same account (docs/ARCHITECTURE.md#credentials lists the rules). The
CLI's refresh (2.1.332) replaces ``claudeAiOauth``'s tokens and expiry, carries the account ids over and
changes nothing else.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from ablate.core.fsutil import atomic_write_bytes
from ablate.folder.session import CredentialsCopy

#: A login file is a few KB; anything larger is not one.
MAX_BYTES = 256 * 1024
LOGIN = "claudeAiOauth"
#: What identifies the account of a stored login (carried over by every refresh).
ACCOUNT_IDS = ("accountUuid", "organizationUuid")


def read_session_file(path: Path) -> bytes | str:
    """The bytes of a session's credentials file, or why it cannot be one (a link, not a regular file, too
    large, unreadable). Opened without following a link, so a link planted in its place reads nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return "a link, not the login file" if os.path.islink(path) else f"unreadable ({exc.strerror})"
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        return f"larger than {MAX_BYTES // 1024} KB: not a login file"
    return data


def refusal(stored: bytes, new: bytes) -> str | None:
    """Why ``new`` is not a refreshed login of the account ``stored`` holds (None: it is)."""
    try:
        old_doc = orjson.loads(stored)
    except orjson.JSONDecodeError:
        return "the stored login is not JSON: nothing to compare with"
    try:
        new_doc = orjson.loads(new)
    except orjson.JSONDecodeError:
        return "not JSON"
    if not isinstance(new_doc, dict) or not isinstance(old_doc, dict):
        return (
            "not a JSON object" if not isinstance(new_doc, dict) else "the stored login is not a JSON object"
        )
    old, fresh = old_doc.get(LOGIN), new_doc.get(LOGIN)
    if not isinstance(old, dict):
        return f"the stored login has no {LOGIN}: only a refreshed OAuth login is copied back"
    if not isinstance(fresh, dict):
        return f"no {LOGIN} object"
    for key in ("accessToken", "refreshToken"):
        if not isinstance(fresh.get(key), str) or not fresh[key]:
            return f"{LOGIN}.{key} missing or not a non-empty string"
    for key in ACCOUNT_IDS:
        if old.get(key) is not None and fresh.get(key) != old.get(key):
            return f"{LOGIN}.{key} differs from the stored login's: another account"
        if (
            old.get(key) is None
            and fresh.get(key) is not None
            and fresh["refreshToken"] != old.get("refreshToken")
        ):
            return f"{LOGIN}.{key} added with new tokens: cannot tell it is the same account"
    others = {k for k in (*old_doc, *new_doc) if k != LOGIN}
    changed = sorted(k for k in others if old_doc.get(k) != new_doc.get(k))
    if changed:
        return "changes " + ", ".join(changed) + ": a refresh changes only the login"
    expiry, before = _expiry(fresh), _expiry(old)
    if expiry is None:
        return f"{LOGIN}.expiresAt missing or not a number"
    if before is not None and expiry <= before:
        return f"{LOGIN}.expiresAt is not later than the stored login's: not a refresh"
    return None


def _expiry(login: dict[str, Any]) -> float | None:
    value = login.get("expiresAt")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def copy_back(
    session_file: Path, stored: bytes | None, real: Path, copies: Iterable[Path] = ()
) -> CredentialsCopy:
    """Copy ``session_file`` to ``real`` (atomically, keeping its mode) and to ``copies`` (every cell's, so
    later sessions start from it) when it is a refresh of ``stored``, the login the session started with
    (None: none, and none is taken from it); else say why not."""
    if not os.path.lexists(session_file):
        return CredentialsCopy()
    data = read_session_file(session_file)
    if stored is not None and data == stored:
        return CredentialsCopy()
    if isinstance(data, str):
        return CredentialsCopy(discarded=f"{session_file.name}: {data}")
    why = (
        "created by the session; no login is taken from one"
        if stored is None
        else refusal(stored, data) or _real_is_newer(real, data)
    )
    if why is not None:
        return CredentialsCopy(discarded=f"{session_file.name}: {why}")
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except OSError:
        mode = 0o600
    atomic_write_bytes(real, data, mode=mode)
    for copy in copies:  # a rename: a session holding the old file open keeps its own
        if copy != session_file:
            atomic_write_bytes(copy, data, mode=0o600)
    return CredentialsCopy(copied=True)


def _real_is_newer(real: Path, data: bytes) -> str | None:
    """Why the real file must stay: it holds a login expiring no earlier (refreshed meanwhile); else None."""
    try:
        current = orjson.loads(real.read_bytes())
        login = orjson.loads(data)[LOGIN]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None
    stored = current.get(LOGIN) if isinstance(current, dict) else None
    held = _expiry(stored) if isinstance(stored, dict) else None
    fresh = _expiry(login) if isinstance(login, dict) else None
    if held is not None and fresh is not None and fresh <= held:
        return "the real file already holds a login that expires no earlier (refreshed meanwhile)"
    return None

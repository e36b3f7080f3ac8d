"""How a session authenticates, and the check that every built cell does so the way the user's own setup does
(docs/ARCHITECTURE.md#keychain).

Claude Code takes the first of: ``ANTHROPIC_AUTH_TOKEN`` or ``ANTHROPIC_API_KEY``, an ``apiKeyHelper``, the
``/login`` key of the account state, ``CLAUDE_CODE_OAUTH_TOKEN``, on macOS the Keychain (keyed by the config
dir), ``<config dir>/.credentials.json``. A cell that falls back to another method is billed and rate-limited
differently from C0: refused, with the fix. Only the method is recorded, never the secret.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import shutil
import subprocess
import sys
import unicodedata
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ablate.core.errors import UsageError
from ablate.isolate.shadow_home import CREDENTIALS, LOGIN_KEY, login_key
from ablate.setup.layers import json_keys

if TYPE_CHECKING:
    from ablate.setup.cells import ResolvedCell
    from ablate.setup.layers import Catalog
    from ablate.setup.load import Setup

FIX = (
    "give every cell the same login: `claude setup-token`, then export CLAUDE_CODE_OAUTH_TOKEN=<token> "
    "(a subscription), or export ANTHROPIC_API_KEY for all cells"
)


@dataclass(frozen=True)
class AuthMethod:
    """``method``: ``api-key``, ``auth-token``, ``api-key-helper``, ``login-key``, ``oauth-token``,
    ``credentials-file``, ``keychain`` or ``none``; ``source``: where it comes from (a variable name or a file), never its value."""

    method: str
    source: str

    def to_json(self) -> dict[str, str]:
        return {"method": self.method, "source": self.source}


def auth_method(env: Mapping[str, str], config_dir: Path, *, platform: str = sys.platform) -> AuthMethod:
    """The method a session with ``env`` and ``config_dir`` authenticates with; on ``darwin`` the Keychain
    too, through the ``security`` program on ``env``'s ``PATH``."""
    for key, method in (("ANTHROPIC_AUTH_TOKEN", "auth-token"), ("ANTHROPIC_API_KEY", "api-key")):
        if env.get(key):
            return AuthMethod(method, key)
    if (json_keys(config_dir / "settings.json") or {}).get("apiKeyHelper"):
        return AuthMethod("api-key-helper", str(config_dir / "settings.json"))
    if found := login_key(config_dir):
        return AuthMethod("login-key", f"{found[0]} ({LOGIN_KEY})")
    if env.get("CLAUDE_CODE_OAUTH_TOKEN"):
        return AuthMethod("oauth-token", "CLAUDE_CODE_OAUTH_TOKEN")
    # on macOS the Keychain item first: the CLI keeps the login there and the file is only its fallback
    if platform == "darwin" and has_keychain_login(env, config_dir):
        return AuthMethod("keychain", f"macOS Keychain item {keychain_service(env, config_dir)!r}")
    creds = config_dir / CREDENTIALS
    if json_keys(creds):
        return AuthMethod("credentials-file", str(creds))
    return AuthMethod("none", "")


#: Claude Code's Keychain login (macOS): service ``Claude Code-credentials``, account the login user
#: (``security find-generic-password -a $USER -s "Claude Code-credentials"``, anthropics/claude-code#29783);
#: since 2.1.42, when ``CLAUDE_CONFIG_DIR`` is set, the service ends in ``-`` and the first 8 hex digits of
#: the SHA-256 of that path (NFC-normalised, as given). As public sources describe it: the service-name
#: builder read from the CLI in robinebers/openusage#424, checked with ``security dump-keychain`` in
#: beeblock/orkestrai#27; anthropics/claude-code#88601 shows a second config dir logged out on macOS.
KEYCHAIN_SERVICE = "Claude Code-credentials"


def keychain_service(env: Mapping[str, str], config_dir: Path) -> str:
    """The Keychain service a session with ``env`` keeps its login under (``config_dir`` counts where ``env``
    does not name it: the user runs a config dir other than ``~/.claude`` with ``CLAUDE_CONFIG_DIR`` set)."""
    named = env.get("CLAUDE_CONFIG_DIR")
    if not named:
        home = Path(env.get("HOME") or Path.home())
        if Path(config_dir) == home / ".claude":
            return KEYCHAIN_SERVICE
        named = str(config_dir)
    digest = hashlib.sha256(unicodedata.normalize("NFC", named).encode("utf-8")).hexdigest()
    return f"{KEYCHAIN_SERVICE}-{digest[:8]}"


def has_keychain_login(env: Mapping[str, str], config_dir: Path) -> bool:
    """Whether the Keychain holds the login ``env``'s sessions would use: ``security find-generic-password
    -a <user> -s <service>`` finds the item (exit 0; 44 when there is none). Without ``-w``: the secret is
    never read."""
    program = shutil.which("security", path=env.get("PATH") or os.defpath)
    if program is None:
        return False
    user = env.get("USER") or getpass.getuser()
    argv = [program, "find-generic-password", "-a", user, "-s", keychain_service(env, config_dir)]
    try:
        found = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0


def mismatch(
    cell_id: str, mine: AuthMethod, theirs: AuthMethod, user_config_dir: Path, config_dir: Path
) -> str:
    """Why cell ``cell_id`` (``theirs``) does not log in as the user's own setup does (``mine``), or ""."""
    if mine.method == "keychain":  # another config dir names another item: never the user's login
        found = theirs.source if theirs.method == "keychain" else "no login"
        return (
            f"cell {cell_id}: your login is the {mine.source}, keyed by your config dir {user_config_dir}; "
            f"cell {cell_id}'s config dir {config_dir} would start logged out ({found})"
        )
    if theirs.method != mine.method:
        what = theirs.method if theirs.method != "none" else "nothing (logged out)"
        return (
            f"cell {cell_id}: would authenticate with {what} ({theirs.source or 'no login found'}), "
            f"your setup with {mine.method} ({mine.source or 'no login found'})"
        )
    return ""


@dataclass(frozen=True)
class CellLogin:
    """How one cell's sessions would authenticate, and the config dir that was read to tell."""

    cell_id: str
    auth: AuthMethod
    config_dir: Path


def cell_login(
    cell_id: str,
    config: Path,
    *,
    base_env: Mapping[str, str],
    extra_env: Mapping[str, str] | None = None,
    platform: str = sys.platform,
) -> CellLogin:
    """How cell ``cell_id``'s sessions would authenticate from ``config`` (named ``<cell config dir>``)."""
    from ablate.isolate.procenv import process_env

    env = process_env(
        base_env, home=config.parent, config_dir=config, tmpdir=config.parent, extra_env=extra_env
    )
    found = auth_method(env, config, platform=platform)
    return CellLogin(
        cell_id,
        AuthMethod(found.method, found.source.replace(str(config), f"<{cell_id} config dir>")),
        config,
    )


def cell_logins(
    setup: Setup,
    catalog: Catalog,
    cells: Iterable[ResolvedCell],
    scratch: Path,
    *,
    base_env: Mapping[str, str],
    platform: str = sys.platform,
) -> Generator[CellLogin, None, None]:
    """Each cell's :func:`cell_login` for ``ablate doctor``, its config dir built in ``scratch``."""
    from ablate.isolate.environment import build_config_dir
    from ablate.isolate.shadowfs import remove_path

    for cell in cells:
        home = scratch / cell.dirname / "home"
        remove_path(home.parent)
        home.mkdir(parents=True, mode=0o700)
        try:
            build_config_dir(setup, catalog, cell, home / ".claude", memory_slug=setup.memory_slug, home=home)
            yield cell_login(cell.id, home / ".claude", base_env=base_env, platform=platform)
        finally:
            remove_path(home.parent)


def moved_login_key(env: Mapping[str, str], config_dir: Path) -> tuple[dict[str, str], str]:
    """``env`` for the sessions, and where its key came from: a ``/login`` key the user's sessions would take
    becomes their ``ANTHROPIC_API_KEY`` (the CLI's first choice: same key, same billing), which a sealed
    session holds only a placeholder of. "" and ``env`` unchanged otherwise."""
    found = login_key(config_dir) if auth_method(env, config_dir).method == "login-key" else None
    if found is None:
        return dict(env), ""
    return {**env, "ANTHROPIC_API_KEY": found[1]}, f"{found[0]} ({LOGIN_KEY})"


def check_run_auth(
    setup: Setup, logins: Iterable[CellLogin], *, user_env: Mapping[str, str], platform: str = sys.platform
) -> AuthMethod:
    """Before a run's first session: refuse (``UsageError``, naming the cell and the fix) when any cell's login
    differs from the user's own; return the user's method for the manifest (never the secret). ``logins`` is
    read only past the Keychain refusal, so a generator builds nothing before it."""
    mine = auth_method(user_env, setup.config_dir, platform=platform)
    if mine.method == "keychain":  # no cell's config dir can reach it: said before anything is built
        raise UsageError(
            f"{setup.config_dir}: your login is the {mine.source}, keyed by this config dir; every cell "
            "has a config dir of its own, which names another item, and would start logged out",
            hint=FIX,
        )
    for login in logins:
        why = mismatch(login.cell_id, mine, login.auth, setup.config_dir, login.config_dir)
        if why:
            raise UsageError(why, hint=FIX)
    return mine

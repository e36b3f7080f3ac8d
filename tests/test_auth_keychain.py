"""The macOS Keychain login, detected on Linux: ``platform="darwin"`` and a fake ``security`` on ``PATH``
that answers ``find-generic-password -a <account> -s <service>`` as the real one does (exit 0 and the
item's attributes when it holds the item, 44 and "could not be found" when not) for the items it is given.
The service names are written out here from the scheme public sources describe (``Claude Code-credentials``,
``-`` and 8 hex digits of the SHA-256 of ``CLAUDE_CONFIG_DIR`` when that is set), not taken from the code
under test."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ablate.core.errors import UsageError
from ablate.isolate.auth import AuthMethod, auth_method, cell_logins, check_run_auth
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup

ACCOUNT = "me"
FAKE = """#!/bin/sh
# security(1), as far as Claude Code's login lookup goes
[ "$1" = find-generic-password ] || exit 2
shift; acct=; svc=
while [ $# -gt 0 ]; do
  case $1 in
    -a) acct=$2; shift 2;;
    -s) svc=$2; shift 2;;
    -w|-g) echo "asked for the secret" >&2; exit 3;;
    *) shift;;
  esac
done
echo "$acct|$svc" >> "{log}"
while IFS= read -r item; do
  if [ "$item" = "$acct|$svc" ]; then
    echo 'keychain: "/Users/me/Library/Keychains/login.keychain-db"'
    echo 'class: "genp"'
    echo "    \\"svce\\"<blob>=\\"$svc\\""
    exit 0
  fi
done < "{items}"
echo "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain." >&2
exit 44
"""


class Keychain:
    """A fake ``security`` program in a folder of its own, holding ``(account, service)`` items."""

    def __init__(self, base: Path) -> None:
        self.bin = base / "bin"
        self.bin.mkdir()
        self.items = base / "items"
        self.items.write_text("")
        self.log = base / "asked"
        program = self.bin / "security"
        program.write_text(FAKE.replace("{log}", str(self.log)).replace("{items}", str(self.items)))
        program.chmod(program.stat().st_mode | stat.S_IXUSR)

    def hold(self, service: str, account: str = ACCOUNT) -> None:
        with self.items.open("a") as fh:
            fh.write(f"{account}|{service}\n")

    def asked(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": f"{self.bin}:/usr/bin:/bin", "USER": ACCOUNT, **extra}


def check(
    setup: Setup, catalog: Catalog, cells: Any, scratch: Path, env: dict[str, str], platform: str
) -> AuthMethod:
    """``check_run_auth`` over each cell's config dir built under ``scratch`` (only past the Keychain)."""
    logins = cell_logins(setup, catalog, cells, scratch, base_env=env, platform=platform)
    return check_run_auth(setup, logins, user_env=env, platform=platform)


def hashed(config_dir: Path) -> str:
    return "Claude Code-credentials-" + hashlib.sha256(str(config_dir).encode()).hexdigest()[:8]


@pytest.fixture
def keychain(tmp_path: Path) -> Keychain:
    return Keychain(tmp_path)


def test_a_keychain_login_of_the_default_config_dir_is_found(keychain: Keychain, tmp_path: Path) -> None:
    home = tmp_path / "home"
    keychain.hold("Claude Code-credentials")
    env = keychain.env(HOME=str(home))
    found = auth_method(env, home / ".claude", platform="darwin")
    assert found.to_json() == {
        "method": "keychain",
        "source": "macOS Keychain item 'Claude Code-credentials'",
    }
    assert keychain.asked() == [f"{ACCOUNT}|Claude Code-credentials"]  # the item's attributes, never -w
    assert auth_method(env, home / ".claude", platform="linux").method == "none"  # no Keychain there


def test_a_config_dir_named_by_claude_config_dir_has_an_item_of_its_own(
    keychain: Keychain, tmp_path: Path
) -> None:
    mine, cell = tmp_path / "work-claude", tmp_path / "s00" / "home" / ".claude"
    keychain.hold(hashed(mine))
    found = auth_method(keychain.env(CLAUDE_CONFIG_DIR=str(mine)), mine, platform="darwin")
    assert found == auth_method(
        keychain.env(HOME=str(tmp_path)), mine, platform="darwin"
    )  # named by --config-dir
    assert found.method == "keychain" and hashed(mine) in found.source
    assert auth_method(keychain.env(CLAUDE_CONFIG_DIR=str(cell)), cell, platform="darwin").method == "none"
    keychain.hold(hashed(mine), account="someone-else")  # another user's item is not this user's login
    assert auth_method(keychain.env(CLAUDE_CONFIG_DIR=str(cell)), cell, platform="darwin").method == "none"


def test_no_security_program_means_no_keychain_login(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "USER": ACCOUNT, "HOME": str(tmp_path)}
    assert auth_method(env, tmp_path / ".claude", platform="darwin").method == "none"


def test_cells_cannot_see_the_users_keychain_login_and_the_refusal_names_the_fix(
    keychain: Keychain, tmp_path: Path
) -> None:
    """The run's check on the example (its config dir is ``~/.claude``, so the item is the unhashed one): the
    Keychain login reaches no cell's own config dir, and the refusal says so with the fix; the fix taken (one
    token for every cell) passes, and the Keychain is not what any cell uses."""
    from ablate.setup.cells import load_cell_set
    from ablate.setup.examples import materialise_example
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import load_setup

    ex = materialise_example(tmp_path / "ex")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("binary", catalog).cells
    keychain.hold("Claude Code-credentials")
    scratch = tmp_path / "scratch"
    with pytest.raises(UsageError) as err:
        check(setup, catalog, cells, scratch, keychain.env(HOME=str(ex.home)), "darwin")
    said, fix = str(err.value), err.value.hint or ""
    assert said.startswith(
        f"{ex.config_dir}: your login is the macOS Keychain item 'Claude Code-credentials'"
    )
    assert "would start logged out" in said
    assert "claude setup-token" in fix and "CLAUDE_CODE_OAUTH_TOKEN" in fix and "ANTHROPIC_API_KEY" in fix
    user = keychain.env(HOME=str(ex.home), CLAUDE_CODE_OAUTH_TOKEN="tok")
    assert check(setup, catalog, cells, scratch, user, "darwin").method == "oauth-token"
    assert os.listdir(scratch) == []


def test_a_run_is_refused_before_any_cell_is_built(keychain: Keychain, tmp_path: Path) -> None:
    from ablate.setup.cells import load_cell_set
    from ablate.setup.examples import materialise_example
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import load_setup

    ex = materialise_example(tmp_path / "ex")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    keychain.hold(hashed(ex.config_dir))
    user = keychain.env(HOME=str(ex.home), CLAUDE_CONFIG_DIR=str(ex.config_dir))
    scratch = tmp_path / "scratch"
    cells = load_cell_set("binary", catalog).cells
    with pytest.raises(UsageError) as err:
        check(setup, catalog, cells, scratch, user, "darwin")
    assert f"your login is the macOS Keychain item '{hashed(ex.config_dir)}'" in str(err.value)
    assert "CLAUDE_CODE_OAUTH_TOKEN" in (err.value.hint or "")
    assert not scratch.exists()
    # on Linux the same setup logs in with its credentials file, in every cell
    assert check(setup, catalog, cells, scratch, user, "linux").method == ("credentials-file")
    assert os.listdir(scratch) == []

"""The credentials write-through: only a refreshed login of the same account reaches the real file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ablate.isolate.credentials import MAX_BYTES, copy_back, refusal


def login(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "accessToken": "sk-ant-oat01-old",
        "refreshToken": "sk-ant-ort01-old",
        "expiresAt": 1_800_000_000_000,
        "scopes": ["user:inference"],
        "subscriptionType": "max",
        "accountUuid": "acc-1",
        "organizationUuid": "org-1",
    }
    base.update(over)
    return base


def doc(**over: Any) -> bytes:
    return json.dumps({"claudeAiOauth": login(**over), "mcpOAuth": {"srv": {"token": "t"}}}).encode()


REFRESHED = doc(accessToken="sk-ant-oat01-new", refreshToken="sk-ant-ort01-new", expiresAt=1_800_000_360_000)


def test_a_refresh_of_the_same_account_is_accepted() -> None:
    assert refusal(doc(), REFRESHED) is None
    # ids the stored login lacks may be added with the stored refresh token (the CLI saves them on first
    # use), never with new tokens: another account's login would pass as a refresh
    bare = json.dumps({"claudeAiOauth": login(accountUuid=None, organizationUuid=None)}).encode()
    assert refusal(bare, json.dumps({"claudeAiOauth": login(expiresAt=1_900_000_000_000)}).encode()) is None
    other = login(refreshToken="sk-ant-ort01-other", expiresAt=1_900_000_000_000)
    assert "added with new tokens" in (refusal(bare, json.dumps({"claudeAiOauth": other}).encode()) or "")


@pytest.mark.parametrize(
    ("new", "why"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"token": "x"}', "no claudeAiOauth"),
        (doc(accessToken=""), "accessToken"),
        (doc(refreshToken=None), "refreshToken"),
        (doc(accountUuid="acc-2", expiresAt=1_900_000_000_000), "accountUuid differs"),
        (doc(organizationUuid="org-2", expiresAt=1_900_000_000_000), "organizationUuid differs"),
        (doc(expiresAt=1_800_000_000_000), "not later"),
        (doc(expiresAt=1_700_000_000_000), "not later"),
        (doc(expiresAt="soon"), "expiresAt missing"),
        (doc(expiresAt=True), "expiresAt missing"),
        (
            json.dumps({"claudeAiOauth": login(expiresAt=1_900_000_000_000), "mcpOAuth": {}}).encode(),
            "changes mcpOAuth",
        ),
    ],
)
def test_anything_but_a_refresh_is_refused(new: bytes, why: str) -> None:
    assert why in (refusal(doc(), new) or "")


def _files(tmp_path: Path, session: bytes) -> tuple[Path, Path, Path]:
    real, cell, other = tmp_path / "real.json", tmp_path / "cell" / "c.json", tmp_path / "other" / "c.json"
    for p, data in ((real, doc()), (cell, session), (other, doc())):
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(data)
    real.chmod(0o640)
    return real, cell, other


def test_copy_back_writes_a_refresh_keeping_the_real_mode(tmp_path: Path) -> None:
    real, cell, other = _files(tmp_path, REFRESHED)
    done = copy_back(cell, doc(), real, [other, cell])
    assert done.copied and done.discarded is None
    assert real.read_bytes() == REFRESHED and other.read_bytes() == REFRESHED
    assert real.stat().st_mode & 0o777 == 0o640


def test_copy_back_discards_and_says_why(tmp_path: Path) -> None:
    real, cell, other = _files(tmp_path, doc(accountUuid="acc-evil", expiresAt=1_900_000_000_000))
    done = copy_back(cell, doc(), real, [other])
    assert not done.copied and "accountUuid differs" in (done.discarded or "")
    assert real.read_bytes() == doc() and other.read_bytes() == doc()
    # a link planted in its place, a huge file, a FIFO: never read through, never written
    cell.unlink()
    cell.symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_bytes(REFRESHED)
    assert "a link" in (copy_back(cell, doc(), real).discarded or "")
    cell.unlink()
    cell.write_bytes(b" " * (MAX_BYTES + 1))
    assert "larger than" in (copy_back(cell, doc(), real).discarded or "")
    cell.unlink()
    os.mkfifo(cell)
    assert "not a regular file" in (copy_back(cell, doc(), real).discarded or "")
    assert real.read_bytes() == doc()


def test_copy_back_never_takes_a_login_the_session_created_or_an_older_one(tmp_path: Path) -> None:
    real, cell, _ = _files(tmp_path, REFRESHED)
    assert "created by the session" in (copy_back(cell, None, real).discarded or "")
    # the user's own session refreshed the real file meanwhile, to a later expiry: it stays
    later = doc(accessToken="mine", refreshToken="mine", expiresAt=1_900_000_000_000)
    real.write_bytes(later)
    assert "refreshed meanwhile" in (copy_back(cell, doc(), real).discarded or "")
    assert real.read_bytes() == later
    # unchanged: nothing to do, nothing said
    cell.write_bytes(doc())
    assert copy_back(cell, doc(), real).model_dump(mode="json") == {"copied": False, "discarded": None}

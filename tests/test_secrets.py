"""The credential paths a session reads as empty and the key it never holds, without the CLI
(tests/test_secrets_e2e.py runs them with it): the policy ``--hide``/``--expose`` make, what bubblewrap and
sandbox-exec are told, the forwarder's swap and the report's words."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ablate.core.errors import UsageError
from ablate.folder.layout import IsolationInfo
from ablate.isolate.fence import fence_argv, sandbox_profile
from ablate.isolate.forwarder import Forwarder
from ablate.isolate.nsexec import placeholder
from ablate.isolate.secrets import DEFAULT_HIDDEN, Secrets, secrets_policy
from ablate.report.caveats import secrets_words
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import invoke
from tests.test_forwarder import BODY, _control, _stream


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for rel in (".ssh/id_ed25519", ".netrc", ".config/gh/hosts.yml", ".config/gh/config.yml", "dots/aws"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("SECRET\n")
    (home / ".aws").symlink_to(home / "dots")  # a dotfiles link: its target is hidden
    return home


def test_the_policy_hides_the_defaults_that_exist_and_takes_hide_and_expose(tmp_path: Path) -> None:
    home = _home(tmp_path)
    assert Secrets().shown(home) == ["~/.netrc", "~/.ssh", "~/dots", "~/.config/gh/hosts.yml"]
    policy = secrets_policy(hide=["~/.ssh/id_ed25519", str(home / "notes")], expose=[".config"], home=home)
    assert "~/.config/gh/hosts.yml" not in policy.hide and "~/.config/gcloud" not in policy.hide
    assert {"~/.config/gh/hosts.yml", "~/.config/gcloud"} <= set(policy.exposed)
    (home / "notes").write_text("x")
    # a path inside a hidden folder goes with it; only what exists is hidden
    assert policy.shown(home) == ["~/.netrc", "~/.ssh", "~/dots", "~/notes"]
    assert secrets_policy(expose=["~/.ssh", "~/.aws"], home=home).shown(home) == [
        "~/.netrc",
        "~/.config/gh/hosts.yml",
    ]
    assert Secrets(hide=DEFAULT_HIDDEN).paths(tmp_path / "none") == []


@pytest.mark.parametrize(
    ("hide", "expose", "said"),
    [
        ([], ["~/.ssh/id_ed25519"], "--expose ~/.ssh/id_ed25519: nothing hidden there"),
        ([], ["~/src"], "--expose ~/src: nothing hidden there"),
        (["~"], [], "the home or a folder holding it"),
        (["/"], [], "the home or a folder holding it"),
        (["~/work"], [], "holds"),
        (["~/work/repo/.env"], [], "inside"),
        ([""], [], "not a path"),
    ],
)
def test_a_bad_hide_or_expose_is_a_located_error(
    tmp_path: Path, hide: list[str], expose: list[str], said: str
) -> None:
    home = _home(tmp_path)
    keep = (home / "work" / "repo", home / ".claude")
    with pytest.raises(UsageError, match=r"^--") as err:
        secrets_policy(hide=hide, expose=expose, keep=keep, home=home)
    assert said in str(err.value), err.value


def test_run_refuses_a_bad_expose_before_anything_is_written(tmp_path: Path) -> None:
    ex = materialise_example(tmp_path / "ex")
    task = tmp_path / "t.toml"
    task.write_text('schema_version = 1\nid = "t"\nprompt = "p"\n')
    args = ["ab", "--tasks", str(task), "--config-dir", str(ex.config_dir), "--repo", str(ex.repo)]
    res = invoke([*args, "--out", str(tmp_path / "runs"), "--expose", "~/src"], env={"HOME": str(ex.home)})
    assert res.exit_code == 2 and "--expose ~/src: nothing hidden there" in res.stderr, res.stderr
    assert not (tmp_path / "runs").exists()


def test_bubblewrap_shows_every_hidden_path_empty_and_read_only(tmp_path: Path) -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("no bubblewrap")
    home = _home(tmp_path)
    script = (
        "cat ~/.netrc ~/.ssh/id_ed25519 ~/.aws/aws ~/.config/gh/hosts.yml ~/.config/gh/config.yml; "
        "ls -A ~/.ssh; echo x > ~/.netrc; touch ~/.ssh/k; echo END"
    )
    argv = fence_argv(bwrap, ["sh", "-c", script], writable=[home], cwd="/", hidden=Secrets().paths(home))
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(home)}
    )
    if "END" not in proc.stdout:
        pytest.skip(f"bubblewrap refused here: {proc.stderr[:200]}")
    assert proc.stdout == "SECRET\nEND\n", proc  # gh's config.yml only: it is no credential
    assert proc.stderr.count("Read-only file system") == 2 and "id_ed25519: No such file" in proc.stderr
    assert (home / ".netrc").read_text() == "SECRET\n" and not (home / ".ssh" / "k").exists()


def test_sandbox_exec_denies_the_hidden_paths() -> None:
    plain = sandbox_profile([Path("/cell")])
    profile = sandbox_profile([Path("/cell")], [Path("/Users/me/.ssh"), Path("/Users/me/.netrc")])
    assert (
        profile
        == plain
        + '(deny file-read* file-write*\n  (subpath "/Users/me/.ssh")\n  (subpath "/Users/me/.netrc"))\n'
    )


def test_the_forwarder_swaps_the_sessions_placeholder_for_the_real_key(tmp_path: Path) -> None:
    real = "sk-ant-real-key"
    fwd = Forwarder()
    with SimServer(script_from_data({"default": {"text": "OK"}, "rules": []}), api_key=real) as sim:
        try:
            token = fwd.ticket("sid")
            control, said = _control(fwd, token, f"{sim.base_url} ANTHROPIC_API_KEY={real.encode().hex()}")
            assert said == "ok\n"
            statuses = []
            for key in (placeholder(token, "ANTHROPIC_API_KEY"), "sk-something-else"):
                conn = http.client.HTTPConnection("relay")
                conn.sock = _stream(control)
                conn.request("POST", "/v1/messages", body=json.dumps(BODY), headers={"x-api-key": key})
                resp = conn.getresponse()
                resp.read()
                statuses.append(resp.status)
            assert statuses == [200, 401]  # the placeholder is swapped; anything else passes as it is
            bad, said = _control(fwd, fwd.ticket("sid2"), f"{sim.base_url} HOME=2f")
            assert said.startswith("no: only ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN are swapped"), said
            control.close()
            bad.close()
        finally:
            fwd.close()


def test_the_isolation_caveat_names_what_was_hidden_exposed_and_swapped() -> None:
    auth = {"method": "api-key", "source": "ANTHROPIC_API_KEY"}
    info = IsolationInfo(
        backend="namespace", network="sealed", auth=auth, hidden=["~/.ssh"], exposed=["~/.aws"]
    )
    assert secrets_words(info) == [
        "credential files hidden from every session (read as empty): ~/.ssh",
        "left readable by --expose: ~/.aws",
        "the sessions held a placeholder for ANTHROPIC_API_KEY, which the forwarder swapped for the key",
    ]
    unsealed = info.model_copy(update={"network": "unsealed", "hidden": [], "exposed": []})
    assert secrets_words(unsealed) == ["no credential file was hidden (no fence ran)"]
    assert secrets_words(info.model_copy(update={"hidden": None})) == []  # recorded before this existed


def test_a_login_key_is_a_method_of_its_own_and_moves_into_the_variable(tmp_path: Path) -> None:
    from ablate.isolate.auth import auth_method, moved_login_key
    from ablate.isolate.shadow_home import copy_account_state
    from ablate.setup.load import load_setup

    ex = materialise_example(tmp_path / "ex")
    account = ex.home / ".claude.json"
    state = json.loads(account.read_text())
    account.write_text(json.dumps({**state, "primaryApiKey": "sk-login"}))
    found = auth_method({}, ex.config_dir)
    assert (found.method, found.source) == ("login-key", f"{account} (primaryApiKey)")
    # the environment's key comes first, as in the CLI: then nothing moves
    assert auth_method({"ANTHROPIC_API_KEY": "k"}, ex.config_dir).method == "api-key"
    assert moved_login_key({"ANTHROPIC_API_KEY": "k"}, ex.config_dir) == ({"ANTHROPIC_API_KEY": "k"}, "")
    env, moved = moved_login_key({"HOME": "h"}, ex.config_dir)
    assert env == {"HOME": "h", "ANTHROPIC_API_KEY": "sk-login"} and moved == f"{account} (primaryApiKey)"
    # a cell's copies of the account state keep everything else, never the key
    home, config = tmp_path / "cell" / "home", tmp_path / "cell" / "config"
    config.mkdir(parents=True)
    home.mkdir()
    assert copy_account_state(load_setup(ex.config_dir, ex.repo), home, config) == account
    for copy in (home / ".claude.json", config / ".claude.json"):
        assert json.loads(copy.read_text()) == state and copy.stat().st_mode & 0o777 == 0o600
    assert "~/.claude.json" in DEFAULT_HIDDEN and "~/.claude.json" in Secrets().shown(ex.home)

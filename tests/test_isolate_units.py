"""Unit tests of the isolation helpers that need no CLI: git-history detection, write reports, git status
hiding, mount order, backend choice, hook-order-free request comparison."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.errors import UsageError
from ablate.folder.layout import TMP_EMPTY
from ablate.folder.writes_summary import writes_lines
from ablate.isolate import namespace, seal
from ablate.isolate.detect import namespace_check
from ablate.isolate.gitreads import HISTORY_FLAG, STRIPPED_FLAG, classify, git_history_reads
from ablate.isolate.namespace import Mount, mounts_below_tmp, order_mounts, tmp_area, tmp_note
from ablate.isolate.registry import choose_isolation
from ablate.isolate.writes import scan_upper, session_writes
from ablate.probe.fingerprints import normalise_request
from tests.helpers_cli import invoke

STRIPPED = ["docs/runbooks", "MEMORY.md"]


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("git show HEAD:docs/runbooks/deploy.md", {STRIPPED_FLAG}),
        ("cd /repo && git log -p -- docs/runbooks/", {STRIPPED_FLAG}),
        ("git checkout HEAD -- docs/runbooks", {STRIPPED_FLAG}),
        ("git -C /repo restore --source=HEAD~1 docs", {STRIPPED_FLAG}),  # a folder holding a stripped path
        ("git cat-file -p HEAD:MEMORY.md | head", {STRIPPED_FLAG}),
        ("git log -p", {HISTORY_FLAG}),
        ("git show", {HISTORY_FLAG}),
        ("git show --stat HEAD", set()),
        ("git log --oneline -5", set()),
        ("git show HEAD:app.py", set()),
        ("git status && git diff", set()),
        ("cat docs/runbooks/deploy.md", set()),  # not git: the working tree has no such file in the cell
        ("git clone /repo /tmp/x", {HISTORY_FLAG}),
        ("FOO=1 git --no-pager log --patch -1", {HISTORY_FLAG}),
        ("echo $(git show HEAD:docs/runbooks/deploy.md)", {STRIPPED_FLAG}),
    ],
)
def test_classify_git_reads(command: str, flags: set[str]) -> None:
    assert flags == classify(command, STRIPPED)


def test_nothing_is_flagged_when_the_cell_strips_nothing() -> None:
    assert set() == classify("git show HEAD:docs/runbooks/deploy.md", [])


def _bash(command: str) -> bytes:
    rec = {
        "type": "assistant",
        "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]},
    }
    return orjson.dumps(rec) + b"\n"


def test_git_history_reads_scans_the_session_and_its_subagents(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    transcript.write_bytes(_bash("git log --oneline") + b"not json\n")
    assert git_history_reads(transcript, STRIPPED) == []
    sub = tmp_path / "s" / "subagents"
    sub.mkdir(parents=True)
    (sub / "agent-1.jsonl").write_bytes(_bash("git show HEAD:docs/runbooks/a.md"))
    assert git_history_reads(transcript, STRIPPED) == [STRIPPED_FLAG]
    assert git_history_reads(None, STRIPPED) == []


def test_mounts_are_ordered_tmp_first_then_shallow_before_deep() -> None:
    def m(target: str) -> Mount:
        return Mount(target, ("/l",), "/u", "/w")

    targets = ["/home/me/src/repo/.git/objects", "/home/me/.claude", "/home/me/src/repo", "/home/me", "/tmp"]
    ordered = [x.target for x in order_mounts([m(t) for t in targets])]
    assert ordered == [
        "/tmp",
        "/home/me",
        "/home/me/.claude",
        "/home/me/src/repo",
        "/home/me/src/repo/.git/objects",
    ]


def test_choose_isolation() -> None:
    assert choose_isolation("links").backend == "links"
    with pytest.raises(UsageError):
        choose_isolation("chroot")
    assert choose_isolation(None).backend in ("namespace", "links")


class _Env:
    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.home = root, home

    def upper(self, area: str) -> Path:
        return self.root / area

    def shown_as(self) -> dict[str, Path]:
        return {
            "tmp": Path("/tmp"),
            "home": self.home,
            "repo": self.home / "repo",
            "objects": self.home / "repo/.git/objects",
            "config": self.home / ".claude",
        }


def _write(path: Path, data: bytes = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_session_writes_groups_by_folder_and_skips_cli_writes(tmp_path: Path) -> None:
    up = tmp_path / "up"
    for n in range(3):
        _write(up / "home" / ".pyenv" / "shims" / f"s{n}", b"abcd")
    _write(up / "home" / ".gitconfig")
    _write(up / "config" / "skills" / "x" / "SKILL.md")
    _write(up / "config" / "projects" / "-r" / "sid.jsonl")  # the CLI's own transcript
    _write(up / "config" / ".claude.json")
    _write(up / "tmp" / f"claude-{os.getuid()}" / "x" / "started")
    _write(up / "tmp" / "stray")
    (up / "repo").mkdir()
    (up / "objects").mkdir()
    w = session_writes(_Env(up, Path("/home/me"))).model_dump(mode="json")
    out = w["outside_cell"]
    assert out["home"]["by_folder"] == {"~/.pyenv": 3, "~/.gitconfig": 1}
    assert out["home"]["files"] == 4 and out["home"]["bytes"] == 13
    assert out["config"]["by_folder"] == {"~/.claude/skills/x": 1}
    assert out["tmp"]["by_folder"] == {"/tmp/stray": 1}
    assert w["areas"]["config"]["files"] == 3
    assert "repo" not in out
    lines = writes_lines([w], 1)
    assert lines[0] == "1 of 1 sessions wrote ~/.pyenv (3 files in all) — discarded"
    assert "1 of 1 sessions wrote ~/.claude/skills/x (1 file in all) — discarded" in lines


@pytest.mark.skipif(os.geteuid() != 0, reason="a whiteout is a 0/0 character device: mknod needs root")
def test_whiteouts_count_as_deletions(tmp_path: Path) -> None:
    import stat

    (tmp_path / "u").mkdir()
    os.mknod(tmp_path / "u" / "gone", stat.S_IFCHR | 0o600, os.makedev(0, 0))
    area = scan_upper(tmp_path / "u", Path("/home/me"), label="~")
    assert (area.files, area.deleted) == (0, 1)


def test_normalise_request_ignores_the_order_of_concurrent_hook_outputs() -> None:
    def body(order: list[str]) -> dict[str, Any]:
        hooks = [
            {"type": "text", "text": f"<system-reminder>\nSessionStart:startup hook success: {h}"}
            for h in order
        ]
        return {"messages": [{"role": "user", "content": [*hooks, {"type": "text", "text": "prompt"}]}]}

    a = normalise_request(body(["one", "two"]), {}, keep_branch=True)
    assert a == normalise_request(body(["two", "one"]), {}, keep_branch=True)
    assert a != normalise_request(body(["one", "three"]), {}, keep_branch=True)


def test_a_refreshed_credentials_file_is_copied_back_to_the_real_one(tmp_path: Path) -> None:
    from ablate.folder.session import CredentialsCopy
    from ablate.isolate.namespace import CellLayers, NamespaceCellEnv, copy_back_credentials
    from ablate.setup.cells import ResolvedCell

    real = tmp_path / "home" / ".claude"
    cells = tmp_path / "shared" / "cells"
    for d in (real, cells / "c00" / "config", cells / "c04" / "config", tmp_path / "s00" / "up" / "config"):
        d.mkdir(parents=True)
    old = '{"claudeAiOauth": {"accessToken": "a1", "refreshToken": "r1", "expiresAt": 1000}}'
    fresh = '{"claudeAiOauth": {"accessToken": "a2", "refreshToken": "r2", "expiresAt": 2000}}'
    for f in (real, cells / "c00" / "config", cells / "c04" / "config"):
        (f / ".credentials.json").write_text(old)
    (real / ".credentials.json").chmod(0o640)
    layers = CellLayers(cells / "c00" / "config", cells / "c00" / "repo", {}, [], [], {})
    env = NamespaceCellEnv(
        cell=ResolvedCell("C0", 0, "control", (), False),
        root=tmp_path / "s00",
        slot=0,
        home=tmp_path / "home",
        repo=tmp_path / "repo",
        real_config=real,
        env={},
        spec=tmp_path / "s00" / "view.json",
        layers=layers,
    )
    assert not copy_back_credentials(env).copied  # the session did not touch it
    (env.upper("config") / ".credentials.json").write_text(old)
    assert copy_back_credentials(env) == CredentialsCopy()  # copied up, unchanged
    (env.upper("config") / ".credentials.json").write_text('{"token": "new"}')
    assert "no claudeAiOauth" in (copy_back_credentials(env).discarded or "")
    assert (real / ".credentials.json").read_text() == old
    (env.upper("config") / ".credentials.json").write_text(fresh)
    assert copy_back_credentials(env).copied
    assert (real / ".credentials.json").read_text() == fresh
    assert (real / ".credentials.json").stat().st_mode & 0o777 == 0o640  # the real file's own mode
    assert (cells / "c04" / "config" / ".credentials.json").read_text() == fresh


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root (CI and this machine run as root)")
def test_clean_unmounts_what_a_killed_runner_left_mounted(tmp_path: Path) -> None:
    """A runner killed while it graded a session's view leaves `<slot>/merged` mounted; the resume's clean
    must unmount it (deepest first) before removing the folder, not fail with EBUSY."""
    import shutil
    import subprocess

    from ablate.core import mounts

    merged = tmp_path / "s00" / "merged"
    inner = merged / ".git" / "objects"
    merged.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(merged)], check=True)
    inner.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(inner)], check=True)
    try:
        assert mounts.mounts_under(str(tmp_path)) == [str(inner), str(merged)]
        assert mounts.unmount_all_under(str(tmp_path / "s00")) == [str(inner), str(merged)]
        assert mounts.mounts_under(str(tmp_path)) == []
        shutil.rmtree(tmp_path / "s00")
    finally:
        for point in mounts.mounts_under(str(tmp_path)):
            subprocess.run(["umount", "-l", point], check=False)


def test_tree_listing_survives_files_removed_while_it_walks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The links guard walks the user's live repo (.git included): git gc may delete loose objects mid-walk."""
    from ablate.core import fsutil

    (tmp_path / "keep").write_text("k")
    (tmp_path / "gone").write_text("g")
    (tmp_path / "sub").mkdir()
    real_stat = os.stat

    def vanishing(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path).endswith(("gone", "sub")):
            raise FileNotFoundError(path)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", vanishing)
    assert sorted(fsutil.tree_listing(tmp_path)) == ["keep"]


def test_links_guard_tells_git_gc_from_a_real_change(tmp_path: Path) -> None:
    """git packs loose objects in the background (gc --auto): the objects are all still there, so that is no
    change of the user's files; a new loose object (a model writing through the alternates path) is one."""
    import subprocess

    from ablate.isolate.guard import changes_and_notes, take

    cfg, repo = tmp_path / "cfg", tmp_path / "repo"
    cfg.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    for i in range(5):
        (repo / f"f{i}").write_text(str(i))
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "c"], check=True, env=env)
    before = take(cfg, repo)
    subprocess.run(["git", "-C", str(repo), "gc", "-q"], check=True, env=env)
    changed, notes = changes_and_notes(before)
    assert changed == []
    assert len(notes) == 1 and "7 loose objects and 1 refs packed by git's own maintenance" in notes[0]

    before = take(cfg, repo)
    blob = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-w", "--stdin"],
        input="new\n",
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()
    changed, notes = changes_and_notes(before)
    assert f"{repo}/.git/objects/{blob[:2]}/{blob[2:]} (added)" in changed and notes == []


def test_links_guard_still_reports_a_moved_branch_after_gc(tmp_path: Path) -> None:
    """A ref gc packed is maintenance only when it still holds its value: a branch moved by the session is a
    change even when gc ran too."""
    import subprocess

    from ablate.isolate.guard import changes_and_notes, take

    cfg, repo = tmp_path / "cfg", tmp_path / "repo"
    cfg.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    git = ["git", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    (repo / "f").write_text("1")
    subprocess.run([*git, "add", "."], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "one"], check=True, env=env)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "two"], check=True, env=env)
    before = take(cfg, repo)
    subprocess.run([*git, "update-ref", "refs/heads/main", "HEAD~1"], check=True, env=env)
    subprocess.run([*git, "gc", "-q"], check=True, env=env)
    changed, _ = changes_and_notes(before)
    assert f"{repo}/.git/refs/heads/main (removed)" in changed


def test_userns_refusal_names_the_cause_and_the_fix(tmp_path: Path) -> None:
    from ablate.isolate.detect import userns_refusal

    (tmp_path / "kernel").mkdir()
    (tmp_path / "user").mkdir()
    (tmp_path / "kernel" / "apparmor_restrict_unprivileged_userns").write_text("1\n")
    said = userns_refusal("EPERM", tmp_path)
    assert "apparmor_restrict_unprivileged_userns=1" in said and "sudo sysctl" in said and "userns," in said
    (tmp_path / "kernel" / "apparmor_restrict_unprivileged_userns").write_text("0\n")
    (tmp_path / "user" / "max_user_namespaces").write_text("0\n")
    assert "sudo sysctl user.max_user_namespaces=" in userns_refusal("EPERM", tmp_path)


def test_fence_argv_binds_only_what_is_writable(tmp_path: Path) -> None:
    from ablate.isolate.fence import fence_argv

    (tmp_path / "a").mkdir()
    argv = fence_argv(
        "bwrap", ["true"], writable=[tmp_path / "a", tmp_path / "gone"], cwd=tmp_path, tmp=tmp_path
    )
    assert argv[argv.index("--ro-bind") + 1 : argv.index("--ro-bind") + 3] == ["/", "/"]
    assert "--cap-drop" in argv and "--unshare-user" in argv and "--unshare-pid" in argv
    binds = [argv[i + 1 : i + 3] for i, a in enumerate(argv) if a == "--bind"]
    # the private /tmp before the writable folders, so a cell folder under the real /tmp stays reachable
    assert binds == [[str(tmp_path), "/tmp"], [str(tmp_path / "a"), str(tmp_path / "a")]]
    assert argv[-2:] == ["--", "true"]


def test_denied_writes_are_read_from_the_tools_and_hooks_errors(tmp_path: Path) -> None:
    """Each tool result and hook output counts once (not its ``toolUseResult`` copy, nor the request blob
    that repeats it); paths in the cell's shadow home or the real home are shown as ``~/...``."""
    from ablate.isolate.fence import denied_writes

    project = tmp_path / "projects" / "-repo"
    project.mkdir(parents=True)
    shadow, real = tmp_path / "s00" / "home", Path("/h")
    said = f"sh: 1: cannot create {shadow}/.bashrc: Read-only file system\ntouch: cannot touch '/h/x': Read-only file system"
    result = {"type": "tool_result", "tool_use_id": "t1", "content": said}
    records = [
        {
            "type": "attachment",
            "attachment": {"type": "hook_success", "stderr": f"{shadow}/.bashrc: Read-only file system"},
        },
        {"type": "user", "message": {"role": "user", "content": [result]}, "toolUseResult": {"stderr": said}},
        {"type": "api-request-blob", "message": {"role": "user", "content": [result]}},
        {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": "/etc/x: Read-only file system"}]},
        },
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "content": [{"type": "text", "text": "/etc/y: EROFS"}]}]
            },
        },
    ]
    (project / "s.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\nnot json\n")
    assert denied_writes(tmp_path, homes=[shadow, real]) == [
        {"path": "~/.bashrc", "count": 2},
        {"path": "/etc/y", "count": 1},
        {"path": "~/x", "count": 1},
    ]


def test_auth_check_refuses_a_cell_that_would_log_in_differently(tmp_path: Path) -> None:
    """The run's own check (``check_run_auth`` on the config dirs the run's backend builds, as ``run.execute``
    calls it) on the example's binary cells: C0 and C11 both hold the user's credentials file, so they pass
    with its method; a setup that logs in through an ``apiKeyHelper`` in settings.json, which C11's empty
    config dir does not keep, is refused, located at C11 and with the fix; an API key for all cells is one
    method everywhere."""
    from ablate.isolate.auth import AuthMethod, cell_login, check_run_auth
    from ablate.isolate.backend import BackendOptions
    from ablate.isolate.registry import open_backend
    from ablate.setup.cells import load_cell_set
    from ablate.setup.examples import materialise_example
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import load_setup

    ex = materialise_example(tmp_path / "ex")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("binary", catalog).cells

    def check(env: dict[str, str]) -> AuthMethod:
        backend = open_backend("links", setup, catalog, tmp_path / "work", BackendOptions())
        try:
            built = (
                cell_login(c.id, backend.cell_config(c).path, base_env=env, platform="linux") for c in cells
            )
            return check_run_auth(setup, built, user_env=env, platform="linux")
        finally:
            backend.close()

    mine = check({"PATH": "/usr/bin"})
    assert mine.to_json() == {
        "method": "credentials-file",
        "source": str(ex.config_dir / ".credentials.json"),
    }
    assert os.listdir(tmp_path / "work") == []  # every cell's config dir removed with the backend
    settings = ex.config_dir / "settings.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "apiKeyHelper": "echo k"}))
    (ex.config_dir / ".credentials.json").unlink()
    with pytest.raises(UsageError) as err:
        check({"PATH": "/usr/bin"})
    assert "cell C11: would authenticate with nothing (logged out)" in str(err.value)
    assert f"your setup with api-key-helper ({settings})" in str(err.value)
    assert "CLAUDE_CODE_OAUTH_TOKEN" in (err.value.hint or "")
    assert check({"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "sk-y"}).method == "api-key"


def test_sandbox_profile_allows_writes_only_in_the_cell(tmp_path: Path) -> None:
    """The macOS fence's profile text (sandbox-exec itself exists only on macOS: not run here)."""
    from ablate.isolate.fence import sandbox_profile

    profile = sandbox_profile([tmp_path / 'a "b"'])
    assert profile.startswith("(version 1)\n(allow default)\n(deny file-write*)\n")
    assert f'(subpath "{tmp_path}/a \\"b\\"")' in profile


def test_fence_keeps_what_the_session_reads_under_the_real_tmp_readable(tmp_path: Path) -> None:
    """A repository or home under /tmp (a test's, or a user's scratch clone) is hidden by the private /tmp
    unless bound back: its object store is what the checkout's alternates read."""
    from ablate.isolate.fence import fence_argv

    home = Path(tempfile.mkdtemp(prefix="ablate-fence-", dir="/tmp"))
    try:
        argv = fence_argv(
            "bwrap", ["true"], writable=[], cwd=home, tmp=tmp_path, visible=[home, Path("/usr")]
        )
        ro = [argv[i + 1 : i + 3] for i, a in enumerate(argv) if a == "--ro-bind"]
        # /usr is outside /tmp: already readable
        assert ro == [["/", "/"], ["/proc/sys", "/proc/sys"], [str(home), str(home)]]
        assert argv.index("/tmp") < argv.index(str(home))  # bound back after the private /tmp
    finally:
        home.rmdir()


def test_doctor_reports_each_cells_login_as_the_run_checks_it(tmp_path: Path) -> None:
    """A layer of the user's own covers the credentials file: C11 strips it and would start logged out.
    ``ablate doctor`` says so per cell, with the run check's own words, and exits 1; without the layer
    every cell logs in as the user does."""

    from ablate.setup.examples import materialise_example

    ex = materialise_example(tmp_path / "ex")
    toml = tmp_path / "ablate.toml"
    toml.write_text(
        'schema_version = 1\n[[layer]]\nid = "login"\nside = "config"\npaths = [".credentials.json"]\n'
    )
    where = [
        "doctor",
        "--config-dir",
        str(ex.config_dir),
        "--repo",
        str(ex.repo),
        "--work-dir",
        str(tmp_path),
    ]
    env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": None, "CLAUDE_CODE_OAUTH_TOKEN": None}
    res = invoke([*where, "--cells", "binary", "--ablate-toml", str(toml), "--json"], env=env)
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and not doc["ok"]
    creds = {"method": "credentials-file", "source": "<C0 config dir>/.credentials.json"}
    assert doc["auth_cells"]["cells"] == {"C0": creds, "C11": {"method": "none", "source": ""}}
    said = [p["what"] for p in doc["problems"] if p["what"].startswith("authentication")]
    assert said == [
        "authentication: cell C11: would authenticate with nothing (logged out) (no login found), "
        f"your setup with credentials-file ({ex.config_dir / '.credentials.json'})"
    ]
    res = invoke([*where, "--json"], env=env)
    doc = json.loads(res.stdout)
    assert doc["auth_cells"]["checked"] and set(doc["auth_cells"]["cells"]) == {f"C{i}" for i in range(12)}
    assert {a["method"] for a in doc["auth_cells"]["cells"].values()} == {"credentials-file"}
    assert not any(p["what"].startswith("authentication") for p in doc["problems"])


def test_the_fence_lets_only_the_login_file_be_written_through(tmp_path: Path) -> None:
    """Under the links fence a session writes its own cell and the real ``.credentials.json`` (a refreshed
    token must reach it), and nothing else of the real config dir."""
    import subprocess

    from ablate.isolate.fence import fence_support
    from ablate.isolate.seal import fenced

    if not fence_support().ok:
        pytest.skip(f"no write fence here: {fence_support().reason}")
    real, cell = tmp_path / "real", tmp_path / "cell"
    real.mkdir()
    cell.mkdir()
    creds, other = real / ".credentials.json", real / "settings.json"
    creds.write_text("{}")
    other.write_text("{}")
    script = f"echo x > {cell}/f; echo new > {creds}; echo x > {other}; true"
    argv = fenced(["sh", "-c", script], root=cell, cwd=cell, visible=[real], through=[creds])
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    assert (cell / "f").read_text() == "x\n"
    assert creds.read_text() == "new\n"
    assert other.read_text() == "{}"


def test_fenced_keeps_the_program_under_tmp_reachable(tmp_path: Path) -> None:
    """A CLI installed under /tmp (a fresh clone's .cache) must still be found inside the private /tmp."""
    from ablate.isolate.fence import fence_support
    from ablate.isolate.seal import fenced

    if not fence_support().ok or fence_support().bwrap is None:
        pytest.skip("no bubblewrap fence here")
    program = Path(tempfile.mkdtemp(prefix="ablate-prog-", dir="/tmp"))
    try:
        (tmp_path / "cell").mkdir()
        argv = fenced([str(program / "claude"), "-p"], root=tmp_path / "cell", cwd=tmp_path / "cell")
        ro = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"]
        assert str(program) in ro
    finally:
        program.rmdir()


@pytest.mark.skipif(not namespace_check().ok, reason="the namespace backend does not work here")
def test_prepare_builds_every_cells_repo_layer_in_one_process_as_one_at_a_time_would(tmp_path: Path) -> None:
    """``prepare`` builds the layered cells' distinct repo layers in one cowlayer process (cells whose worktree
    operations agree share one: fewer than twelve), and each cell's layers equal those a backend built one
    cell at a time (one process per distinct layer); a cell prepared again, or built after, starts none."""
    from ablate.isolate import namespace
    from ablate.isolate.backend import BackendOptions
    from ablate.isolate.registry import open_backend
    from ablate.setup.cells import ResolvedCell, load_cell_set
    from ablate.setup.examples import materialise_example
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import load_setup

    ex = materialise_example(tmp_path / "ex")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog).cells
    from ablate.isolate.nslower import build_repo_layers as build

    specs: list[int] = []

    def counted(items: list[dict[str, object]], spec_path: Path) -> None:
        specs.append(len(items))
        build(items, spec_path)

    def layers(backend: namespace.NamespaceEnvironments, cell: ResolvedCell) -> tuple[Any, ...]:
        got = backend.cell_layers(cell)
        return got.fingerprints, got.mismatches, got.notes, got.repo_layers

    together = open_backend("namespace", setup, catalog, tmp_path / "together", BackendOptions())
    alone = open_backend("namespace", setup, catalog, tmp_path / "alone", BackendOptions())
    assert isinstance(together, namespace.NamespaceEnvironments)
    assert isinstance(alone, namespace.NamespaceEnvironments)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(namespace, "build_repo_layers", counted)
            together.prepare(cells)
            together.prepare(cells[:3])
            built = {c.id: layers(together, c) for c in cells}
            assert len(specs) == 1 and 1 < specs[0] < len(cells) == 12
            one_each = {c.id: layers(alone, c) for c in cells}
            assert specs[1:] == [1] * specs[0]
        assert built == one_each
        assert any(fp for fps, *_ in built.values() for fp in fps.values())
    finally:
        together.close()
        alone.close()


def test_the_views_tmp_is_the_hosts_unless_a_mount_below_keeps_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ordinary user's view cannot show a ``/tmp`` with a mount below it (an overlay in a user namespace is
    refused: EINVAL); it shows an empty folder then, holding only the mount points of the view's other areas
    under ``/tmp``, made afresh on each call (a retarget)."""
    monkeypatch.setattr(seal, "RELAY", Path("/opt/ablate/isolate/relay.py"))  # wherever the tests run
    (shown,) = tmp_area(tmp_path / "s00", [], ["/tmp/a/home", "/var/repo"], [Path("/tmp/c/bin/claude")])
    assert (shown.target, shown.lower) == ("/tmp", ("/tmp",))

    below = ["/tmp/.mount_app"]
    empty, nothing = tmp_path / "s00" / "empty-tmp", tmp_path / "s00" / "empty"
    for _ in range(2):
        targets = ["/tmp/a/home", "/tmp/a/home/repo", "/var/repo", "/tmpx"]
        hidden, cli = tmp_area(tmp_path / "s00", below, targets, [Path("/tmp/c/bin/claude")])
        assert (hidden.target, hidden.lower) == ("/tmp", (str(empty),))
        # the CLI's folder, read-only: no upper folder, an empty second lower one
        assert (cli.target, cli.lower, cli.upper) == ("/tmp/c/bin", ("/tmp/c/bin", str(nothing)), "")
        found = sorted(str(p.relative_to(empty)) for p in empty.rglob("*"))
        assert found == ["a", "a/home", "a/home/repo", "c", "c/bin"] and not any(nothing.iterdir())
        (empty / "left-by-a-session").write_text("x")  # gone on the next call


def test_an_emptied_tmp_still_shows_the_folder_of_a_program_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CLI installed in a checkout under ``/tmp`` (``make`` in a fresh clone there) and ablate's relay run
    inside the view: their folders are shown, once each, unless a target of the view shows them already."""
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="ablate-shown-"))
    below = ["/tmp/.mount_app"]
    monkeypatch.setattr(seal, "RELAY", base / "ablate" / "isolate" / "relay.py")  # ablate cloned there too
    monkeypatch.setattr(seal, "relay_python", lambda: "/usr/bin/python3")

    def shown(programs: list[Path], targets: list[str | Path]) -> list[str]:
        return [m.target for m in tmp_area(tmp_path / "s00", below, targets, programs)[1:]]

    try:
        (base / "cli" / "lib").mkdir(parents=True)
        cli, inner = base / "cli" / "claude", base / "cli" / "lib" / "tool"
        cli.write_text(""), inner.write_text("")
        link = tmp_path / "claude"  # a link outside /tmp to a CLI inside it: the real folder is shown
        link.symlink_to(cli)
        relay = str(base / "ablate" / "isolate")
        folders = [str(base / "cli"), str(base / "cli" / "lib"), relay]
        assert shown([link, inner], ["/var/home"]) == sorted(folders)
        assert shown([link, cli], ["/var/home"]) == sorted(folders[::2])  # the same folder once
        assert shown([cli], ["/var/home", base / "cli"]) == [relay]  # inside the repo, say: shown by it
        assert shown([Path("/usr/bin/true")], [base]) == []
    finally:
        shutil.rmtree(base)


def test_mounts_below_tmp_keep_it_out_of_an_ordinary_users_view_only(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {"/tmp": ["/tmp/.mount_app", "/tmp"]}
    monkeypatch.setattr(namespace, "mounts_under", lambda root: seen.get(root, []))
    monkeypatch.setattr(os.path, "realpath", lambda p: p)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert mounts_below_tmp() == ["/tmp/.mount_app"]  # /tmp itself being a mount keeps nothing out
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert mounts_below_tmp() == []  # root's views show /tmp whatever is mounted below it


def test_the_isolation_caveat_says_when_sessions_saw_an_empty_tmp(tmp_path: Path) -> None:
    from ablate.folder.layout import RunFolder, read_manifest, write_manifest
    from ablate.report.sections import build_report
    from tests.report_support import Outcome, make_run

    run = make_run(tmp_path / "run", cells={"C0": [], "C1": ["user-claude-md"]}, tasks=["greet"], repeats=1,
                   outcome=lambda *_: Outcome())  # fmt: skip
    (iso,) = [c.text for c in build_report(run).caveats if c.id == "isolation"]
    assert TMP_EMPTY not in iso
    note = tmp_note(["/tmp/.mount_app"])
    manifest = read_manifest(RunFolder(run))
    cells = [c.model_copy(update={"notes": [*c.notes, note]}) for c in manifest.cells]
    write_manifest(RunFolder(run), manifest.model_copy(update={"cells": cells}))
    (iso,) = [c.text for c in build_report(run).caveats if c.id == "isolation"]
    assert iso.count(TMP_EMPTY) == 1 and "/tmp/.mount_app" in iso, iso

"""End to end: sessions that try to break out of their cell (docs/ARCHITECTURE.md#environments, invariant 8).

The real pinned CLI against the scripted sim. One adversarial Bash call appends to skill, agent, hook and
command files, runs ``git config --global``, writes ``~/.config/x``, commits, sets ``git config`` and a
``pre-commit`` hook in the checkout, writes into the object store (through ``objects/info/alternates`` when
the checkout has one, else the real path of the user's store), reads a stripped runbook back through git and
writes to ``/tmp``; the home's ``.bashrc`` rewrites ``~/.toolchain/shim`` in every shell; a Python hook
imports a sibling module (``__pycache__``) and prints the git branch. Afterwards the home, the config dir and
the repository (``.git`` included) are byte-identical, and the next item, in another cell, sees none of it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.claude import claude_argv, find_claude
from ablate.core.fsutil import tree_hash, tree_listing
from ablate.core.proc import run_process
from ablate.folder.writes_summary import writes_lines
from ablate.isolate import guard
from ablate.isolate.backend import BackendOptions
from ablate.isolate.detect import namespace_check
from ablate.isolate.gitreads import STRIPPED_FLAG, git_history_reads
from ablate.isolate.links import LinksEnvironments
from ablate.isolate.namespace import NamespaceCellEnv, NamespaceEnvironments, tmp_note
from ablate.probe.probe import probe
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import ExampleSetup, materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup
from ablate.sim import SimServer, iter_requests, script_from_data
from tests.helpers_cli import ABLATE, tool_output
from tests.run_folder import items_said, why
from tests.user_support import User, world_readable_dir

pytestmark = pytest.mark.e2e

MODEL = "claude-sonnet-4-6"
ATTACK = r"""
set +e
echo ATTACK >> "$HOME/.claude/skills/release-notes/SKILL.md"
echo ATTACK >> "$HOME/.claude/agents/doc-summarizer.md"
echo ATTACK >> "$HOME/.claude/hooks/post_tool.py"
echo ATTACK >> "$HOME/.claude/commands/standup.md"
git config --global user.name attacker
mkdir -p "$HOME/.config" && echo ATTACK > "$HOME/.config/x"
echo ATTACK >> README.md
git add -A && git -c user.name=a -c user.email=a@b.invalid commit -qm attack
git config core.attack yes
printf '#!/bin/sh\nexit 0\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
alt=$(cat .git/objects/info/alternates 2>/dev/null)
[ -n "$alt" ] && echo ATTACK > "$alt/attack-through-alternates"
echo ATTACK > "$(git rev-parse --path-format=absolute --git-path objects)/attack-direct"
echo ATTACK > "$ISO_TMP"
git show HEAD:docs/runbooks/deploy.md | head -1
echo ATTACK-DONE
"""
CHECK = (
    'echo "cfg=[$(git config core.attack)] hook=[$(test -e .git/hooks/pre-commit && echo yes)] '
    "x=[$(cat ~/.config/x 2>/dev/null)] gl=[$(git config --global user.name)] "
    "skill=[$(grep -c ATTACK ~/.claude/skills/release-notes/SKILL.md)] "
    "head=[$(git log -1 --format=%s)] tmp=[$(cat $ISO_TMP 2>/dev/null)] "
    "branch=[$(git branch --show-current)] status=[$(git status --porcelain)] "
    'runbooks=[$(ls docs/runbooks 2>/dev/null | tr "\\n" " ")]"'
)
BRANCH_HOOK = """#!/usr/bin/env python3
import subprocess

import hookutil  # a sibling module: importing it writes __pycache__ next to it

branch = subprocess.run(["git", "branch", "--show-current"], capture_output=True, text=True).stdout.strip()
print(f"hook-branch=[{branch}] {hookutil.TAG}")
"""


def _script() -> Any:
    def rules(marker: str, command: str) -> list[dict[str, Any]]:
        return [
            {
                "name": f"{marker}-bash",
                "where": "prompt",
                "contains": [marker],
                "turn": 0,
                "tool_use": [{"name": "Bash", "input": {"command": command, "description": marker}}],
            },
            {
                "name": f"{marker}-done",
                "where": "prompt",
                "contains": [marker],
                "turn": {"min": 1},
                "text": "done",
            },
        ]

    return script_from_data(
        {
            "default": {"text": "OK."},
            "rules": [*rules("ISO-ATTACK", ATTACK), *rules("ISO-CHECK", CHECK)],
        }
    )


def _adversarial_example(dest: Path, *, sandbox: bool = False) -> ExampleSetup:
    ex = materialise_example(dest)
    (ex.home / ".toolchain").mkdir()
    (ex.home / ".toolchain" / "shim").write_text('#!/bin/sh\nexec /usr/bin/python3 "$@"\n')
    (ex.home / ".bashrc").write_text('echo "rewritten by $$ for $HOME" > "$HOME/.toolchain/shim"\n')
    hooks = ex.config_dir / "hooks"
    (hooks / "hookutil.py").write_text('TAG = "(branch hook)"\n')
    (hooks / "branch_hook.py").write_text(BRANCH_HOOK)
    (hooks / "branch_hook.py").chmod(0o755)
    settings = json.loads((ex.config_dir / "settings.json").read_text())
    settings["hooks"]["SessionStart"].append(
        {
            "hooks": [
                {"type": "command", "command": f'cd "$CLAUDE_PROJECT_DIR" && python3 {hooks}/branch_hook.py'}
            ]
        }
    )
    if sandbox:
        settings["sandbox"] = {"enabled": True}
    (ex.config_dir / "settings.json").write_text(json.dumps(settings, indent=2))
    return ex


def _hashes(ex: ExampleSetup) -> tuple[str, str]:
    return tree_hash(ex.home), tree_hash(ex.repo)


@pytest.fixture
def namespace_ok() -> None:
    ok, why = namespace_check().ok, namespace_check().reason
    if not ok:
        pytest.skip(f"namespace backend unavailable: {why}")


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(_script()) as server:
        yield server


def _options(sim: SimServer) -> BackendOptions:
    """The sessions' environment. The attack's /tmp file is this test's own (ISO_TMP): the links backend
    shares the real /tmp, and a fixed name there was written and removed by tests running in parallel."""
    base_env = {
        "PATH": os.environ["PATH"],
        "SHELL": "/bin/bash",
        "ANTHROPIC_BASE_URL": sim.base_url,
        "ANTHROPIC_API_KEY": "sk-test",
    }
    iso_tmp = f"/tmp/ablate-iso-attack-{uuid.uuid4().hex[:12]}"
    return BackendOptions(base_env=base_env, extra_env={"ISO_TMP": iso_tmp})


def _session(backend: NamespaceEnvironments, env: NamespaceCellEnv, claude: Path, prompt: str) -> Path:
    sid = str(uuid.uuid4())
    argv = claude_argv(claude, prompt=prompt, model=MODEL, session_id=sid, max_turns=3)
    res = run_process(backend.command(env, argv), cwd=env.cwd, env=env.env, timeout=120)
    assert res.returncode == 0, res.stderr_tail
    found: list[Path] = sorted(env.config_dir.glob(f"projects/*/{sid}.jsonl"))
    assert found, f"no transcript for {prompt}"
    return found[0]


def test_namespace_adversarial_session_changes_nothing_and_leaves_nothing_behind(
    namespace_ok: None, claude: Path, sim: SimServer, tmp_path: Path
) -> None:
    ex = _adversarial_example(tmp_path / "ex")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog)
    before = _hashes(ex)
    listing = tree_listing(ex.home), tree_listing(ex.repo)
    options = _options(sim)
    backend = NamespaceEnvironments(setup, catalog, tmp_path / "work", options)
    env = backend.build(cells.get("C7"), 0)  # strips docs/runbooks
    try:
        attack = _session(backend, env, claude, "ISO-ATTACK")
        said = tool_output(attack)
        assert "ATTACK-DONE" in said and "# Deploy runbook" in said, said
        assert git_history_reads(attack, backend.stripped_paths(env)) == [STRIPPED_FLAG]
        writes = backend.after_session(env)
        outside = writes["outside_cell"]
        assert {"~/.toolchain", "~/.gitconfig", "~/.config"} <= {k for k in outside["home"]["by_folder"]}, (
            outside
        )
        assert {
            "~/.claude/skills/release-notes",
            "~/.claude/agents/doc-summarizer.md",
            "~/.claude/hooks/__pycache__",
        } <= set(outside["config"]["by_folder"]), outside["config"]
        assert outside["tmp"]["by_folder"] == {options.extra_env["ISO_TMP"]: 1}
        assert (
            writes["areas"]["objects"]["files"] >= 2
        )  # the commit and the planted file, never the user's store
        lines = writes_lines([writes], 1)
        assert "1 of 1 sessions wrote ~/.toolchain (1 file in all) — discarded" in lines, lines
        assert (tree_listing(ex.home), tree_listing(ex.repo)) == listing
        assert _hashes(ex) == before

        # the next item, in another cell on the same slot, sees none of it; the branch is the user's
        backend.retarget(env, cells.get("C0"))
        check = tool_output(_session(backend, env, claude, "ISO-CHECK"))
        assert "cfg=[] hook=[] x=[] gl=[] skill=[0] head=[Add project knowledge] tmp=[]" in check, check
        assert "branch=[main] status=[?? docs/runbooks/rollback.md]" in check, check  # as in the user's repo
        assert "runbooks=[deploy.md rollback.md ]" in check, check
        # and a stripped layer leaves no trace in git status: C7's reads exactly like C0's
        backend.retarget(env, cells.get("C7"))
        check7 = tool_output(_session(backend, env, claude, "ISO-CHECK"))
        assert "branch=[main] status=[] runbooks=[]" in check7, check7
    finally:
        backend.teardown(env)
        backend.close()
    assert _hashes(ex) == before
    assert not (tmp_path / "work" / "s00").exists() and not (tmp_path / "work" / "ns-shared").exists()


def test_namespace_probe_is_exact_with_sandbox_and_a_branch_hook(
    namespace_ok: None, claude: Path, tmp_path: Path
) -> None:
    ex = _adversarial_example(tmp_path / "ex", sandbox=True)
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    before = _hashes(ex)
    work = tmp_path / "probe"
    result = probe(
        setup,
        catalog,
        load_cell_set("layered", catalog),
        find_claude(claude),
        work=work,
        cell_ids=["C0", "C7"],
        isolation="namespace",
    )
    assert result.isolation["backend"] == "namespace"
    assert result.fidelity["exact"] and result.fidelity["equal"], result.fidelity["differences"]
    assert result.real_setup_unchanged
    assert {c.id: c.verdict for c in result.cells} == {"C0": "faithful", "C7": "faithful"}
    texts = [json.dumps(r.body) for r in iter_requests(work / "requests.jsonl") if r.is_messages]
    assert any("hook-branch=[main] (branch hook)" in t for t in texts)
    assert not any("hook-branch=[]" in t for t in texts)
    assert _hashes(ex) == before


def test_links_protects_what_it_can_and_reports_what_it_cannot(
    claude: Path, sim: SimServer, tmp_path: Path
) -> None:
    """links: small read-only trees are copies, the checkout's git config and hooks are restored, bytecode is
    not written; the home's linked ``.toolchain`` (rewritten by ``.bashrc``) and the user's object store
    (written through the clone's alternates path) cannot be protected, and the run's guard names them."""
    ex = _adversarial_example(tmp_path / "ex")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog)
    options = _options(sim)
    before = guard.take(ex.config_dir, ex.repo, ex.home, skip=(tmp_path / "work",))
    backend = LinksEnvironments(setup, catalog, tmp_path / "work", options)
    env = backend.build(cells.get("C7"), 0)
    try:
        attack = _links_session(env, claude, "ISO-ATTACK")
        assert "ATTACK-DONE" in tool_output(attack)
        assert git_history_reads(attack, backend.stripped_paths(env)) == [STRIPPED_FLAG]
        changed = guard.changes(before)
        shim = f"{ex.home}/.toolchain/shim (changed)"
        objects = f"{ex.repo}/.git/objects/attack-through-alternates (added)"
        assert shim in changed and objects in changed, changed
        # everything else stayed out of the real files
        assert not [c for c in changed if c not in (shim, objects)], changed
        backend.reset(env)
        check = tool_output(_links_session(env, claude, "ISO-CHECK"))
        assert "cfg=[] hook=[] x=[] gl=[] skill=[0] head=[Add project knowledge]" in check, check
        # links cannot make /tmp private (only TMPDIR): the README says so
        assert "tmp=[ATTACK]" in check, check
        assert "branch=[main] status=[] runbooks=[]" in check, check
    finally:
        backend.teardown(env)
        Path(options.extra_env["ISO_TMP"]).unlink(missing_ok=True)


def _links_session(env: Any, claude: Path, prompt: str) -> Path:
    sid = str(uuid.uuid4())
    argv = claude_argv(claude, prompt=prompt, model=MODEL, session_id=sid, max_turns=3)
    res = run_process(argv, cwd=env.cwd, env=env.env, timeout=120)
    assert res.returncode == 0, res.stderr_tail
    found: list[Path] = sorted(env.config_dir.glob(f"projects/*/{sid}.jsonl"))
    assert found, f"no transcript for {prompt}"
    return found[0]


#: Whether the session's /tmp shows the mount point the ``user-tmp-mount`` case made below the host's.
SEES_BELOW = "ls -d /tmp/ablate-below-* >/dev/null 2>&1 && echo sees-below || echo no-below"
READ_VERSION = {
    "default": {"text": "OK."},
    "rules": [
        {
            "name": "read",
            "where": "prompt",
            "contains": ["release notes"],
            "turn": 0,
            "tool_use": [
                {
                    "name": "Bash",
                    "input": {"command": "cat VERSION; echo notes > RELEASE_NOTES.md; " + SEES_BELOW},
                }
            ],
        },
        {
            "name": "done",
            "where": "prompt",
            "contains": ["release notes"],
            "turn": {"min": 1},
            "text": "done",
        },
    ],
}


def cli_under_tmp(claude: Path, request: pytest.FixtureRequest) -> Path:
    """The pinned CLI at a new path under ``/tmp``, readable by every user: a hard link (a copy across file
    systems), removed after the test."""
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="ablate-cli-"))
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    folder.chmod(0o755)
    path = folder / "claude"
    try:
        os.link(os.path.realpath(claude), path)
    except OSError:
        shutil.copy2(claude, path)
    return path


@pytest.mark.parametrize("who", ["self", "user", "user-tmp-mount"])
def test_namespace_run_seeds_and_grades_the_sessions_view_never_the_real_repo(
    who: str, namespace_ok: None, claude: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`ablate run` with a task that has seed files and checks: in `namespace` the seeds reach the session
    (which reads VERSION back) and the checks grade its view, while the real repository stays byte-identical
    (ablate writes seeds into the session's view, never at the real repo path). ``user``: the same run by an
    ordinary user (ablate installed for it), whose view lives only in a holding process's namespace, so the
    seeding and the grading (git included) go through that process. ``user-tmp-mount``: the same with a file
    system mounted below the host's ``/tmp`` (as an AppImage mounts itself at ``/tmp/.mount_*``), which a user
    namespace cannot show through an overlay: the sessions see an empty ``/tmp`` and every cell says so; the
    mount is made in a mount namespace of the test's own, so no other test sees it."""
    import subprocess

    user: User | None = None
    ablate_bin = Path(ABLATE)
    base = tmp_path
    below: Path | None = None
    if who.startswith("user"):
        if os.geteuid() != 0:
            pytest.skip("the tests run as an ordinary user: the `self` case is that case")
        user = request.getfixturevalue("ordinary_user")
        ablate_bin = request.getfixturevalue("installed") / "ablate"
        base = world_readable_dir("ablate-grade-")
        request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    ex = materialise_example(base / "ex")
    if user is not None:
        user.own(base)
    before = _hashes(ex)
    listing = tree_listing(ex.home), tree_listing(ex.repo)
    task = Path(__file__).resolve().parent.parent / "tasks" / "release-notes.toml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
    env["ABLATE_PROBE"] = "0"  # no probe-first step: one CLI start per cell, not under test here
    env.update(HOME=str(ex.home), ABLATE_CLAUDE_BIN=str(claude), ANTHROPIC_API_KEY="sk-test")
    env.update(ABLATE_REPORT="none", ABLATE_CACHE_DIR=str(base / "cache"))
    # NOT a session write: ablate's own report step imports matplotlib, which writes ~/.cache/matplotlib and
    # ~/.config/matplotlib into HOME unless MPLCONFIGDIR is set (ablate/report/plots.py; reported, not fixed
    # here). This test is about what sessions and seeding do.
    env["MPLCONFIGDIR"] = str(base / "mpl")
    argv = [str(ablate_bin), "run", "--tasks", str(task), "--cells", "binary", "--max-turns", "3"]
    argv += [
        "--out",
        str(base / "runs"),
        "--work-dir",
        str(base / "envs"),
        "--config-dir",
        str(ex.config_dir),
    ]
    argv += ["--repo", str(ex.repo), "--isolation", "namespace", "--json"]
    command = user.argv(argv) if user else argv
    if who == "user-tmp-mount":
        del env["ABLATE_PROBE"]  # the probe's untouched view shows the same empty /tmp as C0: it is faithful
        # the CLI installed under the host's /tmp, as `make` does in a fresh clone there: the emptied /tmp of
        # the views (the probe's untouched one too) must still show its folder
        env["ABLATE_CLAUDE_BIN"] = str(cli_under_tmp(claude, request))
        below = Path(f"/tmp/ablate-below-{uuid.uuid4().hex[:8]}")
        below.mkdir()
        request.addfinalizer(below.rmdir)
        mount = 'mount -t tmpfs ablate-below "$0" && exec "$@"'
        command = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            mount,
            str(below),
            *command,
        ]
    with SimServer(script_from_data(READ_VERSION)) as sim:
        proc = subprocess.run(
            command,
            env={**env, "ANTHROPIC_BASE_URL": sim.base_url},
            capture_output=True,
            text=True,
            timeout=600,
            cwd=base,
        )
    assert proc.returncode == 0, why(proc.stderr[-3000:], items_said(base / "runs"))
    (folder,) = list((base / "runs").iterdir())
    manifest = orjson.loads((folder / "manifest.json").read_bytes())
    assert manifest["isolation"]["backend"] == "namespace"
    mode = "user-namespace" if user is not None or os.geteuid() != 0 else "root"
    assert manifest["isolation"]["mode"] == mode
    probed = orjson.loads((folder / "probe.json").read_bytes())
    assert probed["ok"] is (True if below else None), probed  # the untouched view's /tmp is C0's
    empty = [[n for n in c["notes"] if n.startswith("/tmp shown empty")] for c in manifest["cells"]]
    assert empty == [[tmp_note([str(below)])] if below else []] * 2, empty
    results = [orjson.loads(p.read_bytes()) for p in sorted((folder / "results").glob("*.json"))]
    assert len(results) == 2
    said = {}  # what each session's tools printed, and what ablate saw it write: said when a check fails
    for r in results:
        said[r["item"]] = (tool_output(folder / r["transcript"]), r["writes"], r.get("error"))
        assert "1.4.0" in said[r["item"]][0], r["item"]  # the seed reached the session's view
        if below is not None:  # the host's /tmp (which holds the mount point) was not shown
            assert "no-below" in said[r["item"]][0], said[r["item"]][0]
        assert r["flags"] == [] and r["writes"]["discarded"] is True
    grades = [orjson.loads(p.read_bytes()) for p in sorted((folder / "grades").glob("*.json"))]
    assert len(grades) == 2, grades
    for g in grades:  # the checks graded the session's view: its own write, the seeds as seeded
        checks = g["checks"]["1"]
        assert checks["diff_error"] is None, checks
        assert checks["changed"] == ["RELEASE_NOTES.md"], why(checks, said, proc.stderr[-2000:])
        assert [c["passed"] for c in checks["results"][:3]] == [True, True, True], checks
        # the session's file was read (not found absent at the host's empty mount point): it has no "greet"
        assert checks["results"][3]["detail"] == "does not contain 'greet'", checks
        patch = (folder / checks["diff"]).read_text(encoding="utf-8")
        assert "+++ b/RELEASE_NOTES.md" in patch and "+notes" in patch, patch
    after = tree_listing(ex.home), tree_listing(ex.repo)
    assert after == listing, sorted(k for k in after[0] if listing[0].get(k) != after[0][k])
    assert _hashes(ex) == before
    assert not (ex.repo / "VERSION").exists() and not (ex.repo / "RELEASE_NOTES.md").exists()

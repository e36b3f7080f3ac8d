"""The environment builder on the bundled example setup: strip operations, copy-vs-link policy, shadow home,
process env, repo overlay, refusals, reset and teardown (docs/ARCHITECTURE.md#environments)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ablate.core.errors import AblateError, OutputExists, UnsafeEnvironment, UsageError
from ablate.core.fsutil import tree_hash, tree_listing
from ablate.isolate.environment import (
    CellEnvironment,
    build_environment,
    clean,
    process_env,
    redacted_env,
    reset_environment,
    retarget_environment,
    teardown_environment,
)
from ablate.isolate.shadow_home import STATE_COPY_LIMIT, WRITTEN_DIRS
from ablate.isolate.worktree import refs_of
from ablate.setup.cells import CellSet, ResolvedCell, load_cell_set
from ablate.setup.examples import ExampleSetup, git, materialise_example
from ablate.setup.layers import Catalog, load_catalog
from ablate.setup.load import Setup, load_setup, resolve_layers

BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "ANTHROPIC_API_KEY": "sk-test-secret"}


def canary(layer_id: str) -> str:
    """The distinctive line prefix the example setup plants in each layer."""
    return f"ablate-example {layer_id} "


@pytest.fixture
def example(tmp_path: Path) -> ExampleSetup:
    return materialise_example(tmp_path / "ex")


@pytest.fixture
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def layered(catalog: Catalog) -> CellSet:
    return load_cell_set("layered", catalog)


def setup_of(example: ExampleSetup) -> Setup:
    return load_setup(example.config_dir, example.repo, home=example.home)


def build(
    example: ExampleSetup, catalog: Catalog, cell: ResolvedCell, out: Path, **kw: object
) -> CellEnvironment:
    kw.setdefault("base_env", BASE_ENV)
    return build_environment(setup_of(example), catalog, cell, out, **kw)  # type: ignore[arg-type]


def tree_text(root: Path) -> str:
    """Every regular file's text under ``root`` (links followed), for canary checks."""
    parts = []
    for dirpath, _dirs, files in os.walk(root, followlinks=True):
        if ".git" in Path(dirpath).parts:
            continue
        for f in files:
            p = Path(dirpath) / f
            if p.is_file() and p.name != ".git":
                parts.append(p.read_text(errors="replace"))
    return "\n".join(parts)


def snapshot(example: ExampleSetup) -> tuple[str, str]:
    return tree_hash(example.home), tree_hash(example.repo)


# ---------------------------------------------------------------------------------------------------------
# Every classic cell, and the safety invariant


def test_layered_cells_differ_in_exactly_their_layer_and_leave_the_user_untouched(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    setup = setup_of(example)
    before = snapshot(example)
    real = {lid: lf.fingerprint for lid, lf in resolve_layers(setup, catalog).items()}
    out = tmp_path / "out"
    envs = [build(example, catalog, cell, out) for cell in layered.cells]
    assert [e.root.name for e in envs] == [f"c{i:02d}" for i in range(12)]
    assert len({len(str(e.config_dir)) for e in envs}) == 1  # equal-length paths reach the prompt
    control = envs[0]
    assert control.fingerprints == real  # C0 holds exactly the user's layers
    for env in envs[1:11]:
        (stripped,) = env.cell.stripped
        changed = {lid for lid in real if env.fingerprints[lid] != control.fingerprints[lid]}
        assert changed == {stripped}, env.cell.id
        text = tree_text(env.config_dir) + tree_text(env.cwd)
        assert canary(stripped) not in text or stripped == "user-claude-md"
        for other in ("axioms", "lessons", "skills", "auto-memory", "runbooks", "repo-memory", "findings"):
            if other != stripped:
                assert canary(other) in text, (env.cell.id, other)
    c1 = envs[1]
    assert (c1.config_dir / "CLAUDE.md").read_bytes() == b""  # stub
    assert (c1.config_dir / "axioms.md").is_file()  # imported files stay: the stub drops the import
    c11 = envs[11]
    assert {k for k, v in c11.fingerprints.items() if v} == {"repo-claude-md"}
    assert sorted(p.name for p in c11.config_dir.iterdir()) == sorted(
        {d for d in WRITTEN_DIRS if "/" not in d} | {".claude.json", ".credentials.json"}
    )
    assert not (c11.cwd / "MEMORY.md").exists() and not (c11.cwd / "docs" / "runbooks").exists()
    assert (c11.cwd / "CLAUDE.md").is_file()  # repo CLAUDE.md is not in the layered universe
    for env in envs:
        teardown_environment(env)
    assert snapshot(example) == before
    assert git(example.repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(example.repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert not (example.repo / ".git" / "worktrees").exists() or not any(
        (example.repo / ".git" / "worktrees").iterdir()
    )
    assert list(out.iterdir()) == []


def test_environment_json_is_written_and_secret_free(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    env = build(example, catalog, layered.get("C4"), tmp_path / "out")
    data = json.loads((env.root / "environment.json").read_text())
    assert data["cell"]["id"] == "C4" and data["cwd"] == str(env.cwd)
    assert data["env"]["ANTHROPIC_API_KEY"] == "***"
    assert "sk-test-secret" not in (env.root / "environment.json").read_text()
    assert data["fingerprints"]["skills"] == ""
    teardown_environment(env)


# ---------------------------------------------------------------------------------------------------------
# Strip operations, C11, leave-one-in, replace


def test_drop_key_hooks_and_mcp(example: ExampleSetup, catalog: Catalog, tmp_path: Path) -> None:
    account = json.loads((example.home / ".claude.json").read_text())
    account["mcpServers"] = {"db": {"command": "npx", "args": ["db-server"]}}
    (example.home / ".claude.json").write_text(json.dumps(account))
    settings = json.loads((example.config_dir / "settings.json").read_text())
    settings["mcpServers"] = {"web": {"command": "web"}}
    (example.config_dir / "settings.json").write_text(json.dumps(settings))
    extended = load_cell_set("extended", catalog)
    out = tmp_path / "out"
    c0 = build(example, catalog, extended.get("C0"), out)
    hooks = build(example, catalog, extended.get("C12"), out)
    mcp = build(example, catalog, extended.get("C13"), out)
    assert "mcpServers" in json.loads((c0.config_dir / ".claude.json").read_text())
    hs = json.loads((hooks.config_dir / "settings.json").read_text())
    assert "hooks" not in hs and "permissions" in hs and "env" in hs
    # scripts stay (copied: a small read-only tree), never called
    assert (hooks.config_dir / "hooks" / "session_start.py").is_file()
    assert not (hooks.config_dir / "hooks" / "session_start.py").is_symlink()
    ms = json.loads((mcp.config_dir / "settings.json").read_text())
    assert "mcpServers" not in ms and "hooks" in ms
    acc = json.loads((mcp.config_dir / ".claude.json").read_text())
    assert "mcpServers" not in acc and acc["numStartups"] == 42
    assert hooks.fingerprints["hooks"] == "" and mcp.fingerprints["mcp"] == "" and c0.fingerprints["mcp"]
    c11 = build(example, catalog, extended.get("C11"), out)
    assert "mcpServers" not in json.loads((c11.config_dir / ".claude.json").read_text())
    assert not (c11.config_dir / "settings.json").exists()
    for env in (c0, hooks, mcp, c11):
        teardown_environment(env)


def test_leave_one_in_keeps_only_that_layer(example: ExampleSetup, catalog: Catalog, tmp_path: Path) -> None:
    loi = load_cell_set("leave-one-in", catalog)
    out = tmp_path / "out"
    k1 = build(example, catalog, loi.get("K1"), out)
    assert canary("user-claude-md") in (k1.config_dir / "CLAUDE.md").read_text()
    assert not (k1.config_dir / "axioms.md").exists() and not (k1.config_dir / "skills").exists()
    k4 = build(example, catalog, loi.get("K4"), out)
    assert (k4.config_dir / "skills" / "release-notes" / "SKILL.md").is_file()
    assert (k4.config_dir / "plugins" / "known_marketplaces.json").is_file()
    assert not (k4.config_dir / "CLAUDE.md").exists() and not (k4.config_dir / "commands").exists()
    k5 = build(example, catalog, loi.get("K5"), out)
    memory = k5.config_dir / "projects" / k5.memory_slug / "memory" / "MEMORY.md"
    assert canary("auto-memory") in memory.read_text() and not memory.is_symlink()
    k6 = build(example, catalog, loi.get("K6"), out)
    assert (k6.cwd / "MEMORY.md").is_file() and not (k6.cwd / "docs" / "runbooks").exists()
    assert set(k6.fingerprints) == set(k1.fingerprints)
    assert {k for k, v in k6.fingerprints.items() if v} == {"repo-memory", "repo-claude-md"}
    for env in (k1, k4, k5, k6):
        teardown_environment(env)


def test_keep_a_settings_key_and_replace_a_file(
    example: ExampleSetup, catalog: Catalog, tmp_path: Path
) -> None:
    variant = tmp_path / "cells" / "claude-v2.md"
    variant.parent.mkdir()
    variant.write_text("# Version two (fp: variant-v2)\n@axioms.md\n")
    (tmp_path / "cells" / "mine.toml").write_text(
        'name = "mine"\n'
        '[[cell]]\nid = "C0"\n'
        '[[cell]]\nid = "Kh"\nstrip = "all"\nkeep = ["hooks"]\n'
        '[[cell]]\nid = "V2"\nreplace = { user-claude-md = "claude-v2.md" }\n'
    )
    cells = load_cell_set(tmp_path / "cells" / "mine.toml", catalog)
    out = tmp_path / "out"
    kh = build(example, catalog, cells.get("Kh"), out)
    assert set(json.loads((kh.config_dir / "settings.json").read_text())) == {"hooks"}
    v2 = build(example, catalog, cells.get("V2"), out)
    assert (v2.config_dir / "CLAUDE.md").read_text() == variant.read_text()
    assert not (v2.config_dir / "CLAUDE.md").is_symlink()
    assert (example.config_dir / "CLAUDE.md").read_text() != variant.read_text()
    for env in (kh, v2):
        teardown_environment(env)


# ---------------------------------------------------------------------------------------------------------
# Copy versus link, rewrites, leaks, shadow home


def test_copy_link_policy(example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path) -> None:
    env = build(example, catalog, layered.get("C0"), tmp_path / "out")
    cfg = env.config_dir
    real_root = os.path.realpath(env.root)
    for rel in WRITTEN_DIRS:  # no link on any CLI-written path, and every one starts empty
        path = cfg / rel
        assert path.is_dir() and os.path.realpath(path) == str(path), rel
        if rel != "projects":
            assert list(path.iterdir()) == [], rel
    for dirpath, dirnames, filenames in os.walk(
        cfg
    ):  # every link is a read-only tree entry or the credentials
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                rel = p.relative_to(cfg).as_posix()
                top = rel.split("/")[0]
                assert rel == ".credentials.json" or top in {
                    "skills",
                    "agents",
                    "commands",
                    "hooks",
                    "plugins",
                }
                assert not any(rel.startswith(w + "/") or rel == w for w in WRITTEN_DIRS), rel
            else:
                assert os.path.realpath(p).startswith(real_root), p
    for name in (
        "CLAUDE.md",
        "axioms.md",
        "lessons.md",
        "settings.json",
        "rules/python.md",
        "data/sessions.log",
    ):
        assert (cfg / name).is_file() and not (cfg / name).is_symlink(), name
    assert (cfg / "skills").is_dir() and not (cfg / "skills").is_symlink()
    assert sorted(p.name for p in (cfg / "skills").iterdir()) == ["bug-triage", "release-notes"]
    # small read-only trees are copies: a session's append to a SKILL.md never reaches the real one
    assert not any(p.is_symlink() for p in (cfg / "skills").rglob("*"))
    # the login is a copy: a session's write reaches the real file only as a checked refresh
    assert not (cfg / ".credentials.json").is_symlink()
    assert (cfg / ".credentials.json").read_bytes() == (example.config_dir / ".credentials.json").read_bytes()
    assert stat.S_IMODE((cfg / ".credentials.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((cfg / ".claude.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((env.home / ".claude.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o700 and stat.S_IMODE(env.home.stat().st_mode) == 0o700
    history = list((cfg / "projects").rglob("*.jsonl"))
    assert history == []  # transcripts are never copied
    teardown_environment(env)


def test_settings_paths_rewritten_and_hardcoded_hook_path_reported(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    legacy = example.config_dir / "hooks" / "legacy.py"
    legacy.write_text(f"open('{example.config_dir}/data/legacy.log', 'a').write('x')\n")
    env = build(example, catalog, layered.get("C0"), tmp_path / "out")
    text = (env.config_dir / "settings.json").read_text()
    assert str(example.config_dir) not in text
    settings = json.loads(text)
    assert settings["env"]["PYTHONPATH"] == f"{env.config_dir}/hooks"
    post = settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    assert post == f"python3 {env.config_dir}/hooks/post_tool.py"
    leaks = [leak for leak in env.leaks if leak.kind == "hardcoded-config-path"]
    assert [leak.path for leak in leaks] == [str(legacy)]
    assert any("rewrote 2 occurrence" in n for n in env.notes)
    assert env.fingerprints["hooks"] == resolve_layers(setup_of(example), catalog)["hooks"].fingerprint
    teardown_environment(env)


def test_shadow_home_links_every_other_entry(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    (example.home / ".bashrc").write_text("export X=1\n")
    (example.home / ".cache").mkdir()
    env = build(example, catalog, layered.get("C0"), tmp_path / "out")
    assert os.readlink(env.home / ".bashrc") == str(example.home / ".bashrc")
    assert os.readlink(env.home / ".cache") == str(example.home / ".cache")
    assert not (env.home / ".claude").is_symlink() and not (env.home / ".claude.json").is_symlink()
    assert env.env["HOME"] == str(env.home) and env.env["CLAUDE_CONFIG_DIR"] == str(env.config_dir)
    assert any(leak.kind == "bashrc" for leak in env.leaks)
    teardown_environment(env)


def test_large_state_is_linked_as_shared_unless_isolated(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    logs = example.config_dir / "logs"
    logs.mkdir()
    with (logs / "big.log").open("wb") as fh:
        fh.truncate(STATE_COPY_LIMIT + 1)  # sparse: big by size, cheap on disk
    shared = build(example, catalog, layered.get("C0"), tmp_path / "out")
    assert os.readlink(shared.config_dir / "logs") == str(logs)
    assert any(n.startswith("logs:") and "shared state" in n for n in shared.notes)
    assert not (shared.config_dir / "data").is_symlink()  # small state is copied
    isolated = build(example, catalog, layered.get("C1"), tmp_path / "out", isolate_state=True)
    assert (isolated.config_dir / "logs").is_dir() and not (isolated.config_dir / "logs").is_symlink()
    for env in (shared, isolated):
        teardown_environment(env)


def test_process_env_allow_list() -> None:
    base = {
        **BASE_ENV,
        "CLAUDE_CODE_SIMPLE": "1",
        "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
        "ANTHROPIC_MODEL": "claude-opus-5-5",
        "CLAUDE_CONFIG_DIR": "/real/.claude",
        "HOME": "/root",
        "PYTHONPATH": "/x",
        "LC_ALL": "C",
        "AWS_REGION": "eu-west-1",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "HTTPS_PROXY": "http://user:pw@proxy:3128",
        "TMPDIR": "/var/tmp/mine",  # read-only in a view: the session gets the folder ablate names
    }
    env = process_env(base, home=Path("/c/home"), config_dir=Path("/c/home/.claude"), tmpdir="/c/tmp")
    assert env == {
        "ANTHROPIC_API_KEY": "sk-test-secret",
        "AWS_REGION": "eu-west-1",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "CLAUDE_CODE_MAX_RETRIES": "2",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "CLAUDE_CONFIG_DIR": "/c/home/.claude",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "HOME": "/c/home",
        "HTTPS_PROXY": "http://user:pw@proxy:3128",
        "IS_SANDBOX": "1",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "PATH": "/usr/bin:/bin",
        "TMPDIR": "/c/tmp",
    }
    red = redacted_env(env)
    assert red["ANTHROPIC_API_KEY"] == "***" and red["AWS_SECRET_ACCESS_KEY"] == "***"
    assert red["HTTPS_PROXY"] == "http://***@proxy:3128" and red["PATH"] == "/usr/bin:/bin"
    pinned = process_env(
        base,
        home=Path("/h"),
        config_dir=Path("/h/.claude"),
        tmpdir="/tmp",
        extra_env={"CLAUDE_CODE_MAX_RETRIES": "0"},
    )
    assert pinned["CLAUDE_CODE_MAX_RETRIES"] == "0"
    with pytest.raises(UsageError, match="HOME"):
        process_env(
            base, home=Path("/h"), config_dir=Path("/h/.claude"), tmpdir="/tmp", extra_env={"HOME": "/root"}
        )


# ---------------------------------------------------------------------------------------------------------
# Repo side


def test_ignored_and_untracked_layer_files_are_overlaid(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    env = build(example, catalog, layered.get("C0"), tmp_path / "out")
    assert (env.cwd / "MEMORY.md").read_text() == (example.repo / "MEMORY.md").read_text()  # git-ignored
    assert (env.cwd / "docs/runbooks/rollback.md").read_text() == (
        example.repo / "docs/runbooks/rollback.md"
    ).read_text()
    assert git(env.cwd, "rev-parse", "HEAD").strip() == git(example.repo, "rev-parse", "HEAD").strip()
    # on the user's branch (hooks print it), and git status reads as in the user's repo (the control hides
    # nothing)
    assert git(env.cwd, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert git(env.cwd, "status", "--porcelain") == git(example.repo, "status", "--porcelain")
    assert git(env.cwd, "status", "--porcelain").strip() == "?? docs/runbooks/rollback.md"
    c7 = build(example, catalog, layered.get("C7"), tmp_path / "out")
    assert not (c7.cwd / "docs/runbooks").exists()
    assert git(c7.cwd, "status", "--porcelain").strip() == ""  # the stripped runbooks leave no trace
    (c7.cwd / "scratch.txt").write_text("x\n")
    c7_reset = git(c7.cwd, "status", "--porcelain").strip()
    assert c7_reset == "?? scratch.txt"
    reset_environment(c7)
    assert git(c7.cwd, "status", "--porcelain").strip() == ""
    assert git(c7.cwd, "symbolic-ref", "--short", "HEAD").strip() == "main"
    teardown_environment(env)
    teardown_environment(c7)


def test_dirty_repo_refused_unless_dirty(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    (example.repo / "app.py").write_text((example.repo / "app.py").read_text() + "\n# wip\n")
    (example.repo / "notes with space.txt").write_text("scratch\n")
    (example.repo / "docs/runbooks/deploy.md").write_text("# edited runbook (a layer file: never dirty)\n")
    before = snapshot(example)
    with pytest.raises(UsageError, match=r"app\.py.*notes with space\.txt") as err:
        build(example, catalog, layered.get("C0"), tmp_path / "out")
    assert "--dirty" in str(err.value) and "deploy.md" not in err.value.message
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    env = build(example, catalog, layered.get("C0"), tmp_path / "out", dirty=True)
    assert (env.cwd / "app.py").read_text().endswith("# wip\n")
    assert (env.cwd / "notes with space.txt").is_file()
    assert (env.cwd / "docs/runbooks/deploy.md").read_text().startswith("# edited runbook")
    assert env.dirty and any("--dirty" in n for n in env.notes)
    teardown_environment(env)
    assert snapshot(example) == before


def test_ancestor_claude_md_refused_or_recorded(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "CLAUDE.md").write_text("# leaks into every cell\n")
    with pytest.raises(UnsafeEnvironment, match=r"CLAUDE\.md"):
        build(example, catalog, layered.get("C0"), parent / "out")
    assert not (parent / "out" / "c00").exists()
    env = build(example, catalog, layered.get("C0"), parent / "out", record_ancestor_leaks=True)
    assert [leak.path for leak in env.leaks if leak.kind == "ancestor-file"] == [str(parent / "CLAUDE.md")]
    teardown_environment(env)


# ---------------------------------------------------------------------------------------------------------
# Bad inputs


def test_existing_output_folder(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    (tmp_path / "out" / "c00").mkdir(parents=True)
    with pytest.raises(OutputExists):
        build(example, catalog, layered.get("C0"), tmp_path / "out")


def test_symlink_loop_in_config_dir(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    (example.config_dir / "skills" / "release-notes" / "loop").symlink_to(example.config_dir / "skills")
    before = snapshot(example)
    with pytest.raises(UsageError, match="symlink loop"):
        build(example, catalog, layered.get("C0"), tmp_path / "out")
    assert not (tmp_path / "out" / "c00").exists()
    assert snapshot(example) == before


def test_out_inside_the_repo_is_refused(example: ExampleSetup, catalog: Catalog, layered: CellSet) -> None:
    with pytest.raises(UsageError, match="inside the repository"):
        build(example, catalog, layered.get("C0"), example.repo / "out")


def test_paths_with_spaces_and_non_ascii(catalog: Catalog, layered: CellSet, tmp_path: Path) -> None:
    example = materialise_example(tmp_path / "mÿ setup", repo_name="grëeter app")
    before = snapshot(example)
    out = tmp_path / "ôut dir"
    c0 = build(example, catalog, layered.get("C0"), out)
    c5 = build(example, catalog, layered.get("C5"), out)
    assert c0.memory_slug.endswith("-gr-eter-app")
    assert (
        canary("auto-memory")
        in (c0.config_dir / "projects" / c0.memory_slug / "memory" / "MEMORY.md").read_text()
    )
    assert not (c5.config_dir / "projects" / c5.memory_slug).exists() or not any(
        (c5.config_dir / "projects" / c5.memory_slug).iterdir()
    )
    assert str(c0.config_dir) in (c0.config_dir / "settings.json").read_text()
    for env in (c0, c5):
        teardown_environment(env)
    assert snapshot(example) == before


# ---------------------------------------------------------------------------------------------------------
# Reset and clean


def _mess_up(env: CellEnvironment) -> None:
    """What sessions do: transcripts, account writes, hook state, edits, commits, new files everywhere."""
    cfg, wt = env.config_dir, env.cwd
    project = cfg / "projects" / "-some-cwd"
    project.mkdir(parents=True)
    (project / "abc.jsonl").write_text("{}\n")
    (cfg / "projects" / env.memory_slug / "memory").mkdir(parents=True, exist_ok=True)
    (cfg / "projects" / env.memory_slug / "memory" / "MEMORY.md").write_text("model wrote this\n")
    (cfg / ".claude.json").write_text('{"numStartups": 43}')
    (cfg / "backups" / ".claude.json.backup.1").write_text("{}")
    (cfg / "session-env" / "sid").mkdir()
    (cfg / "CLAUDE.md").unlink(missing_ok=True)
    (cfg / "data").mkdir(exist_ok=True)
    (cfg / "data" / "sessions.log").write_text("more\n")
    (cfg / "skills" / "mine").mkdir(parents=True)
    (cfg / "commands" / "standup.md").unlink(missing_ok=True)  # the link, not the real file
    (env.home / "new-top-level").write_text("x")
    ro = cfg / "todos" / "ro"
    ro.mkdir()
    (ro / "f").write_text("x")
    ro.chmod(0o500)
    (wt / "app.py").write_text("broken\n")
    (wt / "MEMORY.md").unlink(missing_ok=True)
    (wt / "docs" / "runbooks").mkdir(parents=True, exist_ok=True)
    (wt / "docs" / "runbooks" / "deploy.md").write_text("edited\n")
    (wt / "scratch.txt").write_text("new\n")
    (wt / "__pycache__").mkdir()
    (wt / "__pycache__" / "x.pyc").write_bytes(b"\0")
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", "model commit")
    git(wt, "branch", "model-branch")
    git(wt, "tag", "model-tag")
    (wt / "README.md").write_text("stashed\n")
    git(wt, "stash", "-q")


def cell_state(env: CellEnvironment) -> tuple[dict[str, str], dict[str, str], dict[str, str], str]:
    """What a session can see of a cell: the home, the checkout's files, its refs and its HEAD.

    (git's own bookkeeping inside .git, such as the index's stat cache or unreachable objects of a reset
    session's commits, is not state a session can tell apart.)"""
    head = git(env.cwd, "rev-parse", "HEAD").strip()
    return tree_listing(env.home), tree_listing(env.cwd, exclude=(".git",)), refs_of(env.cwd), head


def test_reset_restores_a_freshly_built_cell(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    before = snapshot(example)
    repo_before = tree_hash(example.repo)
    out = tmp_path / "out"
    env = build(example, catalog, layered.get("C3"), out)
    fresh = cell_state(env)
    _mess_up(env)
    messed = cell_state(env)
    assert all(m != f for m, f in zip(messed, fresh, strict=True))
    assert "refs/heads/model-branch" in messed[2] and "refs/stash" in messed[2]
    reset_environment(env)
    assert cell_state(env) == fresh
    assert git(env.cwd, "reflog", "--all").strip() == ""  # nothing points back at the last session's work
    reset_environment(env)  # idempotent
    assert cell_state(env) == fresh
    assert tree_hash(env.home) == tree_hash(env.root / ".pristine" / "home")
    # A cell rebuilt from scratch at the same place is identical too.
    teardown_environment(env)
    again = build(example, catalog, layered.get("C3"), out)
    assert cell_state(again) == fresh
    teardown_environment(again)
    # The checkout is a private clone: the model's commit, branch, tag and stash never reached the user's
    # repository, which is byte-identical, .git included.
    assert tree_hash(example.home) == before[0]
    assert tree_hash(example.repo) == repo_before
    assert (example.config_dir / "commands" / "standup.md").is_file()


def test_clean_recovers_from_a_crash(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    before = snapshot(example)
    out = tmp_path / "out"
    a = build(example, catalog, layered.get("C0"), out)
    b = build(example, catalog, layered.get("C7"), out, slot=3)
    assert b.root.name == "c07-s03"
    (b.root / "environment.json").unlink()  # as if the build had crashed half way
    (out / "unrelated").mkdir()
    removed = clean(out)
    assert sorted(removed) == sorted([str(a.root), str(b.root)])
    assert sorted(p.name for p in out.iterdir()) == ["unrelated"]
    assert git(example.repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert clean(out) == []
    assert snapshot(example) == before


def test_build_failure_leaves_nothing(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(example)
    import ablate.isolate.worktree

    def boom(*_a: object, **_k: object) -> None:
        raise AblateError("simulated failure after the worktree was added")

    monkeypatch.setattr(ablate.isolate.worktree, "apply_ops", boom)
    with pytest.raises(AblateError, match="simulated"):
        build(example, catalog, layered.get("C0"), tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []
    assert git(example.repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert snapshot(example) == before


def test_retarget_gives_the_fresh_environment_of_the_new_cell(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    before = snapshot(example)
    repo_before = tree_hash(example.repo)
    setup = load_setup(example.config_dir, example.repo, home=example.home)
    out = tmp_path / "out"
    fresh: dict[str, tuple[dict[str, str], dict[str, str], dict[str, str], str]] = {}
    for cid in ("C7", "C11", "C0", "C1"):
        env = build_environment(
            setup, catalog, layered.get(cid), out, name="s00", base_env={"PATH": "/usr/bin"}
        )
        fresh[cid] = cell_state(env)
        fresh_fp = dict(env.fingerprints)
        teardown_environment(env)
        fresh[cid + "-fp"] = ({}, fresh_fp, {}, "")
    env = build_environment(setup, catalog, layered.get("C3"), out, name="s00", base_env={"PATH": "/usr/bin"})
    for cid in ("C7", "C11", "C0", "C1"):
        _mess_up(env)
        retarget_environment(env, setup, catalog, layered.get(cid))
        assert env.cell.id == cid
        assert cell_state(env) == fresh[cid], cid
        assert env.fingerprints == fresh[cid + "-fp"][1], cid
        reset_environment(env)  # a reset after a retarget returns to the new cell, not the old one
        assert cell_state(env) == fresh[cid], cid
    teardown_environment(env)
    assert snapshot(example) == before
    assert tree_hash(example.repo) == repo_before

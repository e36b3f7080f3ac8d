"""Link shapes of issue 28 named one by one, without sessions (tests/dotfiles_setup.py holds them, so the
real-CLI probes of tests/test_links_e2e.py cover them too): chains (a relative link to an absolute one, via
``~/.agents`` or via an entry of the config dir itself), a link into a plugin cache, skill folders that are
links inside a linked ``skills`` folder. For each, both backends' copies present exactly what the real path
presents (same listing, same bytes, dangling links dangling at the same place), and stripping removes the
link without writing to or through its target. Sub-agent memory folders belong to the layers of the agents
that read them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ablate.core.fsutil import tree_hash
from ablate.isolate import shadowfs
from ablate.isolate.backend import BackendOptions
from ablate.isolate.environment import build_config_dir
from ablate.isolate.registry import choose_isolation, open_backend
from ablate.isolate.shadowfs import copy_entry
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import ExampleSetup, git, materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup, resolve_layers
from tests.dotfiles_setup import CHAINED_SKILL, PLUGIN_LINK, PLUGIN_STORE, dotfiles_setup, loaded_dotfiles

BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

Presented = dict[str, Any]


def presented(path: Path) -> Presented:
    """What a reader that follows links (the CLI) finds under ``path``: each relative path → ``"dir"``, the
    file's bytes, or ``("dangling", where it points)``."""
    out: Presented = {}

    def walk(p: Path, rel: str) -> None:
        if not p.exists():
            out[rel] = ("dangling", os.path.realpath(p))
        elif p.is_dir():
            out[rel] = "dir"
            for name in sorted(os.listdir(p)):
                walk(p / name, f"{rel}/{name}")
        else:
            out[rel] = p.read_bytes()

    walk(path, ".")
    return out


def links_under(path: Path) -> list[str]:
    """The symlinks below ``path`` (itself included), not followed."""
    found = [str(path)] if path.is_symlink() else []
    if not path.is_symlink():
        for dirpath, dirnames, filenames in os.walk(path):
            found += [str(Path(dirpath, n)) for n in (*dirnames, *filenames) if Path(dirpath, n).is_symlink()]
    return found


@pytest.mark.parametrize("rel", ["skills", PLUGIN_LINK.split("/")[0]])
def test_both_copies_present_what_the_real_path_presents(rel: str, tmp_path: Path) -> None:
    ex = dotfiles_setup(tmp_path / "ex")
    real = ex.config_dir / rel
    want = presented(real)
    before = tree_hash(ex.home)

    copy_entry(real, tmp_path / "links")  # the links backend: a shadow home of copies
    copy_entry(real, tmp_path / "ns", keep_links_outside=ex.config_dir)  # namespace: seen at the real path
    assert presented(tmp_path / "links") == want
    assert presented(tmp_path / "ns") == want
    dangling = [p for p in links_under(tmp_path / "links") if not os.path.exists(p)]
    assert [p for p in links_under(tmp_path / "links") if p not in dangling] == []  # all else materialised
    assert tree_hash(ex.home) == before


def test_each_shape_leads_where_the_cli_reads(tmp_path: Path) -> None:
    ex = dotfiles_setup(tmp_path / "ex")
    home, cfg = ex.home, ex.config_dir
    store = home / ".local" / "share" / "skill-store" / CHAINED_SKILL
    # the chain: skills/release-notes -> ../../.agents/skills/release-notes -> <store> (absolute)
    first = cfg / "skills" / CHAINED_SKILL
    assert os.readlink(first) == os.path.join("..", "..", ".agents", "skills", CHAINED_SKILL)
    assert os.readlink(home / ".agents" / "skills" / CHAINED_SKILL) == str(store)
    assert (first / "SKILL.md").read_bytes() == (store / "SKILL.md").read_bytes()
    before = tree_hash(home)

    # inside the linked skills folder, seen at the real path: a link out stays a link, to where the whole
    # chain ends; the links backend materialises it
    copy_entry(home / "dotfiles" / "skills", tmp_path / "ns", keep_links_outside=cfg)
    assert os.readlink(tmp_path / "ns" / CHAINED_SKILL) == str(store)
    assert os.readlink(tmp_path / "ns" / "bug-triage") == str(home / ".agents" / "skills" / "bug-triage")
    copy_entry(cfg / "skills", tmp_path / "links")
    assert not (tmp_path / "links").is_symlink() and not (tmp_path / "links" / CHAINED_SKILL).is_symlink()
    assert (tmp_path / "links" / CHAINED_SKILL / "SKILL.md").read_bytes() == (store / "SKILL.md").read_bytes()
    # the plugin cache: kept at the real path as a link to the store, materialised for links
    copy_entry(cfg / "plugins", tmp_path / "ns-plugins", keep_links_outside=cfg)
    cached = PLUGIN_LINK.split("/", 1)[1]
    assert os.readlink(tmp_path / "ns-plugins" / cached) == str(home / PLUGIN_STORE)
    copy_entry(cfg / "plugins", tmp_path / "links-plugins")
    assert not (tmp_path / "links-plugins" / cached).is_symlink()
    assert tree_hash(home) == before


@pytest.mark.parametrize("at_real_path", [True, False])
def test_a_cell_keeps_or_strips_every_shape_and_never_writes_a_target(
    at_real_path: bool, tmp_path: Path
) -> None:
    ex, setup, catalog, cells = loaded_dotfiles(tmp_path / "ex")
    before = tree_hash(ex.home)  # the dotfiles, ~/.agents, the skill store and the plugin cache
    built = {}
    for cid in ("C0", "C4"):  # C4 strips skills (skills/, plugins/, marketplaces/)
        built[cid] = tmp_path / cid / ".claude"
        built[cid].parent.mkdir()
        build_config_dir(
            setup,
            catalog,
            cells.get(cid),
            built[cid],
            memory_slug=setup.memory_slug,
            at_real_path=at_real_path,
        )
    for rel in ("skills", "plugins"):
        got = presented(built["C0"] / rel)
        if rel == "plugins":  # plugins/store: a folder the CLI writes, made real and empty in every cell
            assert got.pop("./store") == "dir"
        assert got == presented(ex.config_dir / rel), rel
        assert not os.path.lexists(built["C4"] / rel), rel
    assert presented(built["C4"] / "agents") == presented(ex.config_dir / "agents")  # the rest is kept
    assert tree_hash(ex.home) == before


@pytest.mark.parametrize("at_real_path", [True, False])
def test_a_chain_through_the_config_dir_itself(at_real_path: bool, tmp_path: Path) -> None:
    """``~/.claude/skills/bug-triage -> ../x -> /abs/y``: the link in the middle lives in the config dir
    (an entry no layer claims), the end outside it."""
    ex = materialise_example(tmp_path / "ex")
    end = tmp_path / "abs" / "y"
    end.parent.mkdir()
    shutil.move(str(ex.config_dir / "skills" / "bug-triage"), end)
    (ex.config_dir / "x").symlink_to(end)
    (ex.config_dir / "skills" / "bug-triage").symlink_to(Path("..", "x"))
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog)
    assert "skills/bug-triage/SKILL.md" in resolve_layers(setup, catalog)["skills"].files
    before = tree_hash(end.parent), tree_hash(ex.config_dir)
    for cid in ("C0", "C4"):
        cfg = tmp_path / cid / ".claude"
        cfg.parent.mkdir()
        build_config_dir(
            setup, catalog, cells.get(cid), cfg, memory_slug=setup.memory_slug, at_real_path=at_real_path
        )
        if cid == "C4":
            assert not os.path.lexists(cfg / "skills")
            continue
        assert presented(cfg / "skills") == presented(ex.config_dir / "skills")
        got = cfg / "skills" / "bug-triage"
        # seen at the real path: a link straight to where the chain ends; elsewhere: a copy
        assert (os.readlink(got) == str(end)) if at_real_path else not got.is_symlink()
    assert (tree_hash(end.parent), tree_hash(ex.config_dir)) == before


def test_stripping_inside_a_linked_folder_splits_it_and_never_writes_through(tmp_path: Path) -> None:
    ex = dotfiles_setup(tmp_path / "ex")
    linked = ex.home / "dotfiles" / "skills"
    cell = tmp_path / "cell"
    cell.mkdir()
    copy_entry(ex.config_dir / "skills", cell / "skills", keep_links_outside=ex.config_dir)
    assert (cell / "skills").is_symlink()  # the whole folder, seen at the real path, is the dotfiles' one
    before = tree_hash(ex.home)

    shadowfs.remove(cell, f"skills/{CHAINED_SKILL}")  # one skill cut from the linked folder
    shadowfs.stub(cell, "skills/bug-triage")  # and one stubbed, as the stub strip does
    assert not (cell / "skills").is_symlink() and not os.path.lexists(cell / "skills" / CHAINED_SKILL)
    assert sorted(os.listdir(cell / "skills")) == ["bug-triage", "gone"]
    assert (cell / "skills" / "bug-triage" / "SKILL.md").read_bytes() == b""
    assert (ex.config_dir / "skills" / "bug-triage" / "SKILL.md").read_bytes() != b""
    assert sorted(os.listdir(linked)) == ["bug-triage", "gone", CHAINED_SKILL]
    assert tree_hash(ex.home) == before


# ---------------------------------------------------------------------------------------------------------
# Sub-agent memory (docs/CLAUDE-CODE.md): agent-memory/ goes with the agents, .claude/agent-memory{,-local}/
# with the repository's .claude/


USER_MEMORY = "agent-memory/doc-summarizer/MEMORY.md"
PROJECT_MEMORY = ".claude/agent-memory/reviewer/MEMORY.md"
LOCAL_MEMORY = ".claude/agent-memory-local/reviewer/MEMORY.md"


@pytest.fixture
def with_agent_memory(tmp_path: Path) -> ExampleSetup:
    """The example setup with a user sub-agent's memory in the config dir, and a project sub-agent with
    project memory (committed, as the CLI's docs suggest) and local memory (git-ignored) in the repository."""
    ex = materialise_example(tmp_path / "ex")
    (ex.config_dir / USER_MEMORY).parent.mkdir(parents=True)
    (ex.config_dir / USER_MEMORY).write_text("doc-summarizer remembers: summaries stay under 80 words\n")
    (ex.repo / ".claude" / "agents").mkdir(parents=True)
    (ex.repo / ".claude" / "agents" / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Review a diff\nmemory: project\n---\n\nReview the diff.\n"
    )
    for rel, text in ((PROJECT_MEMORY, "reviewer: tests live in test_app.py\n"), (LOCAL_MEMORY, "mine\n")):
        (ex.repo / rel).parent.mkdir(parents=True)
        (ex.repo / rel).write_text(text)
    ignore = ex.repo / ".gitignore"
    ignore.write_text(ignore.read_text() + ".claude/agent-memory-local/\n")
    # -f: the example's .gitignore ignores MEMORY.md everywhere
    git(ex.repo, "add", "-f", ".gitignore", ".claude/agents", PROJECT_MEMORY)
    git(ex.repo, "commit", "-q", "-m", "a project sub-agent with memory")
    assert git(ex.repo, "ls-files", ".claude").split() == [PROJECT_MEMORY, ".claude/agents/reviewer.md"]
    return ex


def test_agent_memory_is_classified_into_its_layer(with_agent_memory: ExampleSetup) -> None:
    ex = with_agent_memory
    layers = resolve_layers(load_setup(ex.config_dir, ex.repo, home=ex.home), load_catalog())
    owners = {rel: lid for lid, lf in layers.items() for rel in lf.files}
    assert owners[USER_MEMORY] == "agents"
    assert owners[PROJECT_MEMORY] == owners[LOCAL_MEMORY] == "repo-dot-claude"


@pytest.mark.parametrize("at_real_path", [True, False])
def test_user_agent_memory_is_stripped_with_the_agents(
    at_real_path: bool, with_agent_memory: ExampleSetup, tmp_path: Path
) -> None:
    ex = with_agent_memory
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("extended", catalog)  # C15 strips agents
    for cid in ("C0", "C15"):
        cfg = tmp_path / cid / ".claude"
        cfg.parent.mkdir()
        build_config_dir(
            setup, catalog, cells.get(cid), cfg, memory_slug=setup.memory_slug, at_real_path=at_real_path
        )
        kept = cid == "C0"
        assert os.path.lexists(cfg / "agent-memory") is kept, cid
        assert os.path.lexists(cfg / "agents") is kept, cid
        if kept:
            assert (cfg / USER_MEMORY).read_bytes() == (ex.config_dir / USER_MEMORY).read_bytes()
    assert (ex.config_dir / USER_MEMORY).is_file()


@pytest.mark.parametrize("isolation", ["links", "namespace"])
def test_repo_agent_memory_is_stripped_with_the_repos_dot_claude(
    isolation: str, with_agent_memory: ExampleSetup, tmp_path: Path
) -> None:
    if isolation == "namespace" and choose_isolation(None).backend != "namespace":
        pytest.skip("the namespace backend does not work on this machine")
    ex = with_agent_memory
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("extended", catalog)  # C19 strips the repository's .claude/
    live = resolve_layers(setup, catalog)["repo-dot-claude"]
    backend = open_backend(isolation, setup, catalog, tmp_path / "work", BackendOptions(base_env=BASE_ENV))
    try:
        for slot, cid in enumerate(("C0", "C19")):
            env = backend.build(cells.get(cid), slot)
            in_cell = env.checkout_layer(catalog.get("repo-dot-claude"), setup.memory_slug)
            if cid == "C0":  # both memory folders, byte for byte the setup's
                assert in_cell.present and in_cell.fingerprint == live.fingerprint, in_cell.entries
                assert {".claude/agent-memory", ".claude/agent-memory-local"} <= set(in_cell.entries)
            else:
                assert not in_cell.present and in_cell.entries == [], in_cell.entries
            if isolation == "links":  # a checkout of its own: the files themselves
                for rel in (PROJECT_MEMORY, LOCAL_MEMORY):
                    assert (env.cwd / rel).is_file() is (cid == "C0"), (cid, rel)
            assert env.mismatches == {}, env.mismatches
            backend.teardown(env)
    finally:
        backend.close()
    assert (ex.repo / LOCAL_MEMORY).is_file() and (ex.repo / PROJECT_MEMORY).is_file()

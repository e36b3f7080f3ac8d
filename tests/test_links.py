"""Setups installed as links (issue 28), without sessions: the copy, dangling links, loops, unreadable
targets, the config dir above the repository, the build-time fidelity check, the probe's judgement of a cell
that differs from the setup, and id-grouped write lines. More link shapes: tests/test_links_shapes.py; the
same shapes with the real CLI: tests/test_links_e2e.py."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.errors import AblateError, UsageError
from ablate.core.fsutil import tree_hash
from ablate.folder.writes_summary import writes_lines
from ablate.isolate import environment, worktree
from ablate.isolate.backend import BackendOptions
from ablate.isolate.environment import build_cell_config, build_config_dir, build_environment
from ablate.isolate.faithful import setup_prints
from ablate.isolate.procenv import force_capture
from ablate.isolate.registry import choose_isolation, open_backend
from ablate.isolate.shadowfs import copy_entry
from ablate.probe.fingerprints import layer_prints
from ablate.probe.judge import CellProbe, judge_cell
from ablate.probe.observe import PROBE_MODEL, Observation
from ablate.probe.probe import ProbeResult
from ablate.run.execute import refuse_unfaithful_cells
from ablate.setup.layers import load_catalog, resolve_layer, walk_files
from ablate.setup.load import ancestor_leaks, inventory, resolve_layers, selected_output_style
from tests.dotfiles_setup import dotfiles_setup, loaded_dotfiles
from tests.helpers_cli import invoke

BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "ANTHROPIC_API_KEY": "sk-test-secret"}


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """``real/skills`` with a relative link out (to ``agents/x``), one in (to ``real/rules``), an absolute
    link to a file, and a dangling relative link; returns (real, agents)."""
    real, agents = tmp_path / "real", tmp_path / "agents"
    (agents / "x").mkdir(parents=True)
    (agents / "x" / "SKILL.md").write_text("x skill\n")
    (real / "skills").mkdir(parents=True)
    (real / "rules").mkdir()
    (real / "rules" / "r.md").write_text("rule\n")
    (tmp_path / "f.md").write_text("linked file\n")
    (real / "skills" / "x").symlink_to(Path("..", "..", "agents", "x"))
    (real / "skills" / "in").symlink_to(Path("..", "rules"))
    (real / "skills" / "f.md").symlink_to(tmp_path / "f.md")
    (real / "skills" / "gone").symlink_to(Path("..", "..", "agents", "gone"))
    return real, agents


def test_copy_resolves_each_link_against_its_own_folder(tmp_path: Path, monkeypatch: Any) -> None:
    real, agents = _tree(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # copytree tested relative links against the cwd
    before = tree_hash(tmp_path / "agents"), tree_hash(real)

    copy_entry(real / "skills", tmp_path / "links")  # the links backend: materialised
    got = tmp_path / "links"
    assert (got / "x" / "SKILL.md").read_text() == "x skill\n" and not (got / "x").is_symlink()
    assert (got / "in" / "r.md").read_text() == "rule\n" and not (got / "in").is_symlink()
    assert (got / "f.md").read_text() == "linked file\n" and not (got / "f.md").is_symlink()
    assert (got / "gone").is_symlink() and not (got / "gone").exists()
    assert os.readlink(got / "gone") == str(agents / "gone")  # still dangling, wherever the copy lives

    copy_entry(real / "skills", tmp_path / "ns", keep_links_outside=real)  # seen at the real path
    ns = tmp_path / "ns"
    assert os.readlink(ns / "x") == str(agents / "x")  # out of the config dir: kept, absolute
    assert os.readlink(ns / "f.md") == str(tmp_path / "f.md")
    assert not (ns / "in").is_symlink()  # into the config dir: materialised (never the cell itself)
    assert (tree_hash(tmp_path / "agents"), tree_hash(real)) == before


def test_walk_names_dangling_links_and_two_links_to_one_folder_are_no_loop(tmp_path: Path) -> None:
    real, _agents = _tree(tmp_path)
    (real / "skills" / "again").symlink_to(Path("..", "..", "agents", "x"))
    dangling: dict[str, str] = {}
    files = walk_files(real, "skills", dangling=dangling)
    assert "skills/x/SKILL.md" in files and "skills/again/SKILL.md" in files
    assert dangling == {"skills/gone": str(tmp_path / "agents" / "gone")}
    lf = resolve_layer(load_catalog().get("skills"), real, memory_slug="x")
    assert lf.dangling == dangling and "skills/x/SKILL.md" in lf.digests


def test_link_loops_and_unreadable_targets_get_located_messages(tmp_path: Path, monkeypatch: Any) -> None:
    real, _agents = _tree(tmp_path)
    skills = real / "skills"
    (skills / "a").symlink_to("b")
    (skills / "b").symlink_to("a")
    for attempt in (
        lambda: walk_files(real, "skills"),
        lambda: copy_entry(skills, tmp_path / "c1"),
        lambda: resolve_layer(load_catalog().get("skills"), real, memory_slug="x"),
    ):
        with pytest.raises(UsageError, match=r"skills/a: a symlink loop \(it points to b\)"):
            attempt()
    (skills / "a").unlink()
    (skills / "b").unlink()
    (skills / "up").symlink_to("..")
    with pytest.raises(UsageError, match=r"skills/up: a symlink loop \(it points to \.\., a folder that"):
        copy_entry(skills, tmp_path / "c2")
    (skills / "up").unlink()

    # a target ablate may not read (tests run as root, where chmod does not stop a read: the error is faked
    # at the one call that reads through the link)
    real_stat = os.stat
    locked = str(skills / "x")

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path) == locked and kwargs.get("follow_symlinks", True):
            raise PermissionError(errno.EACCES, "Permission denied", locked)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    with pytest.raises(UsageError, match=r"skills/x: points to a place ablate may not read \(it points to"):
        copy_entry(skills, tmp_path / "c3")
    with pytest.raises(UsageError, match="may not read"):
        walk_files(real, "skills")


def test_dotfiles_setup_cells_hold_what_the_cli_reads(tmp_path: Path) -> None:
    ex, setup, catalog, cells = loaded_dotfiles(tmp_path / "ex")
    before = tree_hash(ex.home)
    skills = resolve_layers(setup, catalog)["skills"]
    assert {"skills/bug-triage/SKILL.md", "skills/release-notes/SKILL.md"} <= set(skills.files)

    # links: a shadow home of copies, nothing differs from the setup, the dangling link stays so
    c0 = build_environment(setup, catalog, cells.get("C0"), tmp_path / "out", base_env=BASE_ENV)
    cfg = c0.config_dir
    assert (cfg / "skills" / "bug-triage" / "SKILL.md").is_file()
    assert (cfg / "skills" / "gone").is_symlink() and not (cfg / "skills" / "gone").exists()
    assert c0.mismatches == {} and not any("differs" in n for n in c0.notes)
    c4 = build_environment(setup, catalog, cells.get("C4"), tmp_path / "out", base_env=BASE_ENV)
    assert not (c4.config_dir / "skills").exists()

    # namespace: links out of the config dir lead where they did; a linked CLAUDE.md whose import the
    # cell strips (C2: axioms) becomes a copy, so @axioms.md resolves in the cell
    for cid in ("C0", "C2"):
        build_config_dir(
            setup, catalog, cells.get(cid), tmp_path / cid, memory_slug=setup.memory_slug, at_real_path=True
        )
    assert os.readlink(tmp_path / "C0" / "skills") == str(ex.home / "dotfiles" / "skills")
    assert os.path.realpath(tmp_path / "C0" / "skills" / "bug-triage") == str(
        ex.home / ".agents/skills/bug-triage"
    )
    assert os.readlink(tmp_path / "C0" / "CLAUDE.md") == str(ex.home / "dotfiles/shared/CLAUDE.md")
    assert not (tmp_path / "C2" / "CLAUDE.md").is_symlink() and not (tmp_path / "C2" / "axioms.md").exists()
    wanted = setup_prints(setup, catalog, resolve_layers(setup, catalog))
    for at_real_path in (True, False):
        for cell in cells.cells:
            config = tmp_path / f"cfg-{cell.dirname}-{at_real_path}"
            got = build_cell_config(setup, catalog, cell, config, wanted, at_real_path=at_real_path)[0]
            assert got.mismatches == {}, (cell.id, at_real_path, got)
    assert tree_hash(ex.home) == before  # every link target byte-identical


def test_layers_names_dangling_links_and_not_the_config_dir_above_the_repo(tmp_path: Path) -> None:
    ex = dotfiles_setup(tmp_path / "ex")
    args = ["layers", "--config-dir", str(ex.config_dir), "--repo", str(ex.repo)]
    res = invoke([*args, "--json"], env={"HOME": str(ex.home)})
    assert res.exit_code == 0, res.output
    data = orjson.loads(res.stdout)
    rows = {r["id"]: r for r in data["layers"]}
    assert rows["skills"]["dangling"] == {"skills/gone": str(ex.home / ".agents" / "skills" / "gone")}
    assert not [lk for lk in data["leaks"] if lk["kind"] == "ancestor-file"], data["leaks"]
    res = invoke(args, env={"HOME": str(ex.home)})
    assert "skills: skills/gone is a dangling link to" in res.stdout


def test_only_the_config_dir_itself_is_spared_as_an_ancestor(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = home / "code" / "app"
    repo.mkdir(parents=True)
    (home / ".claude").mkdir()
    (home / "code" / "CLAUDE.md").write_text("above the repo\n")
    spared = ancestor_leaks(repo, config_dir=home / ".claude")
    assert [lk.path for lk in spared] == [str(home / "code" / "CLAUDE.md")]
    other = ancestor_leaks(repo, config_dir=tmp_path / "elsewhere")  # CLAUDE_CONFIG_DIR set elsewhere
    assert sorted(lk.path for lk in other) == sorted(
        [str(home / "code" / "CLAUDE.md"), str(home / ".claude")]
    )


def test_a_cell_that_differs_from_the_setup_is_refused_before_any_session(
    tmp_path: Path, monkeypatch: Any
) -> None:
    ex, setup, catalog, cells = loaded_dotfiles(tmp_path / "ex")
    real_build = environment.build_config_dir

    def lossy(*args: Any, **kwargs: Any) -> Any:  # a builder that drops a skill, as copytree did
        report = real_build(*args, **kwargs)
        skills = args[3] / "skills"
        if skills.is_symlink():  # kept as a link to the dotfiles (at the real path): never unlink through it
            kept = os.path.realpath(skills / "bug-triage")
            skills.unlink()
            skills.mkdir()
            (skills / "bug-triage").symlink_to(kept)
        else:
            (skills / "release-notes" / "SKILL.md").unlink()
        return report

    monkeypatch.setattr(environment, "build_config_dir", lossy)
    before = tree_hash(ex.home)
    for isolation in ("namespace", "links"):  # each builds the cell's config dir its own way, once
        backend = open_backend(isolation, setup, catalog, tmp_path / isolation, BackendOptions())
        with pytest.raises(AblateError) as err:
            refuse_unfaithful_cells(cells.cells, backend)
        backend.close()
        assert err.value.exit_code == 1
        assert "C0: not the setup it claims to be; skills: the cell's copy differs" in err.value.message
        assert "skills/release-notes/SKILL.md (missing in the cell)" in err.value.message
    assert tree_hash(ex.home) == before


@pytest.mark.parametrize("isolation", ["links", "namespace"])
def test_the_probe_judges_a_cell_whose_kept_layer_differs_not_faithful(
    isolation: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """A cell whose copy of a kept layer differs from the setup's is not faithful, whatever its fingerprints
    showed (the issue: a skills copy that lost files still said "ok, 3/6 fingerprints seen"). Each backend
    builds the cell (no session); the judge gets a session that listed every skill."""
    if isolation == "namespace" and choose_isolation(None).backend != "namespace":
        pytest.skip("the namespace backend does not work on this machine")
    ex, setup, catalog, cells = loaded_dotfiles(tmp_path / "ex")
    real_build = environment.build_config_dir
    changed = "skills/release-notes/SKILL.md"

    def edited(*args: Any, **kwargs: Any) -> Any:  # a copy that still names every skill, one edited
        report = real_build(*args, **kwargs)
        skills = args[3] / "skills"
        if skills.is_symlink():  # seen at the real path: the dotfiles' folder; edit a copy, never through it
            target = Path(os.path.realpath(skills))
            skills.unlink()
            copy_entry(target, skills)
        skill = skills / changed.split("/", 1)[1]
        assert not skill.is_symlink()
        skill.write_text(skill.read_text() + "\nA line the setup never had.\n")
        return report

    monkeypatch.setattr(environment, "build_config_dir", edited)  # both backends build through it
    before = tree_hash(ex.home)
    backend = open_backend(isolation, setup, catalog, tmp_path / "work", BackendOptions(base_env=BASE_ENV))
    cenv = backend.build(cells.get("C0"), 0)
    try:
        cenv.env = force_capture(cenv.env, "http://127.0.0.1:9")  # as the probe sends every cell's session
        assert cenv.mismatches == {"skills": [f"{changed} (differs)"]}
        inv = inventory(setup, catalog)
        prints = layer_prints(catalog, inv.layers, style=selected_output_style(setup))
        assert sorted(prints["skills"].needles) == ["bug-triage", "release-notes"]
        # a session that listed every skill of the setup; it is its own reference, so a layer it did not
        # show is unobservable rather than missing and the skills layer decides alone
        obs = Observation("s", 0, 1.0, None, listed={"bug-triage", "release-notes"}, models={PROBE_MODEL})

        def judge() -> CellProbe:
            return judge_cell(
                cells.get("C0"), cenv, obs, prints, inv, catalog, reference=obs,
                real_paths=isolation == "namespace",
            )  # fmt: skip

        held: Any = getattr(cenv, "layers", cenv)  # namespace keeps them with the cell's layers
        found, held.mismatches = held.mismatches, {}
        fine = judge()  # the fingerprints alone: every skill seen
        assert (fine.verdict, fine.layers["skills"].status) == ("faithful", "ok"), fine.to_json()
        held.mismatches = found
        got = judge()
    finally:
        backend.teardown(cenv)
        backend.close()
    assert got.verdict == "missing", got.to_json()
    assert got.layers["skills"].status == "missing"
    assert got.layers["skills"].evidence == f"the cell's copy differs from the setup's: {changed} (differs)"
    assert {k for k, c in got.layers.items() if c.status == "missing"} == {"skills"}
    result = ProbeResult([got], [], {"checked": True, "equal": True}, {}, {}, [], True, 0.0)
    assert not result.ok
    assert tree_hash(ex.home) == before


@pytest.mark.parametrize("isolation", ["links", "namespace"])
def test_a_repo_layer_that_differs_names_only_its_differing_files(
    isolation: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """A cell whose checkout lost one runbook names that file, not the whole layer: the namespace backend's
    repository side (resolved inside its own mount namespace) listed every file of the layer as missing."""
    if isolation == "namespace" and choose_isolation(None).backend != "namespace":
        pytest.skip("the namespace backend does not work on this machine")
    ex, setup, catalog, cells = loaded_dotfiles(tmp_path / "ex")
    lost = "docs/runbooks/rollback.md"
    assert resolve_layers(setup, catalog)["runbooks"].files == ["docs/runbooks/deploy.md", lost]
    real_ops = worktree.worktree_ops

    def lossy(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return [*real_ops(*args, **kwargs), {"op": "remove", "rel": lost}]

    monkeypatch.setattr(worktree, "worktree_ops", lossy)
    backend = open_backend(isolation, setup, catalog, tmp_path / "work", BackendOptions(base_env=BASE_ENV))
    cenv = backend.build(cells.get("C0"), 0)
    try:
        assert cenv.mismatches == {"runbooks": [f"{lost} (missing in the cell)"]}
    finally:
        backend.teardown(cenv)
        backend.close()
    assert (ex.repo / lost).is_file()


def test_writes_to_per_session_names_are_one_line() -> None:
    ids = [f"{n:08x}-1234-4abc-9def-0123456789ab" for n in range(19)]
    sessions = [{"outside_cell": {"config": {"by_folder": {f"~/.claude/.idle-since-{i}": 1}}}} for i in ids]
    sessions += [{"outside_cell": {"tmp": {"by_folder": {"/tmp/claude-4242": 2, "/tmp/claude-4243": 1}}}}]
    sessions += [{"outside_cell": {"home": {"by_folder": {"~/.cache": 1}}}}]
    assert writes_lines(sessions, 21, noun="cells") == [
        "19 of 21 cells wrote ~/.claude/.idle-since-<uuid> (19 names differing only by an id, 19 files in all)"
        " — discarded",
        "1 of 21 cells wrote /tmp/claude-<n> (2 names differing only by an id, 3 files in all) — discarded",
        "1 of 21 cells wrote ~/.cache (1 file in all) — discarded",
    ]

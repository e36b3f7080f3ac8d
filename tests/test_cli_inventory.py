"""`ablate layers` and `ablate cells` through the real CLI entry point, including every bad input."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from ablate.core.fsutil import tree_hash
from ablate.setup.examples import ExampleSetup, materialise_example
from tests.bad_setups import BAD_SETUPS, bad_setup
from tests.helpers_cli import invoke


@pytest.fixture
def example(tmp_path: Path) -> ExampleSetup:
    return materialise_example(tmp_path / "ex")


def test_layers_json_lists_every_layer(example: ExampleSetup) -> None:
    before = tree_hash(example.home), tree_hash(example.repo)
    code, out, _ = invoke(
        ["layers", "--config-dir", str(example.config_dir), "--repo", str(example.repo), "--json"]
    )
    assert code == 0
    data = orjson.loads(out)
    rows = {r["id"]: r for r in data["layers"]}
    assert rows["user-claude-md"]["present"] and rows["user-claude-md"]["imports"] == ["axioms", "lessons"]
    assert rows["axioms"]["imported_by"] == ["user-claude-md"]
    assert rows["hooks"]["paths"] == ["settings.json#hooks"]
    assert rows["mcp"]["present"] is False and rows["mcp"]["fingerprint"] == ""
    assert rows["repo-memory"]["files"] == 1  # the git-ignored MEMORY.md is found in the live tree
    assert rows["runbooks"]["files"] == 2  # including the untracked runbook
    assert data["memory_slug"] == data["main_worktree_root"].replace("/", "-").replace(".", "-").replace(
        "_", "-"
    )
    assert (tree_hash(example.home), tree_hash(example.repo)) == before


def test_layers_table_and_leaks(example: ExampleSetup, tmp_path: Path) -> None:
    (example.home / ".bashrc").write_text("export X=1\n")
    (example.repo.parent / "CLAUDE.md").write_text("# ancestor\n")
    code, out, _ = invoke(["layers", "--config-dir", str(example.config_dir), "--repo", str(example.repo)])
    assert code == 0
    assert "user-claude-md" in out and "fingerprint" in out
    assert "[ancestor-file]" in out and str(example.repo.parent / "CLAUDE.md") in out


def test_cells_flags_noops(example: ExampleSetup) -> None:
    subprocess.run(["rm", "-r", str(example.repo / "docs" / "findings")], check=True)
    code, out, _ = invoke(
        ["cells", "layered", "--config-dir", str(example.config_dir), "--repo", str(example.repo), "--json"]
    )
    assert code == 0
    rows = {r["id"]: r for r in orjson.loads(out)["cells"]}
    assert rows["C9"]["noop"] is True
    assert rows["C7"]["noop"] is False
    assert rows["C1"]["also_removes"] == ["axioms", "lessons"]
    code, out, _ = invoke(
        ["cells", "layered", "--config-dir", str(example.config_dir), "--repo", str(example.repo)]
    )
    assert "NO-OP: C9: no findings in this setup" in out


def test_cells_without_setup_shows_the_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke(["cells", "binary"])
    assert code == 0
    assert "C11" in out and "no setup checked" in err


@pytest.mark.parametrize(("case", "needle"), sorted(BAD_SETUPS.items()))
def test_bad_setup_inputs_exit_2_with_a_hint(
    example: ExampleSetup, tmp_path: Path, case: str, needle: str
) -> None:
    cfg, repo = bad_setup(case, example, tmp_path)
    code, out, err = invoke(["layers", "--config-dir", str(cfg), "--repo", str(repo)])
    assert code == 2
    assert needle in err and err.startswith("error: ")
    assert "Traceback" not in err + out


def test_invalid_ablate_toml_is_located(example: ExampleSetup, tmp_path: Path) -> None:
    bad = tmp_path / "ablate.toml"
    bad.write_text('[[layer]]\nid = "x"\nside = "config"\nstrip = "explode"\npaths = ["x"]\n')
    code, _, err = invoke(
        [
            "layers",
            "--config-dir",
            str(example.config_dir),
            "--repo",
            str(example.repo),
            "--ablate-toml",
            str(bad),
        ],
    )
    assert code == 2
    assert f"{bad}: layer.0.strip:" in err


def test_paths_with_spaces_and_non_ascii(tmp_path: Path) -> None:
    ex = materialise_example(tmp_path / "dir with spaces ünï", repo_name="répo 日本")
    code, out, _ = invoke(["layers", "--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--json"])
    assert code == 0
    data = orjson.loads(out)
    rows = {r["id"]: r for r in data["layers"]}
    assert rows["auto-memory"]["present"], "auto-memory must be found under the non-ASCII slug"
    assert " " not in data["memory_slug"] and "日" not in data["memory_slug"]


def test_symlink_loop_exit_2(example: ExampleSetup) -> None:
    (example.config_dir / "skills" / "release-notes" / "loop").symlink_to(example.config_dir / "skills")
    code, _, err = invoke(["layers", "--config-dir", str(example.config_dir), "--repo", str(example.repo)])
    assert code == 2 and "symlink loop" in err

"""`ablate env build|clean` through the real CLI entry point, including every bad input and its exit code."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ablate.core.fsutil import tree_hash
from ablate.setup.examples import ExampleSetup, git, materialise_example
from tests.bad_setups import BAD_SETUPS, bad_setup
from tests.helpers_cli import invoke


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ExampleSetup:
    ex = materialise_example(tmp_path / "ex")
    monkeypatch.setenv("HOME", str(ex.home))  # the shadow home links the real home's other entries
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-cli-secret")
    return ex


def build_args(example: ExampleSetup, out: Path, *extra: str) -> list[str]:
    return [
        "env",
        "build",
        *extra,
        "--isolation",
        "links",
        "--config-dir",
        str(example.config_dir),
        "--repo",
        str(example.repo),
        "--out",
        str(out),
    ]


def test_build_json_then_clean(example: ExampleSetup, tmp_path: Path) -> None:
    before = tree_hash(example.home), tree_hash(example.repo)
    out = tmp_path / "out"
    code, stdout, _ = invoke(build_args(example, out, "C4", "--json"))
    assert code == 0
    data = orjson.loads(stdout)
    assert {"config_dir", "cwd", "env", "cell", "fingerprints", "leaks"} <= set(data)
    assert data["cell"]["id"] == "C4" and data["fingerprints"]["skills"] == ""
    assert data["config_dir"] == str(out.resolve() / "s00" / "home" / ".claude")
    assert data["env"]["ANTHROPIC_API_KEY"] == "***" and "sk-cli-secret" not in stdout
    assert Path(data["cwd"], "MEMORY.md").is_file()
    code, stdout, _ = invoke(build_args(example, out, "C4"))
    assert code == 2  # the cell folder exists
    code, stdout, _ = invoke(["env", "clean", str(out)])
    assert code == 0 and "1 environment(s) removed" in stdout
    code, stdout, _ = invoke(["env", "clean", str(out)])
    assert code == 0 and "0 environment(s) removed" in stdout
    assert (tree_hash(example.home), tree_hash(example.repo)) == before
    assert git(example.repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_build_text_prints_a_runnable_line(example: ExampleSetup, tmp_path: Path) -> None:
    code, stdout, _ = invoke(build_args(example, tmp_path / "out", "C0", "--cells", "binary"))
    assert code == 0
    assert f"CLAUDE_CONFIG_DIR={tmp_path.resolve() / 'out' / 's00' / 'home' / '.claude'}" in stdout
    assert "env -i " in stdout and 'ANTHROPIC_API_KEY="$ANTHROPIC_API_KEY"' in stdout
    assert "sk-cli-secret" not in stdout and "IS_SANDBOX=1" in stdout
    invoke(["env", "clean", str(tmp_path / "out")])


def test_existing_out_folder(example: ExampleSetup, tmp_path: Path) -> None:
    (tmp_path / "out" / "s00").mkdir(parents=True)
    code, _, err = invoke(build_args(example, tmp_path / "out", "C1"))
    assert code == 2 and "already exists" in err


@pytest.mark.parametrize("case", [*sorted(BAD_SETUPS), "unknown-cell"])
def test_bad_inputs(example: ExampleSetup, tmp_path: Path, case: str) -> None:
    before = tree_hash(example.home), tree_hash(example.repo)
    config, repo, cell = example.config_dir, example.repo, "C0"
    if case == "unknown-cell":
        cell = "C99"
    else:
        config, repo = bad_setup(case, example, tmp_path)
    code, _, err = invoke(
        [
            "env",
            "build",
            cell,
            "--isolation",
            "links",
            "--config-dir",
            str(config),
            "--repo",
            str(repo),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert code == 2, err
    assert err.startswith("error: ")
    assert BAD_SETUPS.get(case, "unknown cell 'C99'") in err
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    assert (tree_hash(example.home), tree_hash(example.repo)) == before


def test_dirty_repo_exit_2_names_files_and_hint(example: ExampleSetup, tmp_path: Path) -> None:
    (example.repo / "app.py").write_text("# wip\n")
    code, _, err = invoke(build_args(example, tmp_path / "out", "C0"))
    assert code == 2 and "app.py" in err and "--dirty" in err
    code, stdout, _ = invoke(build_args(example, tmp_path / "out", "C0", "--dirty", "--json"))
    assert code == 0 and orjson.loads(stdout)["dirty"] is True
    invoke(["env", "clean", str(tmp_path / "out")])


def test_symlink_loop_exit_2(example: ExampleSetup, tmp_path: Path) -> None:
    (example.config_dir / "rules" / "loop").symlink_to(example.config_dir / "rules")
    code, _, err = invoke(build_args(example, tmp_path / "out", "C0"))
    assert code == 2 and "symlink loop" in err


def test_ancestor_claude_md_exit_1(example: ExampleSetup, tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("# above every cell\n")
    code, _, err = invoke(build_args(example, tmp_path / "out", "C0"))
    assert code == 1 and "CLAUDE.md" in err
    assert not (tmp_path / "out" / "s00").exists()


def test_spaces_and_non_ascii_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = materialise_example(tmp_path / "a dïr", repo_name="my repö")
    monkeypatch.setenv("HOME", str(example.home))
    out = tmp_path / "oüt put"
    code, stdout, err = invoke(build_args(example, out, "C11", "--json"))
    assert code == 0, err
    assert orjson.loads(stdout)["cwd"].endswith("/s00/wt/my repö")
    code, _, _ = invoke(["env", "clean", str(out)])
    assert code == 0 and list(out.iterdir()) == []


def test_build_runs_in_namespace_where_it_works_and_records_it(example: ExampleSetup, tmp_path: Path) -> None:
    from ablate.isolate.detect import namespace_check

    ok, why = namespace_check().ok, namespace_check().reason
    if not ok:
        pytest.skip(f"namespace backend unavailable: {why}")
    before = tree_hash(example.home), tree_hash(example.repo)
    out = tmp_path / "out"
    args = ["env", "build", "C4", "--config-dir", str(example.config_dir), "--repo", str(example.repo)]
    code, stdout, err = invoke([*args, "--out", str(out), "--json"])
    assert code == 0, err
    data = orjson.loads(stdout)
    assert data["isolation"]["backend"] == "namespace"
    assert data["cwd"] == str(example.repo)  # the real path: only the printed command enters the view
    assert "nsexec" in " ".join(data["command"]) and data["command"][-1] == "PROMPT"
    code, stdout, _ = invoke(["env", "clean", str(out)])
    assert code == 0 and list(out.iterdir()) == []
    assert (tree_hash(example.home), tree_hash(example.repo)) == before


def test_help_texts() -> None:
    for args in (["env", "--help"], ["env", "build", "--help"], ["env", "clean", "--help"]):
        code, stdout, _ = invoke(args)
        assert code == 0 and "Usage" in stdout

"""Every bad input is refused before anything is written, with exit 2 and a located message."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from ablate.core.fsutil import tree_hash
from ablate.isolate.forwarder import check_socket_room
from ablate.setup.examples import ExampleSetup
from tests.helpers_cli import invoke
from tests.test_cli_run import TASK, rig, setup_args

__all__ = ["rig"]  # the fixture, imported for this module's tests

Case = Callable[[ExampleSetup, Path], tuple[list[str], str]]


def _out_in_config(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    return [
        "run",
        "--tasks",
        TASK,
        "--out",
        str(ex.config_dir / "runs"),
        *setup_args(ex),
    ], "inside the config dir"


def _out_in_repo(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    return ["run", "--tasks", TASK, "--out", str(ex.repo / "runs"), *setup_args(ex)], "inside the repository"


def _out_is_file(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    (tmp / "afile").write_text("x")
    return ["run", "--tasks", TASK, "--out", str(tmp / "afile"), *setup_args(ex)], "is a file"


def _work_dir_is_file(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    (tmp / "wfile").write_text("x")
    args = ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--work-dir", str(tmp / "wfile")]
    return [*args, *setup_args(ex)], "--work-dir"


def _nul_prompt(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    task = tmp / "nul.toml"
    task.write_text('id = "nul"\nprompt = "a\\u0000b"\n')
    return ["run", "--tasks", str(task), "--out", str(tmp / "runs"), *setup_args(ex)], "NUL byte"


def _nul_prompt_plan(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    args, msg = _nul_prompt(ex, tmp)
    return ["plan", *args[1:]], msg


def _huge_seed(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    args = ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--seed", str(2**64)]
    return [*args, *setup_args(ex)], "--seed"


def _config_is_repo(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    args = ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--config-dir", str(ex.repo), "--repo"]
    return [*args, str(ex.repo)], "is the repository itself"


def _empty_model(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    return [
        "run",
        "--tasks",
        TASK,
        "--out",
        str(tmp / "runs"),
        "--model",
        "",
        *setup_args(ex),
    ], "--model is empty"


def _claude_md_above_work_dir(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    (tmp / "w" / "inner").mkdir(parents=True)
    (tmp / "w" / "CLAUDE.md").write_text("# stray\n")
    args = ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--work-dir", str(tmp / "w" / "inner")]
    return [*args, *setup_args(ex)], "instruction files above it"


def _missing_resume(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    return ["run", "--resume", str(tmp / "nope"), *setup_args(ex)], "no such run folder"


def _missing_merge(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    return ["merge", str(tmp / "nope"), "--out", str(tmp / "merged")], "no such run folder"


def _env_clean_missing(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    return ["env", "clean", str(tmp / "nope")], "no such folder"


def _sim_log_folder(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    (tmp / "logdir").mkdir()
    return ["sim", "serve", "--log", str(tmp / "logdir")], "is a folder"


CASES: dict[str, Case] = {
    "out-in-config-dir": _out_in_config,
    "out-in-repo": _out_in_repo,
    "out-is-a-file": _out_is_file,
    "work-dir-is-a-file": _work_dir_is_file,
    "nul-prompt-run": _nul_prompt,
    "nul-prompt-plan": _nul_prompt_plan,
    "seed-beyond-64-bits": _huge_seed,
    "config-dir-is-the-repo": _config_is_repo,
    "empty-model": _empty_model,
    "claude-md-above-work-dir": _claude_md_above_work_dir,
    "missing-resume-folder": _missing_resume,
    "missing-merge-folder": _missing_merge,
    "env-clean-missing": _env_clean_missing,
    "sim-log-is-a-folder": _sim_log_folder,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_before_anything_is_written(case: str, rig: tuple[ExampleSetup, Path]) -> None:
    _assert_refused_before_anything_is_written(CASES[case], rig)


def _assert_refused_before_anything_is_written(case: Case, rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    args, message = case(ex, tmp)
    before = {p: tree_hash(p) for p in (ex.config_dir, ex.repo)}
    listing = sorted(p.name for p in tmp.iterdir())
    code, out, err = invoke(args)
    assert code == 2, (out, err)
    assert message in err, err
    assert "Traceback" not in err + out
    assert {p: tree_hash(p) for p in (ex.config_dir, ex.repo)} == before  # the setup is untouched
    assert sorted(p.name for p in tmp.iterdir()) == listing  # no run folder, no work dir, nothing new
    assert not (tmp / "runs").exists()


def test_resume_refuses_cells_or_repeats_it_would_ignore(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    code, _, err = invoke(
        ["plan", "--tasks", TASK, "--out", str(tmp / "runs"), "--seed", "3", *setup_args(ex)]
    )
    assert code == 0, err
    (folder,) = (tmp / "runs").iterdir()
    for extra in (["--cells", "binary"], ["--repeats", "3"]):
        code, _, err = invoke(["run", "--resume", str(folder), *extra, *setup_args(ex)])
        assert code == 2, err
        assert f"{extra[0]} cannot change a planned run" in err


def test_a_repo_with_submodules_is_warned_about(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    sub = tmp / "subrepo"
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    import os

    full = {**os.environ, **env}
    subprocess.run(["git", "init", "-q", str(sub)], check=True, env=full)
    (sub / "f").write_text("x")
    subprocess.run(["git", "-C", str(sub), "add", "f"], check=True, env=full)
    subprocess.run(["git", "-C", str(sub), "commit", "-qm", "s"], check=True, env=full)
    git = ["git", "-C", str(ex.repo), "-c", "protocol.file.allow=always"]
    subprocess.run([*git, "submodule", "add", "-q", str(sub), "vendor/sub"], check=True, env=full)
    subprocess.run([*git, "commit", "-qm", "add submodule"], check=True, env=full)
    code, _, err = invoke(["plan", "--tasks", TASK, "--out", str(tmp / "runs"), *setup_args(ex)])
    assert code == 0, err
    assert "warning: the repository has submodules (vendor/sub)" in err


def _isolation_chroot(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    args = ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--isolation", "chroot"]
    return [*args, *setup_args(ex)], "--isolation chroot: unknown backend"


def _dirty_repo(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    (ex.repo / "app.py").write_text("# work in progress\n")
    return ["run", "--tasks", TASK, "--out", str(tmp / "runs"), *setup_args(ex)], "uncommitted changes"


def _judge_without_key(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    args = ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--judge-model", "claude-opus-4-1"]
    return [*args, *setup_args(ex)], "ANTHROPIC_API_KEY"


def _huge_repeats(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    args = ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--repeats", "1000000000"]
    return [*args, *setup_args(ex)], "--repeats 1000000000: the plan would hold 12000000000 items"


def _huge_repeats_plan(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    args, msg = _huge_repeats(ex, tmp)
    return ["plan", *args[1:]], msg


def _huge_prompt(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    task = tmp / "big.toml"
    task.write_text(f'id = "big"\nprompt = "{"x" * 300_000}"\n')
    return ["run", "--tasks", str(task), "--out", str(tmp / "runs"), *setup_args(ex)], "131071 bytes"


def _compare_out_is_file(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    (tmp / "afile").write_text("x")
    arm = tmp / "arm.md"
    arm.write_text("# arm\n")
    args = ["compare", str(arm), str(arm), "--tasks", TASK, "--out", str(tmp / "afile"), "--yes"]
    return [*args, *setup_args(ex)], "--out"


def _compare_isolation_chroot(ex: ExampleSetup, tmp: Path) -> tuple[list[str], str]:
    arm = tmp / "arm.md"
    arm.write_text("# arm\n")
    args = [
        "compare",
        str(arm),
        str(arm),
        "--tasks",
        TASK,
        "--out",
        str(tmp / "runs"),
        "--isolation",
        "chroot",
    ]
    return [*args, "--yes", *setup_args(ex)], "--isolation chroot"


CHECKED_FIRST: dict[str, Case] = {
    "isolation-chroot": _isolation_chroot,
    "dirty-repo": _dirty_repo,
    "repeats-beyond-the-plan-bound": _huge_repeats,
    "repeats-beyond-the-plan-bound-plan": _huge_repeats_plan,
    "prompt-too-big-for-argv": _huge_prompt,
    "compare-out-is-a-file": _compare_out_is_file,
    "compare-isolation-chroot": _compare_isolation_chroot,
}


@pytest.mark.parametrize("case", sorted(CHECKED_FIRST))
def test_checks_that_once_came_after_the_run_folder_now_come_first(
    case: str, rig: tuple[ExampleSetup, Path]
) -> None:
    _assert_refused_before_anything_is_written(CHECKED_FIRST[case], rig)


def test_a_judge_model_without_a_key_is_refused_before_the_run_folder(
    rig: tuple[ExampleSetup, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    _assert_refused_before_anything_is_written(_judge_without_key, rig)


def test_a_manifest_of_another_schema_is_a_located_error(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    args = ["plan", "--tasks", TASK, "--cells", "binary", "--out", str(tmp / "runs"), *setup_args(ex)]
    code, _, err = invoke(args)
    assert code == 0, err
    (folder,) = (tmp / "runs").iterdir()
    manifest = folder / "manifest.json"
    doc = orjson.loads(manifest.read_bytes())
    manifest.write_bytes(orjson.dumps({**doc, "schema_version": 99}))
    listing = sorted(p.name for p in folder.iterdir())
    code, out, err = invoke(["run", "--resume", str(folder), *setup_args(ex)])
    assert code == 2, (out, err)
    assert "manifest.json" in err and "schema_version" in err
    assert "Traceback" not in err + out
    assert sorted(p.name for p in folder.iterdir()) == listing


@pytest.mark.parametrize("command", ["run", "ab"])
def test_a_tmpdir_too_long_for_the_forwarders_socket_is_refused_before_the_run_folder(
    command: str, rig: tuple[ExampleSetup, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forwarder binds a unix socket in the temporary directory (at most 107 bytes of path): a longer
    ``TMPDIR`` was an ``OSError: AF_UNIX path too long`` traceback once sessions started."""
    ex, tmp = rig
    long = tmp / ("t" * (107 - len(str(tmp)) - len("/ablate-fwd-12345678/s")))  # one byte too long
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    args = [command, "--tasks", TASK, "--out", str(tmp / "runs"), *setup_args(ex)]
    _assert_refused_before_anything_is_written(
        lambda *_: (args, f"TMPDIR {long}: too long for the forwarder's unix socket (108 bytes"), rig
    )
    monkeypatch.setattr(tempfile, "tempdir", str(long)[:-1])  # at the limit: not refused
    check_socket_room()

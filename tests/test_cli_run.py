"""`ablate plan | run | ab | merge` through the CLI, with a fake claude binary (no network, fast)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.cli.main import add_groups
from ablate.folder.layout import RunFolder, read_manifest, write_manifest
from ablate.setup.examples import ExampleSetup, materialise_example
from tests.helpers_cli import invoke
from tests.runner_support import write_fake_claude

REPO_ROOT = Path(__file__).resolve().parent.parent
TASK = str(REPO_ROOT / "tasks" / "deploy-command.toml")


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ExampleSetup, Path]:
    ex = materialise_example(tmp_path / "ex")
    monkeypatch.setenv("HOME", str(ex.home))
    monkeypatch.setenv("ABLATE_CLAUDE_BIN", str(write_fake_claude(tmp_path / "claude")))
    monkeypatch.setenv("ABLATE_WORK_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    return ex, tmp_path


def setup_args(ex: ExampleSetup) -> list[str]:
    return ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo)]


@pytest.mark.parametrize("command", ["run", "ab", "plan", "merge"])
def test_every_command_has_help(command: str) -> None:
    code, out, _ = invoke([command, "--help"])
    assert code == 0
    assert len(out) > 200


def test_readme_documents_the_run_commands() -> None:
    readme = (REPO_ROOT / "docs" / "GUIDE.md").read_text()
    for cmd in ("ablate run", "ablate ab", "ablate plan", "ablate merge", "--resume", "--shard"):
        assert cmd in readme


def test_plan_writes_a_run_folder_and_prints_the_estimate(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    code, out, err = invoke(
        [
            "plan",
            "--tasks",
            TASK,
            "--cells",
            "layered",
            "--repeats",
            "2",
            "--seed",
            "9",
            "--out",
            str(tmp / "runs"),
            *setup_args(ex),
        ]
    )
    assert code == 0, err
    assert "plan: 24 sessions" in err
    assert "24 items in 2 blocks (at most 2 shards)" in out
    (folder,) = (tmp / "runs").iterdir()
    manifest = read_manifest(RunFolder(folder))
    assert (manifest.seed, manifest.items, manifest.repeats, manifest.model) == (
        9,
        24,
        2,
        "claude-sonnet-4-6",
    )
    assert manifest.claude.version == "2.1.332"
    assert (folder / "tasks" / "deploy-command.toml").is_file()
    assert len((folder / "plan.jsonl").read_bytes().splitlines()) == 24


def test_ab_runs_the_binary_set_and_reports_json(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    code, out, err = invoke(
        ["ab", "--tasks", TASK, "--jobs", "2", "--out", str(tmp / "runs"), "--json", *setup_args(ex)]
    )
    assert code == 0, err
    summary = orjson.loads(out)
    assert (summary["outcome"], summary["done"], summary["total"]) == ("finished", 2, 2)
    folder = Path(summary["folder"])
    assert sorted(p.stem for p in (folder / "results").iterdir()) == [
        "deploy-command__C0__r00",
        "deploy-command__C11__r00",
    ]
    assert list((tmp / "envs").iterdir()) == []  # every environment and the run's work folder are gone
    # resuming a finished folder launches nothing
    code, out, _ = invoke(["run", "--resume", str(folder), "--json"])
    assert code == 0
    assert orjson.loads(out)["launched"] == 0


def test_each_cell_is_built_once_and_every_cli_start_is_counted(
    rig: tuple[ExampleSetup, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The login check, the fidelity check and the sessions share each cell's one config dir (``namespace``:
    the lower layer of every view of the cell); the manifest counts the CLI's starts: the two sessions, and
    ``--version`` for a binary ablate had not met, and no start of an earlier invocation in the same process."""
    from ablate.core.claude import count_start
    from ablate.isolate import environment
    from ablate.isolate.detect import namespace_check

    if not namespace_check().ok:
        pytest.skip("the namespace backend does not work on this machine")
    ex, tmp = rig
    built: list[Path] = []
    real = environment.build_config_dir

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setattr(environment, "build_config_dir", counted)
    count_start("version")  # an earlier invocation's (in CI, another test's in the same pytest process)
    args = ["ab", "--tasks", TASK, "--jobs", "2", "--isolation", "namespace", "--out", str(tmp / "runs")]
    code, out, err = invoke([*args, "--json", *setup_args(ex)])
    assert code == 0, err
    assert sorted(p.parent.name for p in built) == ["c00", "c01"]  # C0's and C11's, once each: nothing else
    manifest = read_manifest(RunFolder(Path(orjson.loads(out)["folder"])))
    assert manifest.cli_starts.model_dump() == {
        "total": 3, "sessions": 2, "probe": 0, "fidelity": 0, "baseline": 0, "version": 1
    }  # fmt: skip


def test_the_default_work_folder_is_removed_after_a_run(
    rig: tuple[ExampleSetup, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from ablate.isolate.forwarder import shared_forwarder

    shared_forwarder()  # this process's (a CLI process's lives in its TMPDIR until it exits), made beforehand
    ex, tmp = rig
    scratch = tmp / "scratch-tmp"
    scratch.mkdir()
    monkeypatch.delenv("ABLATE_WORK_DIR")
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    code, _, err = invoke(["ab", "--tasks", TASK, "--out", str(tmp / "runs"), *setup_args(ex)])
    assert code == 0, err
    assert list(scratch.iterdir()) == []  # no <tmp>/ablate-envs left behind


def test_resume_refuses_another_claude_version_or_model_unless_forced(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    invoke(["plan", "--tasks", TASK, "--cells", "binary", "--out", str(tmp / "runs"), *setup_args(ex)])
    (folder,) = (tmp / "runs").iterdir()
    rf = RunFolder(folder)
    m = read_manifest(rf)
    write_manifest(rf, m.model_copy(update={"claude": m.claude.model_copy(update={"version": "2.1.300"})}))
    code, _, err = invoke(["run", "--resume", str(folder)])
    assert code == 2
    assert "claude version 2.1.332 differs from the run's 2.1.300" in err
    code, _, err = invoke(["run", "--resume", str(folder), "--model", "claude-opus-5-5", "--force", "--json"])
    assert code == 0, err
    assert read_manifest(rf).sessions[-1].forced is True


def test_merge_refuses_folders_of_different_plans(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    for seed in ("1", "2"):
        invoke(
            [
                "plan",
                "--tasks",
                TASK,
                "--cells",
                "binary",
                "--repeats",
                "2",
                "--seed",
                seed,
                "--out",
                str(tmp / f"runs{seed}"),
                *setup_args(ex),
            ]
        )
    a, b = (next((tmp / f"runs{s}").iterdir()) for s in "12")
    code, _, err = invoke(["merge", str(a), str(b), "--out", str(tmp / "merged")])
    assert code == 1
    assert "differs" in err and "seed" in err


def test_shard_without_seed_is_a_usage_error(rig: tuple[ExampleSetup, Path]) -> None:
    ex, tmp = rig
    code, _, err = invoke(
        ["run", "--tasks", TASK, "--shard", "1/2", "--out", str(tmp / "runs"), *setup_args(ex)]
    )
    assert code == 2
    assert "--shard needs --seed" in err


def test_ab_takes_exactly_the_options_of_run_but_cells() -> None:
    import typer.main

    group = typer.main.get_command(add_groups())
    commands = group.commands  # type: ignore[attr-defined]

    def options(name: str) -> dict[str, tuple[tuple[str, ...], str | None, str | None]]:
        return {
            p.name: (tuple(p.opts), getattr(p, "help", None), getattr(p, "envvar", None))
            for p in commands[name].params
            if p.name
        }

    run, ab = options("run"), options("ab")
    assert set(run) - set(ab) == {"cells"}
    assert {k: v for k, v in run.items() if k != "cells"} == ab
    assert ab["jobs"][0] == ("--jobs", "-j") and ab["work_dir"][2] == "ABLATE_WORK_DIR"

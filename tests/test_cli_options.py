"""The option groups of the commands (ablate.cli.common): declared once, given to every command that takes
them, received in ``**options``; and the helpers the commands share (one_of, command_options)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main

from ablate.cli.common import (
    ADAPTIVE_OPTIONS,
    CELL_RUN_OPTIONS,
    PROBE_OPTIONS,
    SESSION_OPTIONS,
    SETUP_OPTIONS,
    Json,
    command_options,
    one_of,
    takes,
)
from ablate.cli.main import add_groups
from ablate.core.errors import UsageError
from tests.helpers_cli import invoke


def _params(command: str) -> dict[str, Any]:
    group = typer.main.get_command(add_groups())
    return {p.name: p for p in group.commands[command].params if p.name}  # type: ignore[attr-defined]


def _names(*groups: tuple[inspect.Parameter, ...]) -> set[str]:
    return {p.name for g in groups for p in g}


@pytest.mark.parametrize(
    ("command", "groups"),
    [
        ("run", (SESSION_OPTIONS, SETUP_OPTIONS, CELL_RUN_OPTIONS, ADAPTIVE_OPTIONS)),
        ("ab", (SESSION_OPTIONS, SETUP_OPTIONS, CELL_RUN_OPTIONS, ADAPTIVE_OPTIONS)),
        ("compare", (SESSION_OPTIONS, SETUP_OPTIONS, CELL_RUN_OPTIONS, ADAPTIVE_OPTIONS)),
        ("plan", (SESSION_OPTIONS, SETUP_OPTIONS)),
        ("layers", (SETUP_OPTIONS,)),
        ("pieces", (SETUP_OPTIONS, PROBE_OPTIONS)),
        ("probe", (SETUP_OPTIONS, PROBE_OPTIONS)),
    ],
)
def test_every_command_parses_the_options_of_its_groups(command: str, groups: tuple[Any, ...]) -> None:
    params = _params(command)
    assert _names(*groups) <= set(params)
    # the same flag, help and environment variable wherever a group gives it
    run = _params("run")
    for name in _names(*groups) & set(run):
        assert (params[name].opts, params[name].help, params[name].envvar) == (
            run[name].opts,
            run[name].help,
            run[name].envvar,
        )


def test_a_command_default_overrides_the_groups() -> None:
    assert _params("compare")["jobs"].default == 1
    assert _params("run")["jobs"].default != 1


def test_takes_hands_the_group_options_to_the_command_and_keeps_its_own() -> None:
    seen: dict[str, Any] = {}
    cli = typer.Typer()

    @cli.command()
    @takes(SETUP_OPTIONS, SESSION_OPTIONS, model="m-test")
    def cmd(name: str, json: Json = False, **options: Any) -> None:
        seen.update(command_options(locals()))

    from typer.testing import CliRunner

    res = CliRunner().invoke(cli, ["x", "--repo", "/r", "--json", "--config-dir", "/c"])
    assert res.exit_code == 0, res.output
    assert seen["name"] == "x" and seen["json"] is True
    assert seen["repo"] == Path("/r") and seen["config_dir"] == Path("/c")
    assert seen["model"] == "m-test" and seen["ablate_toml"] is None
    assert "options" not in seen


def test_takes_refuses_a_default_for_an_option_it_does_not_give() -> None:
    def cmd(**options: Any) -> None: ...

    with pytest.raises(TypeError, match="jobs"):
        takes(SETUP_OPTIONS, jobs=1)(cmd)


def test_command_options_resolves_an_absent_config_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    assert (
        command_options({"ctx": object(), "options": {"config_dir": None}})["config_dir"] == tmp_path / "cfg"
    )
    given = tmp_path / "given"
    assert command_options({"config_dir": given})["config_dir"] == given
    assert "config_dir" not in command_options({"json": True})


def test_one_of_names_the_option_and_the_choices() -> None:
    assert one_of("--split", "dev", ("dev", "holdout", "both")) == "dev"
    with pytest.raises(UsageError, match=r"--report 'later': expected background, now or none"):
        one_of("--report", "later", ("background", "now", "none"))


def test_a_bad_report_choice_is_a_located_usage_error(tmp_path: Path) -> None:
    code, _, err = invoke(["run", "--tasks", str(tmp_path), "--report", "later"])
    assert code == 2
    assert "--report 'later': expected background, now or none" in err


def _declared(cmd: Any, flag: str) -> tuple[Any, ...]:
    return next((tuple(p.opts), p.help, p.envvar) for p in cmd.params if flag in p.opts)


def _flags(cmd: Any) -> set[str]:
    return {f for p in cmd.params for f in p.opts if f.startswith("--")}


@pytest.mark.parametrize(
    ("other", "meant_otherwise", "expected"),
    [
        # env build's --out is the cell's folder (run's holds run folders)
        (("env", "build"), {"--out"}, {"--dirty", "--isolate-state", "--cells", "--isolation", "--unsealed"}),
        # judge's --jobs and --budget-usd count judge calls and judge spend
        (
            ("judge",),
            {"--jobs", "--budget-usd"},
            {"--judge-model", "--allow-same-judge", "--split", "--backoff"},
        ),
    ],
)
def test_an_option_two_command_groups_share_is_declared_once(
    other: tuple[str, ...], meant_otherwise: set[str], expected: set[str]
) -> None:
    group = typer.main.get_command(add_groups())
    cmd: Any = group
    for name in other:
        cmd = cmd.commands[name]
    run = group.commands["run"]  # type: ignore[attr-defined]
    shared = _flags(run) & _flags(cmd) - meant_otherwise
    assert expected <= shared
    for flag in shared:
        assert _declared(run, flag) == _declared(cmd, flag), flag


def test_cells_is_one_option_wherever_a_cell_set_is_read() -> None:
    group = typer.main.get_command(add_groups())
    sub = group.commands  # type: ignore[attr-defined]
    readers = [sub["run"], sub["plan"], sub["probe"], sub["doctor"], sub["env"].commands["build"]]
    readers += [sub["ci"].commands["init"].commands[k] for k in ("github", "k8s")]
    declared = {_declared(cmd, "--cells") for cmd in readers}
    assert len(declared) == 1 and "-c" in next(iter(declared))[0]

"""Docs are tied to code: every command has help text and is named in the README."""

from __future__ import annotations

import re

import typer.main

from ablate.cli.main import add_groups
from tests.conftest import REPO_ROOT
from tests.helpers_cli import invoke
from tests.run_folder import why


def _commands() -> list[tuple[str, str | None]]:
    group = typer.main.get_command(add_groups())
    out: list[tuple[str, str | None]] = []
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        if subs:
            out.extend((f"{name} {sub}", sc.help) for sub, sc in subs.items())
        else:
            out.append((name, cmd.help))
    return out


def test_every_command_has_help_and_is_in_the_readme() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    commands = _commands()
    assert len(commands) >= 14
    for name, help_text in commands:
        assert help_text and len(help_text.strip()) > 40, f"`ablate {name}` has no real help text"
        assert f"ablate {name}" in readme, f"`ablate {name}` is not in README.md"


def test_every_command_documents_its_exit_codes() -> None:
    for name, help_text in _commands():
        assert help_text and re.search(r"[Ee]xit codes?", help_text), (
            f"`ablate {name}` --help lists no exit codes"
        )


def test_readme_has_exactly_the_two_setup_commands() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    block = setup.split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_help_runs_for_every_command() -> None:
    """Every command's help runs and shows a flag as a flag: no ``<bool>`` metavar after it (click's own
    formatter, not rich's, which printed ``--version <bool>``)."""
    for name, _ in [("", None), *_commands()]:
        res = invoke([*name.split(), "--help"])
        assert res.exit_code == 0, name
        assert "<bool>" not in res.stdout and "--help" in res.stdout, why(name, res.stdout)

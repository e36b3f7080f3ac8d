"""`ablate doctor`: not ready whenever something it checks is wrong, each problem naming its option once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ablate.core.claude import claude_source, find_claude, make_claude_bin
from ablate.setup.examples import materialise_example
from tests.helpers_cli import invoke


def _doctor(
    tmp_path: Path, *args: str, env: dict[str, str | None] | None = None
) -> tuple[int, dict[str, Any], str]:
    ex = materialise_example(tmp_path / "ex")
    base = ["doctor", "--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--work-dir", str(tmp_path)]
    environ: dict[str, str | None] = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test"}
    environ.update(env or {})
    res = invoke([*base, *args, "--json"], env=environ)
    text = invoke([*base, *args], env=environ).stdout
    return res.exit_code, json.loads(res.stdout), text


def test_each_bad_input_makes_doctor_not_ready_and_names_its_option(tmp_path: Path, claude: Path) -> None:
    code, doc, _ = _doctor(tmp_path / "ok", "--claude-bin", str(claude))
    assert (code, doc["ok"], doc["problems"]) == (0, True, [])
    garbage = tmp_path / "garbage.toml"
    garbage.write_text("this is [not toml")
    cases = {
        ("--config-dir", str(tmp_path / "missing")): "--config-dir",
        ("--claude-bin", str(tmp_path / "no-claude")): "--claude-bin",
        ("--cells", "no-such-set"): "--cells",
        ("--ablate-toml", str(garbage)): "--ablate-toml",
    }
    for i, (args, option) in enumerate(cases.items()):
        extra = [] if option == "--claude-bin" else ["--claude-bin", str(claude)]
        code, doc, text = _doctor(tmp_path / f"c{i}", *args, *extra)
        assert code == 1 and not doc["ok"], (args, doc["problems"])
        assert len(doc["problems"]) == 1, doc["problems"]
        (problem,) = doc["problems"]
        assert option in problem["what"] + problem["fix"], problem
        assert "--repo" not in problem["fix"] or option == "--repo"
        assert text.rstrip().endswith("NOT ready: 1 problem(s) above")
        assert "hint:" not in text  # the fix is said once, as "fix:"


def test_doctor_says_where_the_cli_comes_from(tmp_path: Path, claude: Path) -> None:
    _, doc, text = _doctor(tmp_path, env={"ABLATE_CLAUDE_BIN": str(claude)})
    assert (
        doc["claude"]["source"] == "$ABLATE_CLAUDE_BIN"
        and doc["claude"]["version"] == doc["claude"]["pinned"]
    )
    assert "$ABLATE_CLAUDE_BIN)" in text
    assert claude_source(str(claude), {"ABLATE_CLAUDE_BIN": str(claude)}) == "$ABLATE_CLAUDE_BIN"
    assert claude_source(str(claude), {}) == "--claude-bin"


def test_the_cli_make_claude_installs_is_found_without_any_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's set-up (`make claude` in the checkout) needs no PATH entry or variable."""
    installed = make_claude_bin()
    if installed is None:
        pytest.skip("no `make claude` in this checkout")
    monkeypatch.delenv("ABLATE_CLAUDE_BIN", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert claude_source(None) == "make claude's .cache"
    assert find_claude().path == installed.resolve()

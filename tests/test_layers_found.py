"""``ablate layers`` says what it found: imports by name, plugins only when installed and enabled, and no
compiled cache reported as a hard-coded config path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from ablate.isolate.shadow_home import scan_hooks
from ablate.setup.examples import ExampleSetup, materialise_example
from ablate.setup.load import load_setup
from tests.helpers_cli import invoke


@pytest.fixture
def example(tmp_path: Path) -> ExampleSetup:
    return materialise_example(tmp_path / "ex")


def _cli(example: ExampleSetup, *args: str) -> str:
    res = invoke(
        [*args, "--config-dir", str(example.config_dir), "--repo", str(example.repo)],
        env={"HOME": str(example.home)},
    )
    assert res.exit_code == 0, res.output
    return res.stdout


def test_imported_files_are_named(example: ExampleSetup) -> None:
    (example.config_dir / "deep").mkdir()
    (example.config_dir / "deep" / "more.md").write_text("More rules for the deep end of things.\n")
    axioms = example.config_dir / "axioms.md"
    axioms.write_text(axioms.read_text() + "\n@deep/more.md\n")
    out = _cli(example, "layers")
    assert "CLAUDE.md imports axioms.md" in out, out
    assert "axioms.md imports deep/more.md" in out, out
    rows = {r["id"]: r for r in orjson.loads(_cli(example, "layers", "--json"))["layers"]}
    assert "axioms.md imports deep/more.md" in rows["user-claude-md"]["import_edges"]
    assert rows["axioms"]["import_edges"] == ["axioms.md imports deep/more.md"]


def _plugin_cache_only(example: ExampleSetup) -> Path:
    shutil.rmtree(example.config_dir / "skills")
    root = example.config_dir / "plugins" / "cache" / "market" / "helper" / "1.0.0"
    (root / "skills" / "tidy").mkdir(parents=True)
    (root / "skills" / "tidy" / "SKILL.md").write_text(
        "---\nname: tidy\ndescription: Tidy the workspace before a commit, always.\n---\nTidy it.\n"
    )
    return root


def test_a_plugin_cache_without_installed_plugins_is_not_a_layer(example: ExampleSetup) -> None:
    _plugin_cache_only(example)
    out = _cli(example, "layers")
    assert "plugins/ holds" in out and "no plugin installed" in out, out
    cells = {r["id"]: r for r in orjson.loads(_cli(example, "cells", "layered", "--json"))["cells"]}
    assert cells["C4"]["noop"] is True, cells["C4"]
    assert "never loaded" in cells["C4"]["note"]


def test_an_installed_and_enabled_plugin_counts(example: ExampleSetup) -> None:
    root = _plugin_cache_only(example)
    registry = {"version": 2, "plugins": {"helper@market": [{"scope": "user", "installPath": str(root)}]}}
    (example.config_dir / "plugins" / "installed_plugins.json").write_text(json.dumps(registry))
    cells = {r["id"]: r for r in orjson.loads(_cli(example, "cells", "layered", "--json"))["cells"]}
    assert cells["C4"]["noop"] is True  # installed, not enabled
    assert "installed but not enabled: helper@market" in _cli(example, "layers")
    settings_path = example.config_dir / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["enabledPlugins"] = {"helper@market": True}
    settings_path.write_text(json.dumps(settings))
    cells = {r["id"]: r for r in orjson.loads(_cli(example, "cells", "layered", "--json"))["cells"]}
    assert cells["C4"]["noop"] is False, cells["C4"]
    rows = {r["id"]: r for r in orjson.loads(_cli(example, "layers", "--json"))["layers"]}
    assert rows["skills"]["plugins"]["loaded_files"] == 1
    assert rows["skills"]["loaded"]["files"] == 1


def test_compiled_caches_are_not_hard_coded_path_leaks(example: ExampleSetup) -> None:
    hooks = example.config_dir / "hooks"
    (hooks / "__pycache__").mkdir(exist_ok=True)
    (hooks / "__pycache__" / "helper.cpython-311.pyc").write_bytes(
        b"\x00\x01" + str(hooks / "helper.py").encode() + b"\x00"
    )
    (hooks / "spells.sh").write_text(f"#!/bin/sh\ncat {example.config_dir}/settings.json\n")
    setup = load_setup(example.config_dir, example.repo, home=example.home)
    found = [leak.path for leak in scan_hooks(setup) if leak.kind == "hardcoded-config-path"]
    assert str(hooks / "spells.sh") in found
    assert not [p for p in found if "__pycache__" in p or p.endswith(".pyc")], found

"""Adding an isolation backend is one module and its line in the registry (docs/EXTENDING.md#adding-an-isolation-
backend): registered, the worked example ``plaincopy`` is chosen only when asked for, refused unless unsealed,
builds a cell that keeps and strips what the cell says, resets it, reads its config, and gives the report's
caveat the guide quotes. mypy checks the example against the ``Backend`` Protocol (its ``factory=`` line)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from ablate.core.errors import EXIT_USAGE, UsageError
from ablate.folder.layout import IsolationInfo
from ablate.isolate import registry
from ablate.isolate.backend import Backend, BackendOptions, CellEnv
from ablate.isolate.detect import require_sealed
from ablate.report.caveats import backend_caveat
from ablate.setup.cells import CellSet
from ablate.setup.examples import ExampleSetup
from ablate.setup.layers import Catalog
from tests import backend_example
from tests.conftest import REPO_ROOT
from tests.run_folder import new_manifest
from tests.test_environment import BASE_ENV, canary, setup_of, tree_text

pytest_plugins = ["tests.test_environment"]  # its example, catalog and layered fixtures


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.KINDS, "plaincopy", backend_example.KIND)


def test_the_guide_lists_the_protocols_members() -> None:
    """The methods a backend has and the members its environment has, as the guide lists them."""
    guide = " ".join((REPO_ROOT / "docs" / "EXTENDING.md").read_text().split())
    methods = guide.split("Backend[YourEnv]` (", 1)[1].split(")", 1)[0].split(", ")
    assert methods == [n for n, v in vars(Backend).items() if inspect.isfunction(v) and not n.startswith("_")]
    members = re.findall(r"`(\w+)`", guide.split("`ablate.isolate.backend.CellEnv` (", 1)[1].split(")", 1)[0])
    public = [n for n in (*vars(CellEnv), *CellEnv.__annotations__) if not n.startswith("_")]
    assert sorted(members) == sorted(public)


@pytest.mark.usefixtures("registered")
def test_a_cell_keeps_its_layers_strips_its_own_and_a_reset_discards_writes(
    example: ExampleSetup, catalog: Catalog, layered: CellSet, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    backend = registry.open_backend(
        "plaincopy", setup_of(example), catalog, work, BackendOptions(base_env=BASE_ENV)
    )
    (cell,) = [c for c in layered.cells if c.stripped == ("repo-memory",)]
    env = backend.build(cell, 0)
    text = tree_text(env.config_dir) + tree_text(env.cwd)
    assert canary("repo-memory") not in text and canary("skills") in text and canary("axioms") in text
    assert (env.env["HOME"], env.env["TMPDIR"]) == (str(env.home), str(env.root / "tmp"))
    assert env.cwd.is_relative_to(work) and backend.command(env, ["claude", "-p"]) == ["claude", "-p"]
    (env.cwd / "written.txt").write_text("by a session\n")
    (env.config_dir / "skills").rename(env.config_dir / "moved")
    backend.reset(env)
    assert not (env.cwd / "written.txt").exists() and (env.config_dir / "skills").is_dir()
    config = backend.cell_config(cell)
    assert config.path == work / "configs" / cell.dirname / ".claude" and config.mismatches == {}
    assert canary("skills") in tree_text(config.path) and backend.cell_config(cell) is config  # built once
    backend.teardown(env)
    assert not env.root.exists() and not (example.repo / "written.txt").exists()


@pytest.mark.usefixtures("registered")
def test_it_is_chosen_only_when_asked_for_and_refused_unless_unsealed() -> None:
    chosen = registry.choose_isolation("plaincopy")
    assert (chosen.backend, chosen.mode, chosen.locked) == ("plaincopy", "unlocked", False)
    assert registry.choose_isolation(None).backend != "plaincopy"  # auto=False
    with pytest.raises(UsageError, match="sessions cannot be sealed here") as refused:
        require_sealed(chosen, unsealed=False)
    assert refused.value.exit_code == EXIT_USAGE
    assert require_sealed(chosen, unsealed=True).startswith("UNSEALED (--unsealed)")


@pytest.mark.usefixtures("registered")
def test_the_reports_isolation_caveat_is_the_one_the_guide_quotes() -> None:
    info = IsolationInfo(backend="plaincopy", mode="unlocked", locked=False, network="unsealed")
    said = backend_caveat(new_manifest(cells=[], tasks=[], repeats=1, items=0, isolation=info))
    guide = " ".join((REPO_ROOT / "docs" / "EXTENDING.md").read_text().split())
    assert said.startswith("in plaincopy mode sessions are not locked") and f'reads "{said}"' in guide


def test_without_it_plaincopy_is_unknown() -> None:
    with pytest.raises(UsageError, match="--isolation plaincopy: unknown backend"):
        registry.choose_isolation("plaincopy")

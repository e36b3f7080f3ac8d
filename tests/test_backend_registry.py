"""The isolation backends' registry: every stage asks it about the recorded backend (its capabilities, its
caveat), never compares names. A backend registered under a made-up name drives the choice, the report's
caveat, the comparison with the probe and the probe's own build exactly as its capabilities say."""

from __future__ import annotations

import ast
import json
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from ablate.core.errors import UsageError
from ablate.folder.layout import IsolationInfo, RunFolder, read_manifest, write_manifest
from ablate.isolate import registry
from ablate.isolate.backend import Backend, BackendKind, Capabilities, CellEnv, Support
from ablate.isolate.environment import CellEnvironment
from ablate.isolate.links import LinksEnvironments
from ablate.isolate.namespace import NamespaceCellEnv, NamespaceEnvironments
from ablate.probe import probe as probe_mod
from ablate.report.sections import build_report
from ablate.setup.cells import ResolvedCell
from tests.report_support import Outcome, make_run
from tests.run_folder import CLAUDE

ABLATE = Path(__file__).resolve().parent.parent / "ablate"


# the built-in backends are Backends of their own environments, without a cast (checked by mypy)
def _namespace_is_a_backend(b: NamespaceEnvironments) -> Backend[NamespaceCellEnv]:
    return b


def _links_is_a_backend(b: LinksEnvironments) -> Backend[CellEnvironment]:
    return b


def _envs_are_cell_envs(a: NamespaceCellEnv, b: CellEnvironment) -> tuple[CellEnv, CellEnv]:
    return a, b


@dataclass
class ToyEnv:
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def config_source(self) -> Path:
        return self.root / "config"


class ToyBackend:
    """Records how it was made and what it built."""

    made: ClassVar[list[Path]] = []

    def __init__(self, setup: Any, catalog: Any, work_root: Path, options: Any) -> None:
        self.work_root = work_root
        ToyBackend.made.append(work_root)

    def build(self, cell: ResolvedCell, slot: int) -> ToyEnv:
        env = ToyEnv(self.work_root / f"s{slot:02d}", {"PATH": "/usr/bin"})
        env.config_source.mkdir(parents=True)
        (env.config_source / "settings.json").write_text(json.dumps({"apiKeyHelper": "/bin/give-key"}))
        return env

    def prepare(self, cells: Any) -> None: ...
    def teardown(self, env: ToyEnv) -> None: ...
    def close(self) -> None: ...
    def checkout(self, env: ToyEnv) -> Any:
        return nullcontext(env.root)


def toy(name: str, *, real_paths: bool, ok: bool = True, auto: bool = True, caveat: str = "") -> BackendKind:
    return BackendKind(
        name=name,
        summary="a toy",
        capabilities=Capabilities(real_paths=real_paths, copy_on_write=not caveat, lock="nothing"),
        support=lambda: Support(ok, "toy works" if ok else "toy refused here", "toy-mode", ok),
        factory=ToyBackend,  # type: ignore[arg-type]  # a toy: only what these tests call
        auto=auto,
        caveat=caveat,
        unremoved=("the toy's leak",) if caveat else (),
    )


@pytest.fixture
def kinds(monkeypatch: pytest.MonkeyPatch) -> dict[str, BackendKind]:
    """The registry, restored after the test."""
    monkeypatch.setattr(registry, "KINDS", dict(registry.KINDS))
    return registry.KINDS


def test_the_choice_follows_the_registry_not_a_list_of_names(kinds: dict[str, BackendKind]) -> None:
    registry.register(toy("sandbox", real_paths=False, auto=False))
    registry.register(toy("broken", real_paths=True, ok=False))
    chosen = registry.choose_isolation("sandbox")
    assert (chosen.backend, chosen.mode, chosen.locked) == ("sandbox", "toy-mode", True)
    assert chosen.reason == "asked for with --isolation sandbox: toy works"
    assert registry.choice_json(chosen) == {
        "backend": "sandbox",
        "mode": "toy-mode",
        "reason": "asked for with --isolation sandbox: toy works",
        "locked": True,
    }
    with pytest.raises(UsageError, match="does not work here: toy refused here"):
        registry.choose_isolation("broken")
    with pytest.raises(UsageError, match="unknown backend") as err:
        registry.choose_isolation("chroot")
    assert "sandbox" in (err.value.hint or "")  # the hint lists what is registered
    # without --isolation: the first automatic one that works; a refused one is said, one only asked for never
    kinds.clear()
    registry.register(toy("broken", real_paths=True, ok=False))
    registry.register(toy("sandbox", real_paths=False, auto=False))
    registry.register(toy("fallback", real_paths=False))
    auto = registry.choose_isolation(None)
    assert auto.backend == "fallback"
    assert auto.reason == "broken unavailable: toy refused here; toy works"


def test_the_automatic_choice_prefers_a_backend_that_locks_its_sessions(
    kinds: dict[str, BackendKind],
) -> None:
    """A backend that works but would not lock (seal) its sessions gives way to a later one that does; where
    none locks, the first that works is chosen (and refused later unless --unsealed)."""
    from dataclasses import replace

    kinds.clear()
    unlocked = Support(True, "works, NOT locked: no fence", "bare", False)
    registry.register(replace(toy("views", real_paths=True), support=lambda: unlocked))
    registry.register(toy("fenced", real_paths=False))
    chosen = registry.choose_isolation(None)
    assert (chosen.backend, chosen.locked) == ("fenced", True)
    assert chosen.reason == "views not locked here: works, NOT locked: no fence; toy works"
    kinds.pop("fenced")
    registry.register(replace(toy("other", real_paths=False), support=lambda: unlocked))
    first = registry.choose_isolation(None)
    assert (first.backend, first.locked, first.reason) == ("views", False, "works, NOT locked: no fence")


def _report_with(run: Path, backend: str, network: str, probe_backend: str, contexts: dict[str, str]) -> Any:
    folder = RunFolder(run)
    manifest = read_manifest(folder)
    isolation = IsolationInfo(backend=backend, network=network)
    write_manifest(folder, manifest.model_copy(update={"isolation": isolation}))
    cells = [{"id": c, "verdict": "faithful", "context_sha256": ctx} for c, ctx in contexts.items()]
    (run / "probe.json").write_bytes(orjson.dumps({"cells": cells, "isolation": {"backend": probe_backend}}))
    return build_report(run)


def _wired_run(root: Path) -> Path:
    from ablate.folder.result import iter_results
    from ablate.folder.wire import WireRecord, wire_totals

    run = make_run(root, cells={"C0": [], "C1": ["user-claude-md"]}, tasks=["greet"], repeats=1,
                   outcome=lambda *_: Outcome())  # fmt: skip
    for r in iter_results(RunFolder(run)):
        wire = wire_totals([WireRecord(at=1.0, status=200, context_sha256=f"ctx-{r.cell}")])
        data = r.model_copy(update={"wire": wire}).model_dump(mode="json")
        RunFolder(run).result_path(r.item).write_bytes(orjson.dumps(data))
    return run


def test_the_report_reads_the_recorded_backends_capabilities(
    kinds: dict[str, BackendKind], tmp_path: Path
) -> None:
    registry.register(toy("views", real_paths=True))
    registry.register(toy("shadows", real_paths=False, caveat="in shadows mode writes reach the real files"))
    run = _wired_run(tmp_path / "run")
    probed = {"C0": "ctx-C0", "C1": "ctx-probe-saw-another"}

    views = _report_with(run, "views", "sealed", "views", probed)
    (iso,) = [c.text for c in views.caveats if c.id == "isolation"]
    assert "writes reach the real files" not in iso and "links" not in iso  # copy-on-write: nothing to say
    assert {c.cell: c.unlike_probe for c in views.carried} == {"C0": 0, "C1": 1}  # real paths: compared

    shadows = _report_with(run, "shadows", "sealed", "views", probed)
    (iso,) = [c.text for c in shadows.caveats if c.id == "isolation"]
    assert (
        "in shadows mode writes reach the real files, and leaks such as the toy's leak is not removed" in iso
    )
    assert {c.unlike_probe for c in shadows.carried} == {None}  # other paths than the probe's: not compared
    unsealed = _report_with(run, "shadows", "unsealed", "views", probed)
    (iso,) = [c.text for c in unsealed.caveats if c.id == "isolation"]
    assert "leaks such as the toy's leak and the network are not removed" in iso

    # a probe made by a backend without real paths is not compared either; nor a backend this ablate lacks
    assert {c.unlike_probe for c in _report_with(run, "views", "sealed", "shadows", probed).carried} == {None}
    unknown = _report_with(run, "gone", "sealed", "gone", probed)
    (iso,) = [c.text for c in unknown.caveats if c.id == "isolation"]
    assert "not removed" not in iso and {c.unlike_probe for c in unknown.carried} == {None}


@pytest.mark.parametrize(("real_paths", "work"), [(True, "ns"), (False, "cells")])
def test_the_probe_builds_cells_as_the_backends_capabilities_say(
    kinds: dict[str, BackendKind], tmp_path: Path, real_paths: bool, work: str
) -> None:
    registry.register(toy("toy", real_paths=real_paths))
    ToyBackend.made.clear()
    cells = [ResolvedCell(f"C{n}", n, f"cell {n}", (), False) for n in range(3)]
    firsts: list[Any] = []
    nothing: Any = (
        None  # what building the cells never reads (of the CLI, only its path: the backend's programs)
    )
    run = probe_mod._Probe(
        nothing, nothing, nothing, cells, CLAUDE, tmp_path, "toy", base_url="http://127.0.0.1:9"
    )
    probe_mod._build_cells(run, on_first=firsts.append)
    built = run.built
    assert ToyBackend.made == [tmp_path / work]  # views keep their layers under ns/, shadows are the cells/
    assert list(built.envs) == ["C0", "C1", "C2"] and len(firsts) == 1
    for env in built.envs.values():  # neutralised where the backend built the cell's config dir
        assert json.loads((env.config_source / "settings.json").read_text()) == {}
        assert env.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert "settings.json apiKeyHelper neutralised for the probe" in built.notes
    assert probe_mod._real_paths("toy") is real_paths and probe_mod._real_paths("unknown") is False


def test_no_stage_outside_isolate_names_a_backend() -> None:
    """``"namespace"`` or ``"links"`` as a value anywhere outside ``ablate/isolate/`` is a comparison with a
    name the registry should have answered (prose that merely mentions one is not a value)."""
    names = set(registry.KINDS)
    found = []
    for path in sorted(ABLATE.rglob("*.py")):
        if path.relative_to(ABLATE).parts[0] == "isolate":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(ABLATE)}:{node.lineno} {node.value!r}")
    assert found == []


def test_the_built_in_backends_in_the_order_they_are_tried() -> None:
    assert list(registry.KINDS)[:2] == ["namespace", "links"]  # a backend added later is tried after them
    ns, links = registry.KINDS["namespace"].capabilities, registry.KINDS["links"].capabilities
    assert (ns.real_paths, ns.copy_on_write) == (True, True)
    assert (links.real_paths, links.copy_on_write) == (False, False)
    assert registry.recorded_kind(None) is registry.KINDS["links"]  # a manifest from before the record
    with pytest.raises(ValueError, match="unknown isolation backend"):
        registry.open_backend("chroot", None, None, Path("/nonexistent"))  # type: ignore[arg-type]

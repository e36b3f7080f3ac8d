"""The package layout: stage subpackages import each other without cycles (function-level imports count)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "ablate"
ARCHITECTURE = ROOT.parent / "docs" / "ARCHITECTURE.md"

#: Imports against the documented order (docs/ARCHITECTURE.md#layout: a subpackage imports only those listed
#: above it), ``(from, to)`` → why it is allowed. The one list; the doc names each entry as `` `from` → `to` ``.
UPWARD_IMPORTS: dict[tuple[str, str], str] = {}


def stage_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Stage subpackage → the other stage subpackages its modules import, anywhere in the module."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).parts
        if len(rel) < 2:
            continue
        src = rel[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "ablate" and len(parts) > 1 and parts[1] != src:
                    edges[src].add(parts[1])
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path ``[a, b, …, a]``, or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_no_import_cycle_between_stage_subpackages() -> None:
    cycle = find_cycle(stage_imports())
    assert cycle is None, "import cycle between stage subpackages: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_planted_cycle(tmp_path: Path) -> None:
    for pkg, target in (("alpha", "beta"), ("beta", "gamma"), ("gamma", "alpha")):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "m.py").write_text(f"def f():\n    from ablate.{target}.x import y\n")
    cycle = find_cycle(stage_imports(tmp_path))
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) == 4


def documented_order(doc: Path = ARCHITECTURE) -> list[str]:
    """The subpackages in the order docs/ARCHITECTURE.md's table lists them (its ``pkg-<name>`` anchors)."""
    return re.findall(r'^\| <a id="pkg-([a-z_]+)"></a>`\1`', doc.read_text(encoding="utf-8"), re.M)


def against_order(edges: dict[str, set[str]], order: list[str]) -> set[tuple[str, str]]:
    """The imports ``(from, to)`` of ``edges`` where ``to`` is listed below ``from`` in ``order``."""
    rank = {name: n for n, name in enumerate(order)}
    return {(src, dst) for src, dsts in edges.items() for dst in dsts if rank[dst] > rank[src]}


def test_stages_import_only_the_subpackages_listed_above_them() -> None:
    order = documented_order()
    assert sorted(order) == sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))
    found = against_order(stage_imports(), order)
    assert found - UPWARD_IMPORTS.keys() == set(), "imports against docs/ARCHITECTURE.md#layout's order"
    assert UPWARD_IMPORTS.keys() - found == set(), "allowed in UPWARD_IMPORTS but no longer made: drop them"


def test_every_allowed_upward_import_is_said_in_the_doc() -> None:
    layout = ARCHITECTURE.read_text(encoding="utf-8").split('<a id="layout"></a>', 1)[1].split("\n## ", 2)[1]
    for src, dst in UPWARD_IMPORTS:
        assert f"`{src}` → `{dst}`" in layout, f"docs/ARCHITECTURE.md#layout does not name `{src}` → `{dst}`"
    if not UPWARD_IMPORTS:
        assert "exceptions to the order: none" in layout


def test_the_order_check_finds_a_planted_upward_import(tmp_path: Path) -> None:
    for pkg, target in (("alpha", None), ("beta", "alpha"), ("gamma", "delta"), ("delta", None)):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "m.py").write_text(f"from ablate.{target}.x import y\n" if target else "")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "".join(f'| <a id="pkg-{p}"></a>`{p}` | job | names |\n' for p in ("alpha", "beta", "gamma", "delta"))
    )
    order = documented_order(doc)
    assert order == ["alpha", "beta", "gamma", "delta"]
    assert against_order(stage_imports(tmp_path), order) == {("gamma", "delta")}


@pytest.mark.parametrize("pkg", ["core", "folder"])
def test_neutral_subpackages_import_no_stage(pkg: str) -> None:
    allowed = {"core"} if pkg == "folder" else set()
    assert stage_imports().get(pkg, set()) <= allowed


MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 600
#: ``ablate/`` in all, blank and comment lines included: a feature pays for its lines by simplifying something.
MAX_PACKAGE_LINES = 42_000


def oversized(root: Path = ROOT) -> list[str]:
    """Functions over :data:`MAX_FUNCTION_LINES` and modules over :data:`MAX_MODULE_LINES` under ``root``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_MODULE_LINES:
            out.append(f"{path.relative_to(root)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: {length} lines")
    return out


def test_small_rooms_no_long_function_and_no_long_module() -> None:
    assert oversized() == []


def package_lines(root: Path = ROOT) -> int:
    """What ``find ablate -name '*.py' | xargs cat | wc -l`` counts."""
    return sum(path.read_bytes().count(b"\n") for path in root.rglob("*.py"))


def test_the_package_keeps_to_its_line_budget() -> None:
    assert package_lines() <= MAX_PACKAGE_LINES, "simplify something before adding lines (docs/EXTENDING.md)"


def test_the_line_count_is_the_shells(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n\n# note\n")
    (tmp_path / "sub" / "b.py").write_text('"""doc"""\n')
    (tmp_path / "c.txt").write_text("not python\n")
    assert package_lines(tmp_path) == 4


def test_the_size_check_finds_a_long_function(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES + "\n")
    assert [line.split(" ")[1] for line in oversized(tmp_path)] == ["f:"]


@pytest.mark.parametrize("pkg", ["report", "stats"])
def test_the_report_and_the_statistics_never_import_the_runner(pkg: str) -> None:
    """The report reads the run folder (adaptive.json's format is in folder/, a look's statistics in stats/);
    statistics are reached from the runner, never the other way round."""
    assert "run" not in stage_imports().get(pkg, set())


def module_imports(pkg: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Module → the modules of the same subpackage it imports, anywhere in the module (``TYPE_CHECKING`` too)."""
    edges: dict[str, set[str]] = defaultdict(set)
    here = {p.stem for p in (root / pkg).glob("*.py")}
    for path in (root / pkg).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                parts = node.module.split(".")
                if parts[:2] == ["ablate", pkg]:
                    names = [parts[2]] if len(parts) > 2 else [a.name for a in node.names]
                    edges[path.stem].update(n for n in names if n in here and n != path.stem)
    return edges


@pytest.mark.parametrize("pkg", ["checks", "grade", "setup"])
def test_no_circle_of_imports_inside_a_room(pkg: str) -> None:
    cycle = find_cycle(module_imports(pkg))
    assert cycle is None, f"modules of ablate/{pkg}/ import each other: " + " -> ".join(cycle or [])


def test_the_room_circle_finder_finds_a_planted_circle(tmp_path: Path) -> None:
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "a.py").write_text("from ablate.room.b import x\n")
    (tmp_path / "room" / "b.py").write_text("from ablate.room import a\n")
    assert find_cycle(module_imports("room", tmp_path)) == ["a", "b", "a"]

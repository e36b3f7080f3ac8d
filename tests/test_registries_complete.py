"""Every extension is on its registry's line: a report section, a check kind or an isolation backend added as a
module but left out of its registry would be silently unused (no section in the report, a ``kind`` the task
loader refuses, a backend never tried), and no other test would notice. Each registry is read from its module,
each extension found by what its module declares (``SECTION = ...``, a ``kind: Literal[...]`` field,
``KIND = BackendKind(...)``), so a new one is caught the moment it exists."""

from __future__ import annotations

import ast
from pathlib import Path

from ablate.checks.registry import KINDS as CHECK_KINDS
from ablate.isolate.registry import KINDS as BACKENDS
from ablate.report.sections import ORDER

ABLATE = Path(__file__).resolve().parent.parent / "ablate"


def _top_level_assigned(path: Path, name: str) -> ast.expr | None:
    """The value ``name`` is given at the top level of the module at ``path``, if it is."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        value: ast.expr | None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return value
    return None


def _kind_classes(path: Path) -> set[str]:
    """Classes of the module at ``path`` with a ``kind: Literal[...]`` field: check kinds."""
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id == "kind"
                and isinstance(stmt.annotation, ast.Subscript)
                and ast.unparse(stmt.annotation.value) == "Literal"
            ):
                found.add(node.name)
    return found


def test_every_report_section_module_is_in_the_order() -> None:
    declared = {
        p.stem for p in (ABLATE / "report").glob("*.py") if _top_level_assigned(p, "SECTION") is not None
    }
    assert len(declared) >= 20, declared  # the scan itself works
    assert declared == set(ORDER), (sorted(declared - set(ORDER)), sorted(set(ORDER) - declared))
    assert len(ORDER) == len(set(ORDER))


def test_every_check_kind_is_registered() -> None:
    declared = {(p.stem, name) for p in (ABLATE / "checks").glob("*.py") for name in _kind_classes(p)}
    registered = {(k.__module__.rsplit(".", 1)[1], k.__name__) for k in CHECK_KINDS}
    assert len(declared) >= 9, declared
    assert declared == registered, (sorted(declared - registered), sorted(registered - declared))


def test_every_isolation_backend_module_is_registered() -> None:
    declared = set()
    for path in (ABLATE / "isolate").glob("*.py"):
        value = _top_level_assigned(path, "KIND")
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "BackendKind":
            declared.add(f"ablate.isolate.{path.stem}")
    registered = {kind.factory.__module__ for kind in BACKENDS.values()}  # the module of the class it makes
    assert {"ablate.isolate.namespace", "ablate.isolate.links"} <= declared, declared
    assert declared == registered, (sorted(declared - registered), sorted(registered - declared))


def test_the_scans_find_a_planted_extension(tmp_path: Path) -> None:
    """The three scans see a module that declares an extension (so a passing test is not an empty scan)."""
    (tmp_path / "extra.py").write_text(
        "from typing import Literal\n"
        "SECTION = object()\n"
        "KIND = BackendKind(name='x')\n"
        "class Lines(CheckSpec):\n    kind: Literal['file_lines']\n"
    )
    assert _top_level_assigned(tmp_path / "extra.py", "SECTION") is not None
    value = _top_level_assigned(tmp_path / "extra.py", "KIND")
    assert isinstance(value, ast.Call) and ast.unparse(value.func) == "BackendKind"
    assert _kind_classes(tmp_path / "extra.py") == {"Lines"}

"""The docs say what the code is: the subpackages docs/GUIDE.md's tree and docs/ARCHITECTURE.md's table list, the
result statuses docs/ARCHITECTURE.md#item-result names, and every module, file or name the docs point at.
Each list is read from the code, so the tests hold whoever moves what (the import order is in
tests/test_layout.py)."""

from __future__ import annotations

import ast
import importlib
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from ablate.folder.files import RUN_FILES
from ablate.folder.result import COMPLETE_STATUSES, STATUSES
from tests.conftest import REPO_ROOT
from tests.test_layout import documented_order

DOCS = ("README.md", "docs/GUIDE.md", "docs/ARCHITECTURE.md", "docs/CLAUDE-CODE.md")
#: Paths the docs name that exist only in a built wheel, not in the source tree.
WHEEL_ONLY = {"ablate/_data"}
PATH = re.compile(r"(?<![\w/.-])((?:ablate|tests|benchmarks)/[\w/.-]*\w)")
DOTTED = re.compile(r"`(ablate(?:\.[A-Za-z_]\w*)+)")


def _text(name: str) -> str:
    return (REPO_ROOT / name).read_text(encoding="utf-8")


def subpackages() -> list[str]:
    return sorted(p.parent.name for p in (REPO_ROOT / "ablate").glob("*/__init__.py"))


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` (``ablate.pkg.module[.attribute…]``) names a module or something in one."""
    parts = dotted.split(".")
    for n in range(len(parts), 1, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError:
            continue
        for attr in parts[n:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@cache
def defined_in(pkg: str) -> frozenset[str]:
    """Every top-level name a module of ``ablate.<pkg>`` defines or imports."""
    names: set[str] = set()
    for path in (REPO_ROOT / "ablate" / pkg).rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.ImportFrom | ast.Import):
                names.update(a.asname or a.name for a in node.names)
    return frozenset(names)


def test_the_architecture_table_and_the_readme_tree_list_every_subpackage() -> None:
    assert sorted(documented_order()) == subpackages()
    readme = _text("docs/GUIDE.md").split("\n## Architecture", 1)[1]
    tree = readme.split("```", 2)[1]
    listed = re.findall(r"^  ([a-z_]+)/ ", tree, re.M)
    assert sorted(listed) == subpackages(), "docs/GUIDE.md's Architecture tree"
    # a module a line names, ``(result.py)``, is in that line's subpackage
    for pkg, rows in re.findall(r"^  ([a-z_]+)/ +(.*(?:\n {12}.*)*)", tree, re.M):
        for module in re.findall(r"\((\w+\.py)\)", rows):
            assert (REPO_ROOT / "ablate" / pkg / module).is_file(), f"docs/GUIDE.md's tree: {pkg}/{module}"


def test_the_documented_statuses_are_the_codes() -> None:
    section = _text("docs/ARCHITECTURE.md").split('<a id="item-result"></a>', 1)[1]
    sentence = section.split("`status` is one of", 1)[1].split("any other value", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", sentence)) == STATUSES
    answering = sentence.split("(outcomes that answer the item)", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", answering)) == COMPLETE_STATUSES


def code_constant(name: str) -> Any:
    """The value of the module-level literal ``name`` wherever it is defined under ablate/ (one definition)."""
    values = []
    for path in (REPO_ROOT / "ablate").rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            target = node.target if isinstance(node, ast.AnnAssign) and node.value else target
            if isinstance(target, ast.Name) and target.id == name:
                assert isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
                values.append(ast.literal_eval(node.value))
    assert len(values) == 1, f"{name}: defined {len(values)} times under ablate/"
    return values[0]


def _numbered(anchor: str) -> str:
    """The text of the numbered rule under ``<a id="anchor">`` in docs/ARCHITECTURE.md, up to the next anchor."""
    return _text("docs/ARCHITECTURE.md").split(f'<a id="{anchor}"></a>', 1)[1].split("<a id=", 1)[0]


def test_the_folders_a_cell_starts_empty_are_the_builders() -> None:
    rule = _numbered("config-dir").split("Every folder the CLI writes", 1)[1].split("starts real", 1)[0]
    assert re.findall(r"`([\w/-]+)/`", rule) == list(code_constant("WRITTEN_DIRS"))


def test_the_process_environment_is_the_allow_list() -> None:
    rule = _numbered("process-env")

    def after(words: str) -> list[str]:
        return rule.split(words, 1)[1].split("`", 2)[1].split()

    prefixes = [f"{p}*" for p in code_constant("ENV_ALLOW_PREFIXES")]
    assert after("Inherited as they are:") == [*code_constant("ENV_ALLOW"), *prefixes]
    assert after("set by ablate:") == list(code_constant("ENV_OWNED"))
    assert after("pinned the same in every cell:") == list(code_constant("ENV_PINNED"))


def caveat_ids() -> list[str]:
    """The ids of the report's caveats, in report order: each builder of ``CAVEATS`` (and the sequential one
    last), read from the ``Caveat(id=…)`` its body makes."""
    from ablate.report.caveats import CAVEATS

    made: dict[str, list[str]] = {}
    for path in (REPO_ROOT / "ablate" / "report").glob("*.py"):
        for fn in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(fn, ast.FunctionDef):
                made[fn.name] = [
                    str(kw.value.value)
                    for call in ast.walk(fn)
                    if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Caveat"
                    for kw in call.keywords
                    if kw.arg == "id"
                    and isinstance(kw.value, ast.Constant)
                    and isinstance(kw.value.value, str)
                ]
    names = [b.__name__ for b in CAVEATS] + ["sequential_caveat"]
    return list(dict.fromkeys(i for name in names for i in made[name]))


def test_the_documented_caveats_are_the_reports() -> None:
    section = _text("docs/ARCHITECTURE.md").split('<a id="caveats"></a>', 1)[1].split("<a id=", 1)[0]
    listed = section.split("In report order", 1)[1]
    ids = [i for i in re.findall(r"`([a-z][a-z-]+)`", listed) if i in caveat_ids() or "-" in i]
    assert list(dict.fromkeys(ids)) == caveat_ids()
    from ablate.report.caveats import CAVEATS

    always = re.findall(r"`([a-z-]+)`", section.split("In report order", 1)[0])
    never_none = [b.__name__.replace("_", "-") for b in CAVEATS if b.__annotations__["return"] == "Caveat"]
    assert always == never_none, "the caveats every report has"


def test_the_documented_check_kinds_are_the_registrys() -> None:
    from typing import get_args

    from ablate.checks.registry import KINDS

    line = _text("docs/EXTENDING.md").split("The kinds today, in `KINDS`' order:", 1)[1].split("\n", 1)[0]
    assert re.findall(r"`(\w+)`", line) == [get_args(k.model_fields["kind"].annotation)[0] for k in KINDS]


def test_the_documented_primary_choices_are_the_registrys() -> None:
    """docs/GUIDE.md's ``--primary a|b|…`` chooses every registered metric but the default, as help spells it."""
    from ablate.folder.metrics import DEFAULT_PRIMARY, PRIMARY_CHOICES, PRIMARY_NAMES

    text = " ".join(_text("docs/GUIDE.md").split())
    said = text.split("` chooses another", 1)[0].rsplit("`--primary ", 1)[1].split("|")
    assert sorted(said) == sorted(c for c in PRIMARY_CHOICES if PRIMARY_NAMES[c] != DEFAULT_PRIMARY)


def test_the_layer_fields_and_cell_sets_are_the_codes() -> None:
    from typing import get_args

    from ablate.setup.layers import Shows, StripOp

    layers = _text("docs/ARCHITECTURE.md").split('<a id="layers"></a>', 1)[1]
    stripped = layers.split("how it is stripped (", 1)[1].split(")", 1)[0]
    assert re.findall(r"`([a-z-]+)`", stripped) == list(get_args(StripOp))
    shows = layers.split("`shows` is one of", 1)[1].split(".", 1)[0]
    assert sorted(re.findall(r"`([a-z_]+)`", shows)) == sorted(get_args(Shows))
    sets = layers.split('<a id="cells"></a>', 1)[1].split("<a id=", 1)[0]
    named = re.findall(r"`cells/([a-z-]+)\.toml`", sets) + re.findall(
        r"`([a-z-]+)`", sets.split("Other sets:")[1]
    )
    assert sorted(named) == sorted(p.stem for p in (REPO_ROOT / "cells").glob("*.toml"))


def test_the_documented_session_command_is_the_one_ablate_runs() -> None:
    import shlex

    from ablate.core.claude import claude_argv

    sessions = " ".join(_text("docs/ARCHITECTURE.md").split('<a id="sessions"></a>', 1)[1].split())
    documented = sessions.split("Every session is `", 1)[1].split("`", 1)[0]
    argv = claude_argv(Path("claude"), prompt="PROMPT", model="M", session_id="UUID", max_turns="N")
    assert shlex.split(documented) == argv


#: The subpackages that write into a run folder (a cell's own files, ``isolate``'s, are not the run folder's).
RUN_FOLDER_WRITERS = ("folder", "run", "grade", "report", "stats")


@cache
def string_constants() -> dict[str, set[str]]:
    """Every module-level ``NAME = "text"`` of :data:`RUN_FOLDER_WRITERS`, name → its values (found wherever
    a module moved)."""
    found: dict[str, set[str]] = {}
    for pkg in RUN_FOLDER_WRITERS:
        for path in (REPO_ROOT / "ablate" / pkg).rglob("*.py"):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.Assign):
                    targets, value = node.targets, node.value
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    targets, value = [node.target], node.value
                else:
                    continue
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    for target in targets:
                        if isinstance(target, ast.Name):
                            found.setdefault(target.id, set()).add(value.value)
    return found


def test_the_run_folder_tree_names_every_file_the_code_writes() -> None:
    constants = string_constants()
    files = ("MANIFEST", "PLAN", "RESULTS", "STDOUT", "STDERR", "TRANSCRIPTS", "LOCK", "TASKS_DIR", "WIRE")
    names = {
        v for name in (*files, "GRADES", "DIFFS", "ADAPTIVE_FILE", "PROBE_FILE") for v in constants[name]
    }
    assert names <= {f.path.split("/")[0] for f in RUN_FILES}


def test_the_documented_run_folder_files_and_versions_are_folders_list() -> None:
    section = _text("docs/ARCHITECTURE.md").split('<a id="run-folder"></a>', 1)[1]
    tree = section.split("```", 2)[1]
    said = {
        m[1]: None if m[2] == "-" else int(m[2])
        for m in re.finditer(r"^  (\S+)\s+(\d+|-)  ", tree, re.MULTILINE)
    }
    assert said == {f.path: f.version for f in RUN_FILES}


def test_the_documented_exact_limit_of_the_sign_flip_test_is_the_codes() -> None:
    stats = " ".join(_text("docs/ARCHITECTURE.md").split('<a id="statistics"></a>', 1)[1].split())
    assert f"exact up to {code_constant('EXACT_MAX_BLOCKS')} blocks" in stats


def test_the_documented_isolation_record_is_the_manifests() -> None:
    from ablate.folder.layout import IsolationInfo

    text = " ".join(_text("docs/ARCHITECTURE.md").split())
    said = text.split("recorded in the manifest's `isolation` (`IsolationInfo`:", 1)[1].split(
        ") and named", 1
    )[0]
    fields = [f for f in re.findall(r"`([a-z_-]+)`", said) if f not in ("root", "user-namespace", "fenced")]
    assert sorted(fields) == sorted(IsolationInfo.model_fields)


def test_the_documented_identity_is_the_manifests() -> None:
    from ablate.folder.layout import IDENTITY_FIELDS

    text = " ".join(_text("docs/ARCHITECTURE.md").split('<a id="manifest"></a>', 1)[1].split())
    said = text.split("`IDENTITY_FIELDS`:", 1)[1].split(";", 1)[0]
    assert re.findall(r"`([a-z0-9_]+)`", said) == list(IDENTITY_FIELDS)


def test_the_documented_leak_kinds_are_the_ones_found() -> None:
    made = set()
    for path in (REPO_ROOT / "ablate").rglob("*.py"):
        for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Leak" and call.args:
                kind = call.args[0]
                assert isinstance(kind, ast.Constant), f"{path}: a Leak kind that is not a literal"
                made.add(kind.value)
    rule = _numbered("leaks").split("; beside them", 1)[0]
    said = {k for k in re.findall(r"`([a-z-]+)`", rule) if "-" in k or k in made}
    assert said == made


def test_every_path_the_docs_name_exists() -> None:
    seen = 0
    for doc in DOCS:
        for path in set(PATH.findall(_text(doc))):
            seen += 1
            path = path.rstrip(".")
            assert path in WHEEL_ONLY or (REPO_ROOT / path).exists(), f"{doc}: {path} does not exist"
        for data in re.findall(r"`((?:shadow|cells|examples|plugin)/[^`<>]*)`", _text(doc)):  # shipped data
            seen += 1
            assert list(REPO_ROOT.glob(data.rstrip("/") or ".")), f"{doc}: {data} matches nothing"
        for pkg, module in re.findall(
            r"`([a-z_]+)/([\w/]+\.py)`", _text(doc)
        ):  # a module named in its package
            if pkg in subpackages():
                seen += 1
                assert (REPO_ROOT / "ablate" / pkg / module).is_file(), (
                    f"{doc}: {pkg}/{module} does not exist"
                )
    assert seen > 20


def test_every_dotted_name_the_docs_name_resolves() -> None:
    for doc in DOCS:
        for dotted in set(DOTTED.findall(_text(doc))):
            if dotted == "ablate.toml":  # the user's file, not a module
                continue
            assert resolves(dotted), f"{doc}: `{dotted}` names no module or attribute"


#: The files docs/EXTENDING.md's worked examples add (everything else it names exists).
EXAMPLE_FILES = [
    "ablate/checks/file_lines.py",
    "ablate/folder/notes.py",
    "ablate/isolate/plaincopy.py",
    "tests/test_plaincopy_backend.py",
]


def test_every_path_and_name_the_extending_guide_names_exists_or_is_an_example() -> None:
    text = _text("docs/EXTENDING.md")
    paths = {m[1] for m in PATH.finditer(text) if text[m.end()] != "<"}  # not a pattern: tests/test_<name>.py
    assert sorted(p for p in paths if not (REPO_ROOT / p).exists()) == EXAMPLE_FILES
    assert [d for d in DOTTED.findall(text) if not resolves(d)] == []


@pytest.mark.parametrize(
    ("anchor", "module"),
    [
        ("adding-an-isolation-backend", "backend_example"),
        ("adding-a-check-kind", "check_kind_example"),
        ("adding-a-report-section", "report_section_example"),
    ],
)
def test_the_extending_guide_shows_each_example_as_its_tested_module_is(anchor: str, module: str) -> None:
    """The first code block under the anchor is the module the tests register, below its docstring."""
    shown = _text("docs/EXTENDING.md").split(f'<a id="{anchor}"></a>', 1)[1].split("```python\n", 1)[1]
    source = _text(f"tests/{module}.py")
    assert shown.split("```", 1)[0] == source.split('"""\n', 1)[1].lstrip("\n")


def test_the_architecture_tables_public_surface_exists() -> None:
    """Each row's names: ``pkg.module[.name]`` resolves under ``ablate``; a bare name is defined in the row's
    own subpackage."""
    table = re.findall(
        r'^\| <a id="pkg-([a-z_]+)"></a>`\1` \| .* \| (.*) \|$', _text("docs/ARCHITECTURE.md"), re.M
    )
    assert [pkg for pkg, _ in table] == documented_order()
    for pkg, surface in table:
        for name in re.findall(r"`([A-Za-z_][\w.]*)", surface):
            if re.search(r"\.(json|jsonl|toml|md|html|py)$", name):  # a file the surface writes, not a name
                continue
            if name.startswith("ablate."):
                assert resolves(name), f"{pkg}: `{name}`"
            elif name.split(".")[0] in subpackages():
                assert resolves(f"ablate.{name}"), f"{pkg}: `{name}`"
            else:
                assert name in defined_in(pkg), f"{pkg}: `{name}` is defined nowhere in ablate/{pkg}"


def test_the_checks_catch_a_wrong_name() -> None:
    assert resolves("ablate.folder.result.ItemResult") and resolves("ablate.stats")
    assert not resolves("ablate.run.result") and not resolves("ablate.folder.result.NoSuchThing")
    assert "ItemResult" in defined_in("folder") and "NoSuchThing" not in defined_in("folder")
    assert not (Path(REPO_ROOT) / "ablate/mine/pricing.py").exists()  # the README's old name, now core/


def test_the_guides_task_example_names_every_check_kind() -> None:
    """docs/GUIDE.md's task file example: the kinds its ``[[checks]]`` comments offer are the registry's, each
    once (a kind added to ``KINDS`` must be shown there too)."""
    from typing import get_args

    from ablate.checks.registry import KINDS

    block = _text("docs/GUIDE.md").split("\n[[checks]]", 1)[1].split("```", 1)[0]
    offered = re.findall(r'kind = "(\w+)"', block)
    offered += [
        k.strip()
        for k in block.split('kind = "file_unchanged"', 1)[1].split("#", 1)[1].split("\n")[0].split("|")
    ]
    registered = [get_args(k.model_fields["kind"].annotation)[0] for k in KINDS]
    assert sorted(set(offered)) == sorted(registered), sorted(set(offered) ^ set(registered))
    assert len(offered) == len(registered) + 1, offered  # file_unchanged: the example's own kind, listed too


def test_the_guides_metrics_are_the_registrys() -> None:
    """docs/GUIDE.md's *Metrics* line names every metric: the session ones by label, the graded ones by name."""
    from ablate.folder.metrics import METRICS

    text = " ".join(_text("docs/GUIDE.md").split())
    line = text.split("- *Metrics*: ", 1)[1].split(" - *", 1)[0]
    missing = [
        m.name for m in METRICS if (f"`{m.name}`" if m.graded else m.label.removesuffix(" USD")) not in line
    ]
    assert missing == [], line

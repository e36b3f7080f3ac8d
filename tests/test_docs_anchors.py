"""The repository explains itself: code points at anchors that exist, and each subpackage says its job."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ablate import PINNED_CLAUDE_VERSION
from tests.conftest import REPO_ROOT

DOCS = ("ARCHITECTURE.md", "CLAUDE-CODE.md", "PIECES.md", "EXTENDING.md")
POINTER = re.compile(r"docs/(ARCHITECTURE|CLAUDE-CODE|PIECES|EXTENDING)\.md#([a-z0-9-]+)")


def _anchors(name: str) -> set[str]:
    return set(re.findall(r'<a id="([a-z0-9-]+)"></a>', (REPO_ROOT / "docs" / name).read_text()))


def test_every_pointer_into_the_docs_names_an_anchor_that_exists() -> None:
    anchors = {name: _anchors(name) for name in DOCS}
    assert all(anchors.values())
    pointers = 0
    for path in [*(REPO_ROOT / "ablate").rglob("*.py"), *(REPO_ROOT / "docs").glob("*.md")]:
        for doc, anchor in POINTER.findall(path.read_text()):
            pointers += 1
            assert anchor in anchors[f"{doc}.md"], f"{path}: docs/{doc}.md#{anchor} does not exist"
    for name in DOCS:  # links inside a document
        text = (REPO_ROOT / "docs" / name).read_text()
        for anchor in re.findall(r"\]\(#([a-z0-9-]+)\)", text):
            assert anchor in anchors[name], f"docs/{name}: #{anchor} does not exist"
    assert pointers > 0


def test_the_cli_facts_name_the_version_they_were_observed_on() -> None:
    assert PINNED_CLAUDE_VERSION in (REPO_ROOT / "docs" / "CLAUDE-CODE.md").read_text()


def test_each_subpackage_says_its_job_in_one_line() -> None:
    for init in sorted((REPO_ROOT / "ablate").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init}: no docstring"
        first = doc.splitlines()[0]
        assert len(first) > 30 and "DESIGN" not in first and "see " not in first.lower(), f"{init}: {first!r}"


def _slugs(path: Path) -> set[str]:
    """The anchors of a Markdown file: its headings as GitHub spells them, and its ``<a id>`` tags."""
    text = path.read_text()
    heads = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads} | set(
        re.findall(r'<a id="([\w-]+)"></a>', text)
    )


def test_every_link_of_the_readme_and_the_docs_leads_somewhere() -> None:
    links = 0
    for doc in [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")]:
        prose = re.sub(r"```.*?```|`[^`\n]*`", "", doc.read_text(), flags=re.S)  # code is not a link
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            links += 1
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            assert path.exists(), f"{doc.name}: {target}: no such file"
            if anchor and path.suffix == ".md":
                assert anchor in _slugs(path), f"{doc.name}: {target}: no such anchor"
    assert links > 20

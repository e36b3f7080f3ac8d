"""``ablate compare original.md moved.md duplicated.md``: the three-arm decomposition for the user's own three
layouts, roles recognised from the content or given by ``--roles``, and said which."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.compare.arms import build_arms, layout_roles, parse_roles
from ablate.core.errors import UsageError
from ablate.setup.variants import Selector, transform
from tests.helpers_cli import invoke
from tests.test_compare import CLAUDE_MD, only_report, write_tasks


def _layouts(tmp_path: Path) -> dict[str, Path]:
    tools = Selector.parse("Tools")
    texts = {
        "original": CLAUDE_MD,
        "moved": transform(CLAUDE_MD, "move", tools),
        "duplicated": transform(CLAUDE_MD, "duplicate", tools),
    }
    out = {}
    for role, text in texts.items():
        path = tmp_path / f"{role}-layout.md"
        path.write_text(text)
        out[role] = path
    return out


@pytest.mark.parametrize(
    "order",
    [
        ("original", "moved", "duplicated"),
        ("duplicated", "original", "moved"),
        ("moved", "duplicated", "original"),
    ],
)
def test_roles_are_recognised_from_the_content_in_any_order(tmp_path: Path, order: tuple[str, ...]) -> None:
    files = _layouts(tmp_path)
    arms = build_arms([f"{r[:3]}={files[r]}" for r in order])
    roles = layout_roles(arms)
    assert roles is not None and roles.found_by == "content"
    assert (roles.original, roles.moved, roles.duplicated) == ("ori", "mov", "dup")
    assert "recognised from the content" in roles.line()


def test_hand_made_layouts_with_other_blank_lines_and_an_inserted_repeat_are_recognised(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.md").write_text("# R\n\nalpha\nbeta\n\ngamma\n")
    (tmp_path / "b.md").write_text("# R\nbeta\ngamma\n\n\nalpha\n")  # same lines, another order
    (tmp_path / "c.md").write_text("# R\n\nalpha\nbeta\nalpha\n\ngamma\n")  # one line repeated in place
    roles = layout_roles(build_arms([str(tmp_path / n) for n in ("c.md", "b.md", "a.md")]))
    assert roles is not None
    assert (roles.original, roles.moved, roles.duplicated) == ("a", "b", "c")


def test_three_unrelated_files_get_no_roles(tmp_path: Path) -> None:
    for name, text in {"a": "one\ntwo\n", "b": "two\none\n", "c": "one\ntwo\nthree\n"}.items():
        (tmp_path / f"{name}.md").write_text(text)  # c adds a NEW line: not a repetition
    assert layout_roles(build_arms([str(tmp_path / f"{n}.md") for n in "abc"])) is None


def test_roles_option_assigns_roles_in_arm_order_and_is_checked(tmp_path: Path) -> None:
    files = _layouts(tmp_path)
    arms = build_arms([str(files["moved"]), str(files["original"]), str(files["duplicated"])])
    roles = layout_roles(arms, parse_roles("moved, original,duplicated"))
    assert roles is not None and roles.found_by == "roles option"
    assert roles.original == "original-layout" and roles.moved == "moved-layout"
    for bad in ("original,moved", "original,moved,moved", "first,second,third"):
        with pytest.raises(UsageError, match="--roles"):
            parse_roles(bad)
    with pytest.raises(UsageError, match="three arms"):
        layout_roles(arms[:2], parse_roles("original,moved,duplicated"))


def test_compare_of_three_files_computes_the_decomposition_and_says_how_roles_were_found(
    tmp_path: Path,
) -> None:
    files = _layouts(tmp_path)
    tasks = write_tasks(tmp_path, n=2, holdout=0)
    out = tmp_path / "runs"
    common = ["--tasks", str(tasks), "--executor", "sim", "--seed", "1"]
    shuffled = [str(files["duplicated"]), str(files["original"]), str(files["moved"])]
    code, stdout, stderr = invoke(["compare", *shuffled, *common, "--out", str(out)])
    assert code == 0, stderr
    doc = only_report(out)
    assert doc["roles"] == {
        "original": "original-layout",
        "moved": "moved-layout",
        "duplicated": "duplicated-layout",
        "from": "content",
    }
    assert set(doc["decomposition"]) == {"position", "repetition", "total"}
    assert "recognised from the content" in stderr and "recognised from the content" in stdout
    assert "position:" in stdout
    md = (out / doc["compare_id"] / "compare.md").read_text()
    assert "roles: original = original-layout" in md

    # --roles overrides recognition (here: deliberately the other way round) and says so
    out2 = tmp_path / "runs2"
    code, stdout, stderr = invoke(
        ["compare", *shuffled, *common, "--roles", "duplicated,moved,original", "--out", str(out2)]
    )
    assert code == 0, stderr
    doc = only_report(out2)
    assert doc["roles"]["from"] == "roles option" and doc["roles"]["original"] == "moved-layout"
    assert "given by --roles" in stdout


def test_three_unrelated_files_say_why_there_is_no_decomposition(tmp_path: Path) -> None:
    for name, text in {"a": "# A\none\n", "b": "# B\ntwo\n", "c": "# C\nthree\n"}.items():
        (tmp_path / f"{name}.md").write_text(text)
    tasks = write_tasks(tmp_path, n=2, holdout=0)
    out = tmp_path / "runs"
    code, _stdout, stderr = invoke(
        [
            "compare",
            *(str(tmp_path / f"{n}.md") for n in "abc"),
            "--tasks",
            str(tasks),
            "--executor",
            "sim",
            "--out",
            str(out),
        ]
    )
    assert code == 0, stderr
    doc = only_report(out)
    assert doc["decomposition"] is None and doc["roles"] is None
    assert "pass --roles" in stderr

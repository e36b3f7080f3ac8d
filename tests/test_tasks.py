"""Task files: validation with located errors, the shipped examples, the miner's pitfall form."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.core.errors import NotFound, SpecError
from ablate.setup.layers import load_catalog
from ablate.setup.tasks import load_task
from ablate.setup.taskset import load_tasks

SHIPPED = Path(__file__).resolve().parent.parent / "tasks"


def test_the_six_shipped_tasks_load_against_the_catalog() -> None:
    tasks = load_tasks([SHIPPED], load_catalog())
    assert [t.id for t in tasks] == [
        "deploy-command",
        "deterministic-tests",
        "greet-exclaim",
        "no-framework",
        "release-notes",
        "typed-farewell",
    ]
    assert sorted(t.id for t in tasks if t.spec.split == "holdout") == ["no-framework", "release-notes"]
    assert sorted(t.id for t in tasks if t.spec.checks) == [
        "greet-exclaim",
        "release-notes",
        "typed-farewell",
    ]
    assert all(t.spec.rubric is not None for t in tasks)
    for t in tasks:
        assert t.spec.expects and t.spec.pitfalls
        assert len(t.sha256) == 64
        assert [p.id for p in t.pitfall_patterns()] == [p.id for p in t.spec.pitfalls]


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def test_a_minimal_task_has_defaults(tmp_path: Path) -> None:
    t = load_task(write(tmp_path, "t.toml", 'id = "t1"\nprompt = "hi"\n'))
    assert (t.spec.split, t.spec.expects, t.spec.pitfalls, t.spec.max_turns) == ("dev", [], [], None)


def test_problems_are_located_and_reported_together(tmp_path: Path) -> None:
    write(
        tmp_path,
        "bad.toml",
        'id = "Bad Id"\nprompt = "x"\nsplit = "test"\nexpects = ["no-such-layer"]\ncolour = 1\n'
        '[[pitfalls]]\nid = "p"\npattern = "(unclosed"\n',
    )
    with pytest.raises(SpecError) as err:
        load_tasks([tmp_path], load_catalog())
    text = str(err.value)
    for where in (
        "bad.toml: id:",
        "bad.toml: split:",
        "bad.toml: colour: unknown field",
        "pitfalls.0.pattern",
    ):
        assert where in text


def test_unknown_layers_and_duplicates_are_errors(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", 'id = "a"\nprompt = "x"\nexpects = ["skils"]\n')
    write(
        tmp_path,
        "b.toml",
        'id = "a"\nprompt = "y"\n[[pitfalls]]\nid="p"\npattern="x"\n[[pitfalls]]\nid="p"\npattern="y"\n',
    )
    write(tmp_path, "c.toml", 'id = "c"\nprompt = "x"\n')
    write(tmp_path, "d.toml", 'id = "c"\nprompt = "z"\n')
    with pytest.raises(SpecError) as err:
        load_tasks([tmp_path], load_catalog())
    text = str(err.value)
    assert "a.toml: expects.0: unknown layer 'skils'" in text
    assert "duplicate pitfall id 'p'" in text
    assert "duplicate task id 'c'" in text


def test_missing_paths_say_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no such task file"):
        load_tasks([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound, match=r"no \*\.toml task files"):
        load_tasks([tmp_path / "empty"])


def test_select_split_keeps_the_task_files_of_one_split(tmp_path: Path) -> None:
    from ablate.setup.taskset import select_split

    assert [p.stem for p in select_split([SHIPPED], "holdout")] == ["no-framework", "release-notes"]
    assert len(select_split([SHIPPED], "dev")) == 4
    assert select_split([SHIPPED], "both") == [SHIPPED]
    write(tmp_path, "only-dev.toml", 'id = "d"\nprompt = "p"\n')
    with pytest.raises(NotFound, match="no holdout tasks"):
        select_split([tmp_path], "holdout")

"""Plugin-eval suites as tasks: the CLI's own `plugin eval init --bare` template (tests/data/plugin_evals/template,
copied verbatim from CLI 2.1.332), a suite in both case forms, skill-creator's evals.json, the errors, and the
checks the graders become, evaluated on a synthetic session trace."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from ablate.checks.base import EndState, SessionTrace, ToolCall
from ablate.checks.file_exists import glob_regex
from ablate.core.errors import SpecError
from ablate.grade.evaluate import evaluate_check
from ablate.grade.trace import read_transcript
from ablate.setup.plugin_evals import find_suite, load_suite
from ablate.setup.tasks import TaskSpec, load_task, task_id
from ablate.setup.taskset import load_tasks, select_split
from tests.helpers_cli import invoke

DATA = Path(__file__).parent / "data" / "plugin_evals"


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(DATA / name, dest)
    return dest


def _problems(exc: pytest.ExceptionInfo[SpecError]) -> list[tuple[str, str, str]]:
    return [(Path(p.file).name, p.field, p.message) for p in exc.value.problems]


def test_the_cli_template_is_refused_until_filled_in_like_the_cli_does(tmp_path: Path) -> None:
    plugin = _copy("template", tmp_path)
    with pytest.raises(SpecError) as exc:
        load_tasks([plugin])
    found = _problems(exc)
    assert [(f, fld) for f, fld, _ in found] == [
        ("prompt.md", "prompt"),
        ("criteria.md", "frontmatter.criteria"),
    ]
    assert all("blank `init` template" in m for _, _, m in found)
    # filled in: one task named after its folder, the llm grader as the rubric, the template's tools a note
    case = plugin / "evals" / "demo"
    (case / "prompt.md").write_text(
        (case / "prompt.md").read_text().replace("TODO: describe what the agent should do", "Fix the typo.")
    )
    criteria = case / "graders" / "criteria.md"
    criteria.write_text(
        criteria.read_text().replace("TODO: describe what a successful response looks like", "Fixed.")
    )
    notes: list[str] = []
    [task] = load_tasks([plugin], notes=notes)
    assert (task.id, task.prompt, task.spec.max_turns) == ("demo", "Fix the typo.", 10)
    assert task.spec.rubric is not None and task.spec.rubric.pass_ == "Fixed."
    assert task.spec.checks == []
    assert notes == [
        "demo: allowed_tools not applied (every cell runs with the CLI's whole tool set (the setup is what is measured))"
    ]


def test_a_suite_in_both_case_forms_becomes_tasks_whose_toml_round_trips(tmp_path: Path) -> None:
    notes: list[str] = []
    greet, yaml_case = load_tasks([DATA / "suite"], notes=notes)
    assert greet.id == "greet" and yaml_case.id == "yaml-case"
    assert (greet.spec.max_turns, greet.spec.timeout_s) == (4, 120)
    assert greet.spec.description == "Greets with an exclamation mark"
    # graders in file-name order; notes.md (no frontmatter) is not a grader; criteria.md is the rubric
    assert [(c.kind, getattr(c, "name", "")) for c in greet.spec.checks] == [
        ("tool_used", "edits-once"),
        ("tool_order", "reads-first"),
        ("regex", "says-done"),
        ("file_exists", "touches-src"),
    ]
    says = greet.spec.checks[2]
    assert says.model_dump()["pattern"] == r"\bdone\b" and says.model_dump()["weight"] == 2
    assert yaml_case.prompt == "Write hello.txt containing the word hello."
    file_check = yaml_case.spec.checks[1].model_dump()
    assert (file_check["target"], file_check["file"], file_check["match"]) == ("file", "hello.txt", "count:1")
    # the case's system-prompt addition, EVAL_* variables and runs are the task's own (kept in its TOML)
    assert yaml_case.spec.append_system_prompt == "Answer in one sentence."
    assert yaml_case.spec.env == {"EVAL_GREETING": "hello"}
    assert (yaml_case.spec.runs, greet.spec.runs) == (2, None)
    assert not any("runs not applied" in n for n in notes)
    for task in (greet, yaml_case):
        assert task.text is not None
        copy = tmp_path / f"{task.id}.toml"
        copy.write_bytes(task.text)
        again = load_task(copy)
        assert again.spec == task.spec and again.sha256 == task.sha256
        assert tomllib.loads(task.text.decode())["id"] == task.id
    # a suite has no split: its cases are dev tasks
    assert select_split([DATA / "suite"], "dev") == [DATA / "suite"]


def test_where_a_suite_is_found() -> None:
    assert find_suite(DATA / "suite") == DATA / "suite" / "evals"
    assert find_suite(DATA / "suite" / "evals") == DATA / "suite" / "evals"
    assert find_suite(DATA / "skill") == DATA / "skill" / "evals" / "evals.json"
    repo_tasks = Path(__file__).parent.parent / "tasks"
    assert find_suite(repo_tasks) is None  # a folder of *.toml tasks stays one


def test_a_plugin_manifest_can_name_another_eval_dir(tmp_path: Path) -> None:
    plugin = _copy("suite", tmp_path)
    (plugin / "evals").rename(plugin / "checks")
    (plugin / ".claude-plugin" / "plugin.json").write_text(
        '{"name": "x", "experimental": {"evals": "checks"}}'
    )
    assert find_suite(plugin) == plugin / "checks"
    assert [t.id for t in load_suite(plugin / "checks").tasks] == ["greet", "yaml-case"]


def test_skill_creator_evals_json(tmp_path: Path) -> None:
    first, second = load_tasks([DATA / "skill"])
    assert (first.id, second.id) == ("greeting-helper-1", "greeting-helper-2")
    assert first.spec.files == {"evals/files/name.txt": "Ada\n"}
    assert first.spec.rubric is not None
    assert first.spec.rubric.pass_ == (
        "A greeting that uses the name from the file\n- The greeting names Ada\n- It ends with an exclamation mark"
    )
    assert second.spec.rubric is None
    bad = tmp_path / "evals.json"
    (tmp_path / "doc.pdf").write_bytes(b"%PDF-1.4\xff\xfe")
    bad.write_text(
        '{"skill_name": "s", "evals": [{"id": 1, "prompt": "p", "grade": "x"}, {"id": 2},'
        ' {"id": 3, "prompt": "q", "files": ["doc.pdf", "none.txt"]}]}'
    )
    with pytest.raises(SpecError) as exc:
        load_tasks([bad])
    assert [(f, fld) for f, fld, _ in _problems(exc)] == [
        ("evals.json", "evals.0.grade"),
        ("evals.json", "evals.1.prompt"),
        ("evals.json", "evals.2.files.0"),
        ("evals.json", "evals.2.files.1"),
    ]
    assert "binary input" in exc.value.problems[2].message and "no such file" in exc.value.problems[3].message


CASE = "---\nmax_turns: 3\n---\nDo it.\n"


@pytest.mark.parametrize(
    ("grader", "field", "words"),
    [
        ("---\ntype: nope\n---\n", "frontmatter.type", "unknown grader type 'nope'"),
        (
            "---\ntype: regex\npattern: x\nbogus: 1\n---\n",
            "frontmatter.bogus",
            "unknown field for a regex grader",
        ),
        ("---\nweight: 1\n---\nbody\n", "type", 'must include "type:"'),
        (
            "---\ntype: baseline\nbaseline_file: b.md\ncriteria: c\n---\n",
            "frontmatter.type",
            "ablate's cells",
        ),
        (
            "---\ntype: regex\npattern: x\ntarget: mock_calls\n---\n",
            "frontmatter.target",
            "never mock stand-ins",
        ),
        ("---\ntype: llm\nfocus: trace\n---\nGood.\n", "focus", "final answer and the session's diff"),
        ("---\ntype: regex\npattern: '('\n---\n", "frontmatter.pattern", "invalid regex"),
        ("---\ntype: regex\npattern: x\nflags: y\n---\n", "frontmatter.flags", "flag 'y' is not supported"),
        ("---\ntype: tool_used\ntool: Read\nmin: -1\n---\n", "frontmatter.min", "greater than or equal to 0"),
        ("---\ntype: file_exists\n---\n", "frontmatter.path", "Field required"),
        ("---\ntype: regex\npattern: [a\n---\n", "line 3", "unterminated flow collection"),
    ],
)
def test_a_bad_grader_is_a_located_error_naming_its_file(
    tmp_path: Path, grader: str, field: str, words: str
) -> None:
    case = tmp_path / "evals" / "c1"
    (case / "graders").mkdir(parents=True)
    (case / "prompt.md").write_text(CASE)
    (case / "graders" / "g.md").write_text(grader)
    with pytest.raises(SpecError) as exc:
        load_tasks([tmp_path])
    [(file, fld, message)] = _problems(exc)
    assert file in ("g.md", "prompt.md") and fld == field and words in message, (file, fld, message)


def test_a_bad_suite_exits_2_naming_the_file(tmp_path: Path) -> None:

    case = tmp_path / "evals" / "c1"
    (case / "graders").mkdir(parents=True)
    (case / "prompt.md").write_text(CASE)
    (case / "graders" / "g.md").write_text("---\ntype: nope\n---\n")
    res = invoke(["plan", "--tasks", str(tmp_path), "--out", str(tmp_path / "runs")])
    assert res.exit_code == 2
    assert f"{case / 'graders' / 'g.md'}: frontmatter.type: unknown grader type 'nope'" in res.output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("front", "field", "words"),
    [
        ("colour: red\n", "colour", "unknown frontmatter key"),
        ("env: {HOME: /tmp/x}\n", "env.HOME", "only EVAL_* variables"),
        ("env: {EVAL_x: '1'}\n", "env.EVAL_x", "only EVAL_* variables"),
        ("env: {EVAL_N: 1}\n", "env.EVAL_N", "must be a string"),
        ("env: [EVAL_X]\n", "env", "must be a mapping"),
        ("growthbook_overrides: {a: 1}\n", "growthbook_overrides", "not supported"),
        ("schema_version: '2.0'\n", "schema_version", "schema 1.x"),
        ("plugins: [../other]\n", "plugins", "not supported"),
    ],
)
def test_a_bad_case_key_is_a_located_error(tmp_path: Path, front: str, field: str, words: str) -> None:
    case = tmp_path / "evals" / "c1"
    (case / "graders").mkdir(parents=True)
    (case / "prompt.md").write_text(f"---\n{front}---\nDo it.\n")
    (case / "graders" / "g.md").write_text("---\ntype: tool_used\ntool: Read\n---\n")
    with pytest.raises(SpecError) as exc:
        load_tasks([tmp_path])
    assert any(f == "prompt.md" and fld == field and words in m for f, fld, m in _problems(exc)), _problems(
        exc
    )


def test_case_yaml_errors_name_case_yaml(tmp_path: Path) -> None:
    case = tmp_path / "evals" / "c1"
    case.mkdir(parents=True)
    (case / "case.yaml").write_text(
        'schema_version: "1.0"\nname: c\nexecution:\n  prompt: hi\n  speed: 3\ngraders:\n  - type: tool_used\n'
        "    name: t\n    tool: Read\n    when: now\n"
    )
    with pytest.raises(SpecError) as exc:
        load_tasks([tmp_path])
    assert [(f, fld) for f, fld, _ in _problems(exc)] == [
        ("case.yaml", "execution.speed"),
        ("case.yaml", "graders.0.when"),
    ]
    assert task_id("My Case (v2)") == "my-case-v2"


# ----------------------------------------------------------------------------------------------------------
# The graders as checks, evaluated


def _spec(*checks: str) -> TaskSpec:
    return TaskSpec.model_validate(
        tomllib.loads('id = "t"\nprompt = "p"\n' + "".join(f"[[checks]]\n{c}\n" for c in checks))
    )


TRACE = SessionTrace(
    last_message="All done. Done!",
    tool_calls=[
        ToolCall("Read", '{"file_path":"/r/src/a.py"}'),
        ToolCall("Edit", '{"file_path":"/r/src/a.py","old_string":"x"}'),
        ToolCall("Edit", '{"file_path":"/r/README.md"}'),
    ],
    transcript_read=True,
)


@pytest.mark.parametrize(
    ("check", "passed"),
    [
        ('kind = "regex"\npattern = "done"\nflags = "i"\nmatch = "count:2"', True),
        ('kind = "regex"\npattern = "done"\nmatch = "count:2"', False),  # case matters without i
        ('kind = "regex"\npattern = "sorry"\nmatch = "not_contains"', True),
        ('kind = "regex"\npattern = "^Edit .*README"\nflags = "m"\ntarget = "trace"', True),
        ('kind = "regex"\npattern = "^src/a\\\\.py$"\nflags = "m"\ntarget = "files"', True),
        ('kind = "regex"\npattern = "hello"\ntarget = "file"\nfile = "out.txt"', True),
        ('kind = "tool_used"\ntool = "Edit"', True),
        ('kind = "tool_used"\ntool = "Edit"\nmax = 1', False),
        ('kind = "tool_used"\ntool = "Edit"\ninput_match = "README"\nmin = 1\nmax = 1', True),
        ('kind = "tool_used"\ntool = "Bash"\nmin = 0\nmax = 0', True),
        ('kind = "tool_order"\nbefore = { tool = "Read" }\nafter = { tool = "Edit" }', True),
        ('kind = "tool_order"\nbefore = { tool = "Edit" }\nafter = { tool = "Read" }', False),
        ('kind = "tool_order"\nbefore = { tool = "Read" }\nafter = { tool = "Bash" }', False),
        ('kind = "file_exists"\npath = "src/**/*.py"', True),
        ('kind = "file_exists"\npath = "*.py"', False),
        ('kind = "file_exists"\npath = "**/*.md"\nexists = false', False),
        ('kind = "file_exists"\npath = "**/*.txt"\nexists = false', True),
    ],
)
def test_graders_evaluated_on_a_session(check: str, passed: bool) -> None:
    spec = _spec(check)

    def read(rel: str) -> tuple[bytes | None, str]:
        return (b"hello\n", "") if rel == "out.txt" else (None, "absent")

    end = EndState(read, lambda _r: (True, ""), ["src/a.py", "docs/README.md"], None, TRACE)
    result = evaluate_check(0, spec.checks[0], end)
    assert result.passed is passed, result.detail


def test_without_the_session_trace_session_graders_are_not_evaluable() -> None:
    spec = _spec('kind = "tool_used"\ntool = "Read"\nname = "reads"', 'kind = "regex"\npattern = "x"')
    end = EndState(lambda _r: (None, "absent"), lambda _r: (True, ""), [], None, None)
    results = [evaluate_check(i, c, end) for i, c in enumerate(spec.checks)]
    assert [r.passed for r in results] == [None, None]
    assert results[0].name == "reads"
    no_transcript = SessionTrace(last_message="x")
    r = evaluate_check(
        0, spec.checks[0], EndState(lambda _r: (None, ""), lambda _r: (True, ""), [], None, no_transcript)
    )
    assert r.passed is None and "no transcript" in r.detail


def test_the_weighted_score_of_a_grade() -> None:
    from ablate.grade.checkout import grade_from_diff
    from ablate.setup.tasks import Task

    spec = _spec(
        'kind = "regex"\nname = "a"\nweight = 3.0\npattern = "Done"',
        'kind = "regex"\nname = "b"\npattern = "absent"',
    )
    task = Task(spec=spec, source=Path("t.toml"), sha256="")
    grade = grade_from_diff(task, "", trace=TRACE)
    assert grade is not None and grade.score == 0.75 and grade.passed is False
    assert [(r.name, r.weight, r.passed) for r in grade.results] == [("a", 3.0, True), ("b", 1.0, False)]
    assert grade_from_diff(task, "", trace=None).score is None  # type: ignore[union-attr]


def test_glob_like_the_cli() -> None:
    assert glob_regex("src/**/*.py").match("src/a.py") and glob_regex("src/**/*.py").match("src/x/y/a.py")
    assert not glob_regex("src/*.py").match("src/x/a.py")
    assert glob_regex("a?c.txt").match("abc.txt") and not glob_regex("a.c").match("abc")


def test_a_transcript_tool_call_recorded_twice_counts_once(tmp_path: Path) -> None:
    use = '{"type":"tool_use","id":"tu1","name":"Read","input":{"file_path":"/x"}}'
    lines = [
        '{"type":"assistant","message":{"content":[' + use + "]}}",
        '{"type":"assistant","message":{"content":[' + use + "]}}",
        '{"type":"assistant","isSidechain":true,"message":{"content":[{"type":"tool_use","id":"s","name":"Bash","input":{}}]}}',
        '{"type":"assistant","message":{"content":[{"type":"text","text":"fin"}]}}',
        "not json",
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    trace = read_transcript(path)
    assert trace.tool_calls == [ToolCall("Read", '{"file_path":"/x"}')]
    assert trace.last_message == "fin" and trace.trace_text() == 'Read {"file_path":"/x"}'

"""What a task adds to its own sessions, the same in every cell: text appended to the system prompt
(``--append-system-prompt``), ``EVAL_*`` variables, and the repeats it asks for (``runs``), whether written in
a TOML task or converted from a plugin-eval case; and a published plugin's eval suite converted as it is."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ablate.core.claude import task_args
from ablate.core.errors import SpecError
from ablate.folder.layout import RunFolder, read_manifest
from ablate.run.session import pinned_argv, render_argv
from ablate.setup.examples import materialise_example
from ablate.setup.tasks import load_task
from ablate.setup.taskset import load_tasks, task_repeats
from tests.helpers_cli import invoke

DATA = Path(__file__).parent / "data" / "plugin_evals"
TASK = 'schema_version = 1\nid = "t"\nprompt = "Say hi."\n'


def _task(tmp_path: Path, extra: str, name: str = "t") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(TASK.replace('"t"', f'"{name}"') + extra)
    return path


def test_a_toml_task_says_its_system_prompt_addition_variables_and_runs(tmp_path: Path) -> None:
    task = load_task(
        _task(tmp_path, 'append_system_prompt = "Be brief."\nruns = 4\n[env]\nEVAL_MODE = "strict"\n')
    )
    assert task.spec.append_system_prompt == "Be brief."
    assert task.spec.env == {"EVAL_MODE": "strict"}
    assert task.spec.runs == 4
    plain = load_task(_task(tmp_path, "", "plain"))
    assert (plain.spec.append_system_prompt, plain.spec.env, plain.spec.runs) == ("", {}, None)


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ('[env]\nHOME = "/tmp/x"\n', "env.HOME", "only EVAL_* variables"),
        ('[env]\nANTHROPIC_BASE_URL = "http://x"\n', "env.ANTHROPIC_BASE_URL", "only EVAL_* variables"),
        ('[env]\neval_x = "1"\n', "env.eval_x", "only EVAL_* variables"),
        ('[env]\nEVAL_X = "a\\u0000b"\n', "env.EVAL_X", "NUL byte"),
        ("[env]\nEVAL_X = 1\n", "env.EVAL_X", "valid string"),
        ('append_system_prompt = "a\\u0000b"\n', "append_system_prompt", "NUL byte"),
        ("runs = 0\n", "runs", "greater than or equal to 1"),
        ("runs = 51\n", "runs", "less than or equal to 50"),
    ],
)
def test_a_bad_task_option_is_a_located_error(tmp_path: Path, extra: str, field: str, words: str) -> None:
    path = _task(tmp_path, extra)
    with pytest.raises(SpecError) as exc:
        load_task(path)
    [problem] = exc.value.problems
    assert (problem.file, problem.field) == (str(path), field) and words in problem.message, problem


def test_the_system_prompt_addition_goes_before_the_end_of_the_options() -> None:
    template = pinned_argv(Path("/bin/claude"), "m", ["--debug"])
    plain = render_argv(template, max_turns=3, session_id="s", prompt="-p looks like an option")
    assert "--append-system-prompt" not in plain and plain[-2:] == ["--", "-p looks like an option"]
    extra = task_args(append_system_prompt="Be brief.")
    assert extra == ["--append-system-prompt", "Be brief."] and task_args() == []
    argv = render_argv(template, max_turns=3, session_id="s", prompt="hi", task_args=extra)
    assert argv == [*plain[:-2], "--append-system-prompt", "Be brief.", "--", "hi"]
    assert argv[argv.index("--max-turns") + 1] == "3" and "--debug" in argv


def test_runs_sets_the_repeats_unless_repeats_is_given(tmp_path: Path) -> None:
    tasks = load_tasks([_task(tmp_path, "runs = 3\n", "a"), _task(tmp_path, "runs = 5\n", "b")])
    assert task_repeats(tasks, 2, decided_by=None) == (
        5,
        "repeats: 5, the largest runs the tasks ask for (task b); --repeats chooses another",
    )
    assert task_repeats(tasks, 20, decided_by="--adaptive") == (
        20,
        "--adaptive decides the repeats of every task; the tasks' runs (5, task b) are not used",
    )
    assert task_repeats(load_tasks([_task(tmp_path, "", "c")]), 2, decided_by=None) == (2, None)


def test_plan_uses_a_suites_runs_and_says_so(tmp_path: Path) -> None:
    ex = materialise_example(tmp_path / "ex")
    suite = tmp_path / "suite"
    shutil.copytree(DATA / "suite", suite)  # yaml-case asks for runs: 2
    setup = ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--cells", "binary"]
    res = invoke(["plan", "--tasks", str(suite), "--out", str(tmp_path / "a"), *setup])
    assert res.exit_code == 0, res.stderr
    assert "note: repeats: 2, the largest runs the tasks ask for (task yaml-case)" in res.stderr
    (folder,) = (tmp_path / "a").iterdir()
    assert read_manifest(RunFolder(folder)).repeats == 2
    res = invoke(["plan", "--tasks", str(suite), "--repeats", "1", "--out", str(tmp_path / "b"), *setup])
    assert res.exit_code == 0, res.stderr
    assert (
        "note: --repeats 1 decides the repeats of every task; the tasks' runs (2, task yaml-case)"
        in res.stderr
    )
    (folder,) = (tmp_path / "b").iterdir()
    assert read_manifest(RunFolder(folder)).repeats == 1


def test_a_published_suite_converts(tmp_path: Path) -> None:
    """censys/censys-ai-skills' evals (tests/data/plugin_evals/censys/README.md): its cases name their own
    plugin (``plugins: ["../.."]``), which is accepted with a note; one case's llm grader has a ``target`` key
    that the pinned CLI refuses too (``Unrecognized key(s) in object: 'target'``), and so does ablate."""
    suite = tmp_path / "censys"
    shutil.copytree(DATA / "censys", suite)
    with pytest.raises(SpecError) as exc:
        load_tasks([suite])
    [problem] = exc.value.problems
    assert problem.file.endswith("count-uses-script/graders/no-aggregate-counting.md")
    assert problem.field == "frontmatter.target" and "unknown field for a llm grader" in problem.message
    shutil.rmtree(suite / "evals" / "count-uses-script")
    notes: list[str] = []
    agg, view = load_tasks([suite], notes=notes)
    assert (agg.id, view.id) == ("aggregate-no-streaming", "view-not-investigate")
    assert view.prompt == "What's running on 203.0.113.5? Show me the services on that host."
    assert (view.spec.max_turns, view.spec.timeout_s, view.spec.runs) == (5, 120, 3)
    graders = {c.name: c.model_dump(exclude_defaults=True) for c in view.spec.checks if hasattr(c, "name")}
    assert graders == {
        "fires-view-skill": {
            "kind": "tool_used",
            "name": "fires-view-skill",
            "tool": "Skill",
            "input_match": r'"skill":\s*"(?:[\w-]+:)?censys-view"',
            "min": 1,
        },
        "no-investigate": {
            "kind": "tool_used",
            "name": "no-investigate",
            "tool": "Skill",
            "input_match": r'"skill":\s*"(?:[\w-]+:)?censys-investigate"',
            "max": 0,
        },
    }
    streaming = agg.spec.checks[1].model_dump()
    assert (streaming["kind"], streaming["target"], streaming["match"]) == ("regex", "trace", "not_contains")
    assert streaming["pattern"] == r"censys\s+aggregate\s+.*-S|censys\s+aggregate\s+.*--streaming"
    assert f"view-not-investigate: plugins names the plugin under test ({suite.resolve()})" in " ".join(notes)
    assert "view-not-investigate: allowed_tools not applied" in " ".join(notes)
    # a case naming any other plugin stays refused
    prompt = suite / "evals" / "view-not-investigate" / "prompt.md"
    prompt.write_text(prompt.read_text().replace('["../.."]', '["../../../other"]'))
    with pytest.raises(SpecError) as exc:
        load_tasks([suite])
    assert [(Path(p.file).name, p.field) for p in exc.value.problems] == [("prompt.md", "plugins")]


def test_ab_and_run_plan_a_suites_runs_but_an_adaptive_run_chooses_its_own(tmp_path: Path) -> None:
    from ablate.core.claude import find_claude
    from ablate.run.prepare import RunRequest, prepare_run

    ex = materialise_example(tmp_path / "ex")
    suite = tmp_path / "suite"
    shutil.copytree(DATA / "suite", suite)  # yaml-case asks for runs: 2

    def request(out: str, *, adaptive: bool) -> RunRequest:
        return RunRequest(
            tasks=[suite],
            cells="binary",
            repeats=7,
            model="claude-sonnet-4-6",
            max_turns=5,
            timeout_s=60.0,
            out=tmp_path / out,
            config_dir=ex.config_dir,
            repo=ex.repo,
            defaulted=frozenset({"repeats"}),
            adaptive=adaptive,
        )

    claude = find_claude()
    fixed = prepare_run(request("fixed", adaptive=False), claude)
    assert fixed.manifest.repeats == 2
    assert any(w.startswith("repeats: 2, the largest runs the tasks ask for") for w in fixed.warnings)
    adaptive = prepare_run(request("adaptive", adaptive=True), claude)
    assert adaptive.manifest.repeats == 7  # its --max-repeats: the rounds decide
    assert (
        "--adaptive decides the repeats of every task; the tasks' runs (2, task yaml-case) are not used"
        in (adaptive.warnings)
    )

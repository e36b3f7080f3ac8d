"""The blind judge end to end against ablate.sim (the SDK's non-streaming path) with scripted verdicts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ablate.core.backoff import BackoffPolicy
from ablate.core.errors import UsageError
from ablate.grade.judge import JudgeOptions, check_judges, judge_folder, parse_verdict, scrub
from ablate.grade.recheck import agreement
from ablate.grade.record import read_grade
from ablate.sim import SimServer, script_from_data
from tests.grade_support import Item, make_run
from tests.helpers_cli import invoke
from tests.net_support import carry, port_of, serve

JUDGE_A = "claude-haiku-4-5"
JUDGE_B = "claude-opus-4-1"


def verdict(v: str, reason: str = "scripted") -> str:
    return json.dumps({"verdict": v, "reason": reason})


SCRIPT: dict[str, Any] = {
    "description": "judge verdicts keyed on markers in the answer and on the judge model",
    "usage": {"input_tokens": 500, "output_tokens": 20},
    "default": {"text": verdict("fail")},
    "rules": [
        {
            "name": "limited",
            "where": "prompt",
            "contains": ["ANSWER-RATELIMIT"],
            "times": 1,
            "error": {"status": 429, "retry_after": 0},
        },
        {
            "name": "malformed-once",
            "where": "prompt",
            "contains": ["ANSWER-MALFORMED-ONCE"],
            "times": 1,
            "text": "I think it passes.",
        },
        {
            "name": "malformed-always",
            "where": "prompt",
            "contains": ["ANSWER-MALFORMED-ALWAYS"],
            "text": '{"verdict": "maybe"}',
        },
        {
            "name": "refuse",
            "where": "prompt",
            "contains": ["ANSWER-REFUSE"],
            "text": "I can't grade this.",
            "stop_reason": "refusal",
        },
        {
            "name": "a-pass",
            "model": "haiku",
            "where": "prompt",
            "regex": "ANSWER-(AA|AB|RATELIMIT|MALFORMED-ONCE)",
            "text": "```json\n" + verdict("pass") + "\n```",
        },
        {
            "name": "b-pass",
            "model": "opus",
            "where": "prompt",
            "regex": "ANSWER-(AA|BA)",
            "text": verdict("pass"),
        },
    ],
}


@pytest.fixture
def sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimServer]:
    server = SimServer(script_from_data(SCRIPT), log_path=tmp_path / "judge-requests.jsonl").start()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-key")
    yield server
    server.stop()


def opts(*judges: str, **kw: Any) -> JudgeOptions:
    return JudgeOptions(judge_models=tuple(judges), backoff=BackoffPolicy(first_s=0.05), **kw)


def test_scripted_verdicts_errors_and_a_rate_limit(tmp_path: Path, sim: SimServer) -> None:
    items = [
        Item("t1", "C0", 0, "ANSWER-AA fine"),
        Item("t1", "C1", 0, "ANSWER-FF bad"),
        Item("t1", "C2", 0, "ANSWER-RATELIMIT"),
        Item("t1", "C3", 0, "ANSWER-MALFORMED-ONCE"),
        Item("t1", "C4", 0, "ANSWER-MALFORMED-ALWAYS"),
        Item("t1", "C5", 0, "ANSWER-REFUSE"),
    ]
    folder = make_run(tmp_path / "run", items)
    summary = judge_folder(folder.root, opts(JUDGE_A, jobs=2))
    assert (summary.outcome, summary.judged, summary.errors, summary.rate_limited) == ("finished", 6, 2, 1)
    got = {}
    for it in items:
        grade = read_grade(folder, f"t1__{it.cell}__r00")
        assert grade is not None
        v = grade.verdict(JUDGE_A, 1)
        assert v is not None
        got[it.cell] = (v.verdict, v.tries)
    assert got == {
        "C0": ("pass", 1),
        "C1": ("fail", 1),
        "C2": ("pass", 1),  # the 429 paused the pool and was asked again: never a verdict
        "C3": ("pass", 2),  # malformed once, then a verdict
        "C4": ("error", 2),  # malformed twice: a judge error, not a fail
        "C5": ("error", 1),  # a refusal
    }
    refusal = read_grade(folder, "t1__C5__r00")
    assert refusal is not None and "refused" in refusal.judges[0].reason
    assert all(not r.stream for r in sim.requests() if r.is_messages)  # the non-streaming path
    assert summary.spend_usd > 0

    # resumable and idempotent: pass/fail verdicts are kept, judge errors are asked again
    n_before = len(sim.requests())
    again = judge_folder(folder.root, opts(JUDGE_A))
    assert (again.skipped, again.judged, again.errors) == (4, 2, 2)
    assert len(sim.requests()) - n_before == 3  # malformed twice (2 calls) + the refusal (1 call)


def test_the_judge_is_blind_to_cell_layers_and_paths(tmp_path: Path, sim: SimServer) -> None:
    cwd = str(tmp_path / "ablate-envs" / "20260101-run" / "s03" / "wt" / "greeter")
    home = str(tmp_path / "ablate-envs" / "20260101-run" / "s03" / "home")
    config_dir = home + "/.claude"
    user_repo, user_config = "/home/alice/src/greeter", "/home/alice/.claude"
    answer = (
        f"ANSWER-AA I edited {cwd}/src/billing.py after reading {config_dir}/CLAUDE.md; "
        f"see also {user_repo}/README.md and {user_config}/lessons.md."
    )
    folder = make_run(
        tmp_path / "run-blind",
        [Item("blind-task", "C7", 0, answer, cwd=cwd)],
        cell_env={"C7": {"HOME": home, "CLAUDE_CONFIG_DIR": config_dir}},
        stripped={"C7": ["runbooks"]},
        setup={"config_dir": user_config, "repo": user_repo},
    )
    judge_folder(folder.root, opts(JUDGE_A, JUDGE_B))
    bodies = [str(r.body) for r in sim.requests() if r.is_messages]
    assert len(bodies) == 2
    for body in bodies:
        assert "Task blind-task: change the billing code." in body  # the prompt, the rubric, the answer
        assert "Names the rounding risk" in body and "ANSWER-AA" in body
        assert "<checkout>/src/billing.py" in body
        for leak in (
            "C7",
            "runbooks",
            "s03",
            "ablate-envs",
            cwd,
            home,
            config_dir,
            user_repo,
            user_config,
            "alice",
            str(folder.root),
            "blind-task__C7",
            "claude-sonnet-4-6",
        ):
            assert leak not in body, leak


def test_two_judges_with_a_scripted_disagreement_give_the_worked_example_kappa(
    tmp_path: Path, sim: SimServer
) -> None:
    # Wikipedia's worked example of Cohen's kappa (50 items: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no ->
    # p_o = 0.7, p_e = 0.5, kappa = 0.4), scaled down by five: 4 / 1 / 2 / 3.
    kinds = ["AA"] * 4 + ["AB"] * 1 + ["BA"] * 2 + ["FF"] * 3
    items = [Item("t1", f"C{i}", 0, f"ANSWER-{k} #{i}") for i, k in enumerate(kinds)]
    folder = make_run(tmp_path / "run-kappa", items)
    summary = judge_folder(folder.root, opts(JUDGE_A, JUDGE_B, jobs=4))
    assert summary.by_judge == {
        JUDGE_A: {"pass": 5, "fail": 5, "error": 0},
        JUDGE_B: {"pass": 6, "fail": 4, "error": 0},
    }
    [ag] = agreement(folder.root, [JUDGE_A, JUDGE_B])
    assert (ag.n, ag.percent) == (10, 70.0)
    assert ag.kappa == pytest.approx(0.4)


def test_a_judge_that_is_the_model_under_test_is_refused_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="model under test"):
        check_judges("claude-sonnet-4-6", ["claude-sonnet-4-6-20260101"], allow_same=False)
    check_judges("claude-sonnet-4-6", ["claude-sonnet-4-6"], allow_same=True)
    with pytest.raises(UsageError, match="twice"):
        check_judges("m", [JUDGE_A, JUDGE_A], allow_same=False)


def test_the_budget_stops_launching_and_leaves_the_rest_pending(tmp_path: Path, sim: SimServer) -> None:
    items = [Item("t1", f"C{i}", 0, f"ANSWER-AA {i}") for i in range(4)]
    folder = make_run(tmp_path / "run-budget", items)
    summary = judge_folder(folder.root, opts(JUDGE_A, jobs=1, budget_usd=1e-9))
    assert (summary.outcome, summary.judged, summary.pending) == ("budget", 1, 3)
    rest = judge_folder(folder.root, opts(JUDGE_A, jobs=2))
    assert (rest.outcome, rest.skipped, rest.judged) == ("finished", 1, 3)


def test_a_budget_needs_a_priced_judge(tmp_path: Path) -> None:
    folder = make_run(tmp_path / "run-unpriced", [Item("t1", "C0", 0, "ANSWER-AA")])
    with pytest.raises(UsageError, match="cannot be enforced"):
        judge_folder(folder.root, opts("judge-without-a-price", budget_usd=1.0))


def test_split_selects_the_tasks_judged(tmp_path: Path, sim: SimServer) -> None:
    items = [Item("dev-task", "C0", 0, "ANSWER-AA"), Item("held-task", "C0", 0, "ANSWER-AA")]
    folder = make_run(tmp_path / "run-split", items, splits={"held-task": "holdout"})
    summary = judge_folder(folder.root, opts(JUDGE_A, split="holdout"))
    assert summary.judged == 1
    assert read_grade(folder, "held-task__C0__r00") is not None
    assert read_grade(folder, "dev-task__C0__r00") is None


def test_parse_verdict_accepts_only_one_well_formed_object() -> None:
    assert parse_verdict('{"verdict": "pass", "reason": "ok"}') == ("pass", "ok")
    assert parse_verdict('```json\n{"verdict": "fail", "reason": "no"}\n```') == ("fail", "no")
    for bad in (
        "pass",
        '{"verdict": "pass"}',
        '{"verdict": "PASS", "reason": "x"}',
        '{"verdict": "pass", "reason": "x", "extra": 1}',
        "[]",
    ):
        assert parse_verdict(bad) is None


def test_scrub_replaces_the_longest_path_first() -> None:
    text = "/w/ablate-envs/r/s00/wt/repo/a.py and /w/ablate-envs/r/s00/home/x and /u/repo"
    assert scrub(text, ["/w/ablate-envs/r/s00/wt/repo", "/w/ablate-envs/r/s00", "/u/repo"]) == (
        "<checkout>/a.py and <path>/home/x and <path>"
    )


def test_ablate_judge_cli_prints_agreement_and_maps_errors_to_exit_codes(
    tmp_path: Path, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:

    kinds = ["AA"] * 4 + ["AB"] * 1 + ["BA"] * 2 + ["FF"] * 3
    folder = make_run(
        tmp_path / "run-cli", [Item("t1", f"C{i}", 0, f"ANSWER-{k} #{i}") for i, k in enumerate(kinds)]
    )
    res = invoke(["judge", str(folder.root), "--judge-models", f"{JUDGE_A},{JUDGE_B}", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (doc["judged"], doc["agreement"][0]["percent"]) == (20, 70.0)
    assert doc["agreement"][0]["kappa"] == pytest.approx(0.4)
    same = invoke(["judge", str(folder.root), "--judge-model", "claude-sonnet-4-6"])
    assert same.exit_code == 2 and "model under test" in same.stderr
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    (folder.root / "grades").rename(tmp_path / "old-grades")
    nokey = invoke(["judge", str(folder.root), "--judge-model", JUDGE_A])
    assert nokey.exit_code == 2 and "ANTHROPIC_API_KEY" in nokey.stderr


def test_recheck_rebuilds_the_checks_from_the_saved_diff(tmp_path: Path) -> None:
    from ablate.grade.recheck import recheck_folder

    task = (
        'id = "t1"\nprompt = "p"\n[files]\n"VERSION" = "1.4.0\\n"\n'
        '[[checks]]\nkind = "file_unchanged"\nfile = "VERSION"\n'
        '[[checks]]\nkind = "file_contains"\nfile = "NOTES.md"\ntext = "greet"\n'
    )
    folder = make_run(
        tmp_path / "run", [Item("t1", "C0", 0, "a"), Item("t1", "C1", 0, "b")], task_text={"t1": task}
    )
    diffs = folder.root / "diffs"
    diffs.mkdir()
    (diffs / "t1__C0__r00.a1.patch").write_text(
        "diff --git a/NOTES.md b/NOTES.md\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.md\n"
        "@@ -0,0 +1 @@\n+- greet() greets.\n"
    )
    summary = recheck_folder(folder.root)
    assert (summary.rechecked, summary.changed, summary.no_diff) == (1, 0, 1)
    grade = read_grade(folder, "t1__C0__r00")
    assert grade is not None
    checks = grade.checks_for(1)
    assert checks is not None and checks.source == "diff"
    assert [r.passed for r in checks.results] == [True, True]


def test_ablate_judge_checks_dev_against_holdout_task_by_task(tmp_path: Path, sim: SimServer) -> None:
    """C2's judge-pass rate gains on every dev task and loses on every holdout task: judge warns."""

    tasks = ["d1", "d2", "d3", "h1", "h2", "h3"]
    items = [
        Item(t, c, 0, f"ANSWER-{'AA' if (c == 'C2') == t.startswith('d') else 'FF'} {t} {c}")
        for t in tasks
        for c in ("C0", "C2")
    ]
    folder = make_run(
        tmp_path / "run-split",
        items,
        splits={t: "holdout" for t in tasks if t.startswith("h")},
        stripped={"C2": ["axioms"]},
    )
    res = invoke(["judge", str(folder.root), "--judge-model", JUDGE_A, "--json"])
    assert res.exit_code == 0, res.output
    [finding] = json.loads(res.stdout)["holdout"]
    assert (finding["judge"], finding["cell"], finding["kind"]) == (JUDGE_A, "C2", "overfitting")
    assert finding["p"] == pytest.approx(1 / 20)  # 3 + 3 task means: the most extreme of 20 splits
    text = invoke(["judge", str(folder.root), "--judge-model", JUDGE_A])
    assert "WARNING overfitting? C2 judge_pass: +100 pts on dev, -100 pts on holdout" in text.stdout


def test_an_endpoint_that_drops_connections_is_asked_again_never_an_error_verdict(
    tmp_path: Path, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection the judge endpoint drops (a reset, a loaded server) is paused and asked again like a rate
    limit: the SDK's own retries are off, and a verdict of "error" for it would be a judge's error that was
    only the network's."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    dropped: list[int] = []

    def drop_two(conn: socket.socket) -> None:
        if len(dropped) < 2:  # the first two connections: hung up on before any answer
            dropped.append(1)
            conn.close()
        else:
            carry(conn, port_of(sim.base_url))

    serve(listener, drop_two)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        folder = make_run(tmp_path / "run", [Item("t1", "C0", 0, "ANSWER-AA fine")])
        summary = judge_folder(folder.root, opts(JUDGE_A))
    finally:
        listener.close()
    assert len(dropped) == 2
    assert (summary.judged, summary.errors, summary.rate_limited) == (1, 0, 2)
    grade = read_grade(folder, "t1__C0__r00")
    v = grade.verdict(JUDGE_A, 1) if grade is not None else None
    assert v is not None and (v.verdict, v.tries) == ("pass", 1)

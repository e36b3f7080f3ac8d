"""`ablate tasks suggest`: drafts from a hand-written history (three sessions in two groups of used layers),
pitfalls suggested from a tool error and a correction, and the `draft = true` that `run` refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.errors import SpecError
from ablate.core.slug import slug
from ablate.setup.tasks import load_task
from ablate.setup.taskset import load_tasks
from tests.helpers_cli import invoke, make_repo


def _session(sid: str, repo: Path, day: str, prompt: str, steps: list[dict[str, Any]]) -> bytes:
    common = {"sessionId": sid, "cwd": str(repo), "version": "2.1.332", "isSidechain": False}
    recs: list[dict[str, Any]] = [
        {
            **common,
            "type": "user",
            "timestamp": f"{day}T10:00:00Z",
            "message": {"role": "user", "content": prompt},
        }
    ]
    for i, step in enumerate(steps):
        recs.append({**common, "timestamp": f"{day}T10:00:{i + 1:02d}Z", **step})
    return b"".join(orjson.dumps(r) + b"\n" for r in recs)


def _call(uid: str, name: str, inp: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "message": {"id": f"m{uid}", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [{"type": "tool_use", "id": uid, "name": name, "input": inp}]}}  # fmt: skip


def _result(uid: str, text: str, error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": uid, "content": text, "is_error": error}
    return {"type": "user", "message": {"role": "user", "content": [block]}}


def _say(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}}


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, Path]:
    repo = make_repo(tmp_path / "repo", {"CLAUDE.md": "# Rules\n", "app.py": "x = 1\n"}).resolve()
    cfg = tmp_path / "cfg"
    project = cfg / "projects" / slug(str(repo))
    project.mkdir(parents=True)
    read_rules = _call("r1", "Read", {"file_path": str(repo / "CLAUDE.md")})
    sessions = {
        "a1": ("2026-11-01", "Add a farewell() next to greet()", [read_rules, _result("r1", "# Rules")]),
        "a2": (
            "2026-11-02",
            "Fix the flaky test in test_app.py\nIt fails one run in ten.",
            [
                {**read_rules, "message": {**read_rules["message"], "content": [{**read_rules["message"]["content"][0], "id": "r2"}]}},
                _result("r2", "# Rules"),
                _call("b1", "Bash", {"command": "npm test"}),
                _result("b1", "Exit code 127\nnpm: command not found", error=True),
                _say("no, use pytest instead of npm"),
                _say("thanks"),
            ],
        ),
        "b1": ("2026-11-03", "Say hi", []),
        "c1": ("2026-11-04", "<command-name>/clear</command-name>", []),
    }  # fmt: skip
    for n, (day, prompt, steps) in enumerate(sessions.values()):
        full = f"00000000-0000-4000-8000-00000000000{n}"
        (project / f"{full}.jsonl").write_bytes(_session(full, repo, day, prompt, steps))
    return cfg, repo


def test_drafts_are_written_for_review_and_refused_until_reviewed(
    history: tuple[Path, Path], tmp_path: Path
) -> None:
    cfg, repo = history
    out = tmp_path / "drafts"
    args = ["tasks", "suggest", "--config-dir", str(cfg), "--repo", str(repo), "--out", str(out), "--json"]
    res = invoke(args)
    assert res.exit_code == 0, res.output
    drafts = orjson.loads(res.output)["drafts"]
    # two groups by layers used: {repo-claude-md} (two sessions: the latest drafted) and {} (one session)
    assert [(d["id"], d["pitfalls"]) for d in drafts] == [
        ("fix-the-flaky-test-in-test-app-py", 2),
        ("say-hi", 0),
    ]
    assert drafts[0]["why"] == "2 of 3 sessions used the same layers (repo-claude-md); this is the latest"
    first = Path(drafts[0]["file"])
    text = first.read_text()
    head = (repo / ".git").exists() and text.split("Repository HEAD when drafted: ")[1][:40]
    assert head and len(head) == 40
    task = load_task(first)
    assert task.spec.draft is True
    assert task.prompt == "Fix the flaky test in test_app.py\nIt fails one run in ten."
    assert [(p.id, p.pattern, p.scope) for p in task.spec.pitfalls] == [
        ("bash-error", r"Exit\ code\ 127", "text+tools"),
        ("correction-1", r"use\ pytest\ instead", "text+tools"),
    ]
    assert "npm: command not found" not in task.spec.pitfalls[0].description  # only the first line
    assert "no, use pytest instead of npm" in task.spec.pitfalls[1].description
    # never run unreviewed: refused with the file and the field named, exit 2 through the CLI
    with pytest.raises(SpecError) as exc:
        load_tasks([out])
    assert {p.field for p in exc.value.problems} == {"draft"}
    ran = invoke(["plan", "--tasks", str(first)])
    assert ran.exit_code == 2 and "ablate tasks suggest" in ran.output
    first.write_text(text.replace("draft = true\n", ""))
    assert load_task(first).spec.draft is False
    # an existing draft is not replaced without --force
    again = invoke(args)
    assert again.exit_code == 2 and "exists" in again.output
    assert invoke([*args, "--force"]).exit_code == 0

"""``ablate usage`` over a history written by the real CLI against ablate.sim, plus junk files.

Four real sessions (one invokes a skill, one Reads a runbook, one `cat`s a decision record through Bash,
one does neither and ends with a torn line), one hand-written session in an older transcript format, a
0-byte file and a junk ``.jsonl``: every field of the report is checked for exact counts, and the config
dir's tree is unchanged by the run.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.core.slug import slug
from ablate.folder.layout import ManifestCell, SetupInfo
from ablate.mine.suggest import key_facts
from ablate.mine.usage import Scope, provenance_for, usage_report
from ablate.sim import SimServer, script_from_data
from tests.conftest import claude_bin
from tests.helpers_cli import invoke, make_repo, run_claude, write_skill

pytestmark = pytest.mark.e2e


def _done(marker: str, turn0: dict[str, Any]) -> list[dict[str, Any]]:
    base = {"where": "prompt", "contains": [marker]}
    return [
        {**base, "name": f"{marker}-0", "turn": 0, **turn0},
        {**base, "name": f"{marker}-done", "turn": {"min": 1}, "text": f"{marker} done."},
    ]


SCRIPT = {
    "rules": [
        *_done("USAGE-SKILL", {"tool_use": [{"name": "Skill", "input": {"skill": "sim-notes"}}]}),
        *_done(
            "USAGE-RUNBOOK",
            {"tool_use": [{"name": "Read", "input": {"file_path": "${cwd}/docs/runbooks/deploy.md"}}]},
        ),
        *_done(
            "USAGE-DECISION",
            {"tool_use": [{"name": "Bash", "input": {"command": "cat docs/decisions/0001-db.md"}}]},
        ),
    ]
}
PROMPTS = {
    "skill": "USAGE-SKILL write notes about this repo",
    "runbook": "USAGE-RUNBOOK how do we deploy?\nsecond line",
    "decision": "USAGE-DECISION why postgres?",
    "none": "USAGE-NONE say hi",
}
OLD_SID = "00000000-0000-4000-8000-00000000001d"


@dataclass(frozen=True)
class History:
    config_dir: Path
    repo: Path
    project: Path
    sessions: dict[str, str]  # kind -> session id
    started: dict[str, str]  # kind -> first prompt timestamp


def _old_session(repo: Path) -> bytes:
    """A transcript as an older CLI wrote it: no attachments, no cost-state, an older version string."""
    common = {"sessionId": OLD_SID, "cwd": str(repo), "version": "1.0.30", "isSidechain": False}
    recs = [
        {**common, "type": "user", "timestamp": "2025-01-02T10:00:00Z",
         "message": {"role": "user", "content": "old-style prompt: check the deploy runbook"}},
        {**common, "type": "assistant", "timestamp": "2025-01-02T10:00:01Z",
         "message": {"id": "msg_old1", "model": "claude-3-7-sonnet", "role": "assistant",
                     "content": [{"type": "tool_use", "id": "toolu_old1", "name": "Read",
                                  "input": {"file_path": str(repo / "docs/runbooks/deploy.md")}}],
                     "usage": {"input_tokens": 10, "output_tokens": 2}}},
        {**common, "type": "user", "timestamp": "2025-01-02T10:00:02Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_old1",
                                                  "content": "steps"}]}},
        {**common, "type": "assistant", "timestamp": "2025-01-02T10:00:03Z",
         "message": {"id": "msg_old2", "model": "claude-3-7-sonnet", "role": "assistant",
                     "content": [{"type": "text", "text": "Done."}], "usage": {"input_tokens": 12, "output_tokens": 1}}},
    ]  # fmt: skip
    return b"".join(orjson.dumps(r) + b"\n" for r in recs)


@pytest.fixture(scope="session")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    claude = claude_bin()
    if claude is None:
        if os.environ.get("CI"):
            pytest.fail("the pinned claude CLI is not installed; run `make claude`")
        pytest.skip("claude CLI not installed (run `make claude`)")
    root = tmp_path_factory.mktemp("usage")
    home = root / "home"
    home.mkdir()
    repo = make_repo(
        root / "repo",
        {
            "README.md": "# Demo\n",
            "CLAUDE.md": "# Repo rules\nKeep it small.\n",
            "docs/runbooks/deploy.md": "# Deploy\n1. make release\n",
            "docs/decisions/0001-db.md": "# 1. Postgres\nWe chose postgres.\n",
        },
    ).resolve()
    cfg = root / "cfg"
    cfg.mkdir()
    (cfg / "CLAUDE.md").write_text("# Global rules\n@lessons.md\n")
    (cfg / "lessons.md").write_text("# Lessons\nNever force-push.\n")
    write_skill(
        cfg, "sim-notes", "Write short notes about the repository.", "SIM-SKILL-BODY: one line per file."
    )
    sessions: dict[str, str] = {}
    with SimServer(script_from_data(SCRIPT), log_path=root / "requests.jsonl") as sim:
        for kind, prompt in PROMPTS.items():
            run = run_claude(claude, prompt, cwd=repo, home=home, config_dir=cfg, base_url=sim.base_url)
            assert run.returncode == 0 and run.transcript() is not None, run.stdout + run.stderr
            sessions[kind] = run.session_id
    project = cfg / "projects" / slug(str(repo))
    started = {}
    for kind, sid in sessions.items():
        recs = [orjson.loads(ln) for ln in (project / f"{sid}.jsonl").read_bytes().splitlines()]
        started[kind] = next(r["timestamp"] for r in recs if r.get("type") == "user")
    with (project / f"{sessions['none']}.jsonl").open("ab") as fh:
        fh.write(b'{"type":"user","message":{"role":"us')  # a torn last line (a session being written)
    (project / f"{OLD_SID}.jsonl").write_bytes(_old_session(repo))
    (project / f"{uuid.uuid4()}.jsonl").write_bytes(b"")  # 0 bytes
    (project / "notes.jsonl").write_bytes(b"not json\n{also not\n")  # junk
    return History(cfg, repo, project, sessions, started)


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + [f"{d}/" for d in dirnames]:
            full = Path(dirpath) / name.rstrip("/")
            st = full.lstat()
            h.update(f"{full.relative_to(root)}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
            if full.is_file() and not full.is_symlink():
                h.update(hashlib.sha256(full.read_bytes()).digest())
    return h.hexdigest()


def _layer(doc: dict[str, Any], layer_id: str) -> dict[str, Any]:
    return next(r for r in doc["layers"] if r["id"] == layer_id)


def test_usage_counts_every_field_exactly_and_writes_nothing(history: History) -> None:
    before = _tree_hash(history.config_dir)
    res = invoke(
        [
            "usage",
            "--config-dir",
            str(history.config_dir),
            "--repo",
            str(history.repo),
            "--json",
            "--jobs",
            "2",
        ],
    )
    assert res.exit_code == 0, res.output
    assert _tree_hash(history.config_dir) == before
    doc = orjson.loads(res.stdout)
    assert set(doc) == {"schema_version", "sessions", "projects", "window", "layers", "skills", "never_used"}
    assert doc["schema_version"] == 1
    assert doc["sessions"] == {
        "count": 5, "files": 7, "empty_files": 1, "junk_files": 1, "unreadable_files": 0, "other_repos": 0,
        "before_window": 0, "beyond_last": 0, "malformed_lines": 2, "truncated_lines": 1,
        "versions": {"2.1.332": 4, "1.0.30": 1},
    }  # fmt: skip
    assert doc["projects"] == [{"project": history.project.name, "cwd": str(history.repo), "sessions": 5}]
    w = doc["window"]
    assert (w["repo"], w["since"], w["last"]) == (str(history.repo), None, None)
    assert w["first"] == "2025-01-02T10:00:00Z" and w["latest"] == max(history.started.values())
    rows = {r["id"]: r for r in doc["layers"]}
    expect = {  # id: (on_disk, loaded_sessions, used_sessions)
        "user-claude-md": (True, 4, 0),
        "lessons": (True, 4, 0),  # @imported by CLAUDE.md: loaded, never read
        "skills": (True, 4, 1),
        "runbooks": (True, 0, 2),  # the real Read and the old session's Read
        "decisions": (True, 0, 1),  # `cat docs/decisions/0001-db.md` through Bash
        "repo-claude-md": (True, 4, 0),
        "auto-memory": (False, 0, 0),  # the CLI creates an empty memory/ folder: nothing on disk
        "hooks": (False, 0, 0),
        "output-styles": (False, None, 0),  # a transcript records no output-style load
    }
    for layer_id, (on, loaded, used) in expect.items():
        r = rows[layer_id]
        assert (r["on_disk"], r["loaded_sessions"], r["used_sessions"]) == (on, loaded, used), layer_id
    others = set(rows) - set(expect)
    assert all(rows[i]["used_sessions"] == 0 and rows[i]["on_disk"] is False for i in others)
    assert rows["runbooks"]["uses"] == [
        {"kind": "read", "what": "docs/runbooks/deploy.md", "count": 2, "sessions": 2}
    ]
    assert rows["decisions"]["uses"] == [
        {"kind": "read", "what": "docs/decisions/0001-db.md", "count": 1, "sessions": 1}
    ]
    assert rows["skills"]["uses"] == [{"kind": "skill", "what": "sim-notes", "count": 1, "sessions": 1}]
    assert doc["skills"] == [
        {"name": "sim-notes", "layer": "skills", "listed_sessions": 4, "invoked": 1, "invoked_sessions": 1,
         "outcomes": {"ok": 1}, "last_used": history.started["skill"]},
    ]  # fmt: skip
    assert [(n["id"], n["loaded_sessions"], n["no_op"]) for n in doc["never_used"]] == [
        ("user-claude-md", 4, False),
        ("lessons", 4, False),
        ("repo-claude-md", 4, False),
    ]
    assert key_facts(doc) == [
        "user-claude-md: loaded in 4 of 5 sessions, never the subject of a read or a reference",
        "skill sim-notes: invoked in 1 of the 4 sessions it was listed in",
        "runbooks: used in 2 of 5 sessions, most often docs/runbooks/deploy.md (read x2)",
    ]
    assert "lessons: loaded in 4 of 5 sessions, never the subject of a read or a reference" in key_facts(
        doc, 4
    )


def test_usage_suggest_table_since_and_provenance(history: History) -> None:
    args = ["--config-dir", str(history.config_dir), "--repo", str(history.repo), "--jobs", "1"]
    before = _tree_hash(history.config_dir)
    res = invoke(["usage", *args, "--suggest", "--json"])
    assert res.exit_code == 0, res.output
    sug = orjson.loads(res.stdout)["suggest"]
    assert [c["strip"] for c in sug["cells"]] == [
        "runbooks", "skills", "decisions", "lessons", "repo-claude-md", "user-claude-md",
    ]  # fmt: skip
    assert {t["session_id"]: (t["layer"], t["first_prompt"]) for t in sug["tasks"]} == {
        history.sessions["runbook"]: ("runbooks", "USAGE-RUNBOOK how do we deploy?"),
        OLD_SID: ("runbooks", "old-style prompt: check the deploy runbook"),
        history.sessions["decision"]: ("decisions", "USAGE-DECISION why postgres?"),
        history.sessions["skill"]: ("skills", "USAGE-SKILL write notes about this repo"),
    }
    table = invoke(["usage", *args, "--suggest"])
    assert table.exit_code == 0, table.output
    assert "runbooks" in table.stdout and "docs/runbooks/deploy.md (read x2)" in table.stdout
    assert "task candidates" in table.stdout and OLD_SID in table.stdout
    recent = invoke(["usage", *args, "--since", "2026-01-01", "--json"])
    doc = orjson.loads(recent.stdout)
    assert doc["sessions"]["count"] == 4 and doc["sessions"]["before_window"] == 1
    assert _layer(doc, "runbooks")["used_sessions"] == 1
    lines = provenance_for(["runbooks", "lessons"], history.config_dir, repo=history.repo, last=500)
    assert [ln["sentence"] for ln in lines] == [
        "runbooks: used in 40% of your last 5 sessions (2 of 5).",
        "lessons: used in 0% of your last 5 sessions (0 of 5), loaded in 4.",
    ]
    assert _tree_hash(history.config_dir) == before


def test_usage_all_projects_and_bad_inputs(history: History, tmp_path: Path) -> None:
    doc = usage_report(Scope(history.config_dir, None)).doc
    assert doc["sessions"]["count"] == 5 and doc["window"]["repo"] is None
    assert _layer(doc, "runbooks")["on_disk"] is None  # no repo to look in
    assert _layer(doc, "runbooks")["used_sessions"] == 2
    other = usage_report(Scope(history.config_dir, tmp_path)).doc
    assert other["sessions"]["count"] == 0 and other["projects"] == []
    both = invoke(["usage", "--config-dir", str(history.config_dir), "--repo", ".", "--all-projects"])
    assert both.exit_code == 2 and "exclude each other" in both.output
    missing = invoke(["usage", "--config-dir", str(tmp_path / "nope"), "--all-projects"])
    assert missing.exit_code == 2 and "config dir does not exist" in missing.output
    bad = invoke(["usage", "--config-dir", str(history.config_dir), "--all-projects", "--since", "soon"])
    assert bad.exit_code == 2 and "--since 'soon'" in bad.output


def test_report_provenance_section_from_a_run_folder(history: History, tmp_path: Path) -> None:
    from ablate.report.blocks import Document
    from ablate.report.context import Page
    from ablate.report.markdown import render_markdown
    from ablate.report.model import Provenance, Report
    from ablate.report.provenance import HEADING, provenance_block, render
    from tests.run_folder import new_manifest

    cells = [ManifestCell(id="C0", dirname="c00"), ManifestCell(id="C7", dirname="c07", stripped=["runbooks"]),
             ManifestCell(id="C8", dirname="c08", stripped=["decisions"])]  # fmt: skip
    manifest = new_manifest(
        cells=cells, setup=SetupInfo(repo=str(history.repo)), tasks=[], repeats=1, items=0
    )
    block = provenance_block(manifest, history.config_dir)
    assert block is not None and block["heading"] == HEADING and block["sessions"] == 5
    part: dict[str, Any] = {"provenance": Provenance.model_validate(block)}
    report = Report.model_construct(**part)
    md = render_markdown(Document("t", render(report, Page())))
    assert md.startswith(f"# t\n\n## {HEADING}\n")
    assert "- runbooks: used in 40% of your last 5 sessions (2 of 5)." in md
    assert "- decisions: used in 20% of your last 5 sessions (1 of 5)." in md
    assert provenance_block(manifest, tmp_path / "no-config") is None

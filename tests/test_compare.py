"""``ablate compare`` against ablate.sim: planted effects are recovered, null variants are draws, edits are caught.

The statistical tests use the ``sim`` and ``api`` executors (one request per item, no CLI start), with the
shipped script ``shadow/sim/compare-layout.toml``: the rule line RULE-UV is followed with probability 0.3
where it is (original), 0.6 at the end of the file (moved: position +30 points), 0.9 when it appears twice
(duplicated: repetition +30 points).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ablate.sim import SimServer
from tests.helpers_cli import invoke

REPO_ROOT = Path(__file__).resolve().parent.parent
LAYOUT_SCRIPT = REPO_ROOT / "shadow/sim/compare-layout.toml"

CLAUDE_MD = """# Project rules

Be brief.

## Tools

- RULE-UV: use uv for Python dependencies, never pip.

## Style

Write short sentences. Prefer plain words over jargon. Explain the why, not only the what.
Keep functions small and named for what they do. Test behaviour, not private attributes.
Keep the README current; every command has help text and an example that runs.
"""

POSITION = REPETITION = 0.3


def write_tasks(root: Path, n: int = 4, holdout: int = 1) -> Path:
    folder = root / "tasks"
    folder.mkdir()
    for i in range(n):
        split = "holdout" if i >= n - holdout else "dev"
        (folder / f"dep-{i}.toml").write_text(
            f'schema_version = 1\nid = "dep-{i}"\nsplit = "{split}"\n'
            f'prompt = "Add the requests library to project {i}."\n'
            '[[pitfalls]]\nid = "pip"\npattern = "pip install"\n'
        )
    return folder


def only_report(out: Path) -> dict[str, Any]:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return dict(orjson.loads((folder / "compare.json").read_bytes()))


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    md = tmp_path / "CLAUDE.md"
    md.write_text(CLAUDE_MD)
    return md, write_tasks(tmp_path)


def test_layout_decomposition_recovers_planted_position_and_repetition(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    md, tasks = setup
    out = tmp_path / "runs"
    code, stdout, stderr = invoke(
        [
            "compare",
            str(md),
            "--block",
            "Tools",
            "--tasks",
            str(tasks),
            "--executor",
            "sim",
            "--tier",
            "rigorous",
            "--seed",
            "3",
            "--out",
            str(out),
        ]
    )
    assert code == 0, stderr
    doc = only_report(out)
    assert [a["name"] for a in doc["arms"]] == ["original", "moved", "duplicated"]
    assert len({a["fingerprint"] for a in doc["arms"]}) == 3
    dec = doc["decomposition"]
    truth = {"position": POSITION, "repetition": REPETITION, "total": POSITION + REPETITION}
    for part, value in truth.items():
        e = dec[part]
        assert e["ci_low"] <= value <= e["ci_high"], (part, e)
        assert e["ci_low"] > 0 and e["real"], (part, e)
    assert doc["tier"] == "rigorous" and doc["repeats"] == 30
    assert doc["items"] == 3 * 4 * 30
    # every item got the bytes of its arm: the request's system prompt is the arm file, byte for byte
    folder = out / doc["compare_id"]
    check = doc["execution"]["request_check"]
    assert check["verified"] and check["requests"] == 360 and check["blocks"] == 120
    for a in doc["arms"]:
        assert (folder / "arms" / f"{a['name']}.md").read_bytes().count(b"RULE-UV") == (
            2 if a["name"] == "duplicated" else 1
        )
    assert "position:" in stdout and "repetition:" in stdout
    md_text = (folder / "compare.md").read_text()
    assert "position (moved − original)" in md_text and "rigorous tier can and cannot claim" in md_text
    # every dollar figure says where it comes from: the sim bills nothing
    assert "~$0.00 (the simulated endpoint: nothing is billed)" in stderr + stdout
    assert "spent $0.0000 (the simulated endpoint: nothing is billed)" in md_text


def test_null_variant_is_a_draw_and_not_better(setup: tuple[Path, Path], tmp_path: Path) -> None:
    md, tasks = setup
    reworded = tmp_path / "reworded.md"
    reworded.write_text(CLAUDE_MD.replace("Be brief.", "Be brief and clear."))
    out = tmp_path / "runs"
    code, stdout, stderr = invoke(
        [
            "compare",
            f"old={md}",
            f"new={reworded}",
            "--tasks",
            str(tasks),
            "--executor",
            "sim",
            "--tier",
            "rigorous",
            "--seed",
            "5",
            "--out",
            str(out),
        ]
    )
    assert code == 0, stderr
    doc = only_report(out)
    assert [(a["name"], a["fingerprint"] != doc["arms"][0]["fingerprint"]) for a in doc["arms"]] == [
        ("old", False),
        ("new", True),
    ]
    assert not any(c["real"] for c in doc["contrasts"])
    (verdict,) = doc["verdicts"]
    assert verdict["better"] is False
    assert "significant gain" in verdict["failed"]
    assert "new is NOT shown better than old" in stdout
    pooled = next(c for c in doc["contrasts"] if c["task"] is None)
    assert pooled["ci_low"] < 0 < pooled["ci_high"]
    assert set(pooled) >= {"a", "b", "metric", "task", "delta", "ci_low", "ci_high", "p", "p_adjusted"}


def test_in_place_edit_between_runs_is_caught_and_looks_are_counted(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    md, tasks = setup
    other = tmp_path / "v2.md"
    other.write_text(CLAUDE_MD + "\nRULE-UV again at the end.\n")
    out = tmp_path / "runs"
    args = [f"v1={md}", f"v2={other}", "--tasks", str(tasks), "--executor", "sim", "--out", str(out)]
    assert invoke(["compare", *args, "--seed", "1"])[0] == 0
    first = only_report(out)
    assert first["fingerprint_changes"] == []
    assert first["looks"]["earlier_same_tasks"] == 0
    other.write_text(CLAUDE_MD + "\nRULE-UV again, edited in place.\n")
    code, stdout, stderr = invoke(["compare", *args, "--seed", "2"])
    assert code == 0, stderr
    docs = sorted(
        (orjson.loads(p.read_bytes()) for p in out.glob("*/compare.json")), key=lambda d: d["started_at"]
    )
    second = next(d for d in docs if d["compare_id"] != first["compare_id"])
    (change,) = second["fingerprint_changes"]
    assert change["arm"] == "v2" and change["earlier_compare_id"] == first["compare_id"]
    assert change["earlier_fingerprint"] == first["arms"][1]["fingerprint"] != change["fingerprint"]
    assert "WARNING: v2" in stdout and "changed in place" in stdout
    assert second["looks"]["earlier_same_tasks"] == 1
    assert second["looks"]["holdout_uses"] == {"dep-3": 1}
    assert "1 earlier compare run(s) looked at the same tasks" in second["looks"]["statement"]
    ledger = (out / "compare-ledger.jsonl").read_bytes().splitlines()
    assert len(ledger) == 2


def test_api_requests_differ_across_arms_only_in_the_system_prompt(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    md, tasks = setup
    out = tmp_path / "runs"
    with SimServer(LAYOUT_SCRIPT, seed=0) as sim:
        code, _stdout, stderr = invoke(
            [
                "compare",
                str(md),
                "--block",
                "Tools",
                "--tasks",
                str(tasks),
                "--executor",
                "api",
                "--yes",
                "--base-url",
                sim.base_url,
                "--seed",
                "9",
                "--out",
                str(out),
            ],
            env={"ANTHROPIC_API_KEY": "sk-test"},
        )
        captured = sim.messages_requests()
    assert code == 0, stderr
    doc = only_report(out)
    folder = out / doc["compare_id"]
    assert doc["execution"]["request_check"]["verified"] is True
    items = {
        o["session_id"]: o for o in map(orjson.loads, (folder / "items.jsonl").read_bytes().splitlines())
    }
    arm_bytes = {a["name"]: (folder / "arms" / f"{a['name']}.md").read_text() for a in doc["arms"]}
    assert len(captured) == len(items) == 3 * 4 * 5
    blocks: dict[tuple[str, int], dict[str, Any]] = {}
    for req in captured:
        item = items[req.headers["x-ablate-session-id"]]
        body = dict(req.body)
        assert body.pop("system") == arm_bytes[item["arm"]]
        assert "tools" not in body
        blocks.setdefault((item["task"], item["repeat"]), {})[item["arm"]] = body
    for by_arm in blocks.values():
        assert len(by_arm) == 3
        bodies = list(by_arm.values())
        assert all(b == bodies[0] for b in bodies)


def test_api_executor_refuses_to_spend_without_yes_and_no_terminal(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    md, tasks = setup
    code, _out, err = invoke(
        [
            "compare",
            str(md),
            "--block",
            "Tools",
            "--tasks",
            str(tasks),
            "--executor",
            "api",
            "--out",
            str(tmp_path / "r"),
        ],
        env={"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    assert code == 2
    assert "no terminal to ask on" in err and "--yes" in err
    assert "60 sessions, ~60 API calls" in err
    assert not (tmp_path / "r").exists()


def test_tier_floor_refuses_three_repeats_for_rigorous(setup: tuple[Path, Path], tmp_path: Path) -> None:
    md, tasks = setup
    code, _out, err = invoke(
        [
            "compare",
            str(md),
            "--block",
            "Tools",
            "--tasks",
            str(tasks),
            "--executor",
            "sim",
            "--tier",
            "rigorous",
            "--repeats",
            "3",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2
    assert "--repeats 3: the rigorous tier needs at least 30 repeats" in err
    assert "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_repeats_may_go_above_the_floor(setup: tuple[Path, Path], tmp_path: Path) -> None:
    md, tasks = setup
    out = tmp_path / "r"
    code, _o, err = invoke(
        [
            "compare",
            str(md),
            f"{md}@dup:Tools",
            "--tasks",
            str(tasks),
            "--executor",
            "sim",
            "--repeats",
            "6",
            "--out",
            str(out),
        ]
    )
    assert code == 0, err
    doc = only_report(out)
    assert (doc["tier"], doc["repeats"], doc["items"]) == ("smoke", 6, 2 * 4 * 6)
    assert [a["name"] for a in doc["arms"]] == ["CLAUDE", "CLAUDE-duplicated"]
    assert doc["decomposition"] is None


def test_bad_block_is_a_located_error(setup: tuple[Path, Path], tmp_path: Path) -> None:
    md, tasks = setup
    code, _o, err = invoke(
        [
            "compare",
            str(md),
            "--block",
            "Nope",
            "--tasks",
            str(tasks),
            "--executor",
            "sim",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2
    assert f"{md}: block Nope: no heading 'Nope'" in err


def test_claude_code_executor_refuses_a_folder_layer_before_anything_runs(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    md, tasks = setup
    code, _o, err = invoke(
        [
            "compare",
            str(md),
            f"{md}@dup:Tools",
            "--tasks",
            str(tasks),
            "--layer",
            "skills",
            "--yes",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2
    assert "--layer 'skills' is not a file layer" in err
    assert not (tmp_path / "r").exists()


def test_api_executor_without_a_key_is_refused_before_anything_is_written(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    md, tasks = setup
    code, _o, err = invoke(
        [
            "compare",
            str(md),
            f"{md}@dup:Tools",
            "--tasks",
            str(tasks),
            "--executor",
            "api",
            "--yes",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2
    assert "--executor api needs an API key" in err and "ANTHROPIC_API_KEY" in err
    assert not (tmp_path / "r").exists()


def test_a_task_that_sets_up_its_session_is_refused_by_the_one_request_executors(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """``append_system_prompt`` and ``env`` shape a Claude Code session; the api and sim executors send one
    request whose system prompt is the arm, so they would silently drop them: refused, nothing written."""
    md, tasks = setup
    (tasks / "with-env.toml").write_text(
        'schema_version = 1\nid = "with-env"\nprompt = "Say hi."\nappend_system_prompt = "Be brief."\n'
        '[env]\nEVAL_X = "1"\n'
    )
    args = [
        "compare",
        str(md),
        f"{md}@dup:Tools",
        "--tasks",
        str(tasks),
        "--yes",
        "--out",
        str(tmp_path / "r"),
    ]
    code, _o, err = invoke([*args, "--executor", "sim"])
    assert code == 2, err
    assert "task with-env: append_system_prompt and env cannot be applied by --executor sim" in err, err
    assert "--executor claude-code" in err
    assert not (tmp_path / "r").exists()

"""`ablate compare --executor claude-code` probes its arms' cells first, as `ablate run` does: an arm whose
cell the probe finds unfaithful stops the comparison before any session (exit 1, nothing spent, the files
named); --no-probe is recorded in the run folder and compare.md says so. The probe itself is replaced here
(tests/test_compare_e2e.py runs the real one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import ablate.probe.probe as probe_module
from ablate.core.resources import data_dir
from ablate.probe.probe import ProbeResult
from ablate.setup.examples import materialise_example
from tests.helpers_cli import invoke
from tests.test_probe_first import probe_result

RULES = "# Rules\n\n## Tools\n\n- RULE-UV: use uv, never pip.\n"


def _compare(tmp_path: Path, claude: Path, *extra: str) -> tuple[int, str, Path]:
    ex = materialise_example(tmp_path / "ex")
    md = tmp_path / "rules.md"
    md.write_text(RULES)
    args = ["compare", f"one={md}", f"two={md}@duplicate:Tools"]
    args += ["--tasks", str(data_dir("tasks") / "greet-exclaim.toml"), "--out", str(tmp_path / "runs")]
    args += ["--work-dir", str(tmp_path / "envs"), "--claude-bin", str(claude), "--seed", "3", "--yes"]
    args += ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), *extra]
    env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    res = invoke(args, env=env)
    folders = [p for p in (tmp_path / "runs").glob("compare-*") if p.is_dir()]
    assert len(folders) == 1, res.output
    return res.exit_code, res.output, folders[0]


def test_an_arm_whose_cell_is_unfaithful_stops_the_comparison_before_any_session(
    tmp_path: Path, claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probed: list[list[str]] = []

    def fake_probe(setup: Any, catalog: Any, cell_set: Any, *args: Any, **kwargs: Any) -> ProbeResult:
        probed.append([c.id for c in cell_set.cells])
        return probe_result({"one": "faithful", "two": "missing"})  # arm two's file did not reach the model

    monkeypatch.setattr(probe_module, "probe", fake_probe)
    code, out, folder = _compare(tmp_path, claude, "--probe")
    assert code == 1, out
    assert probed == [["one", "two"]]
    (run,) = (folder / "run").iterdir()
    assert "two missing" in out and "nothing was spent" in out
    assert str(run / "probe.json") in out and str(run) in out
    assert orjson.loads((run / "probe.json").read_bytes())["ok"] is False
    # no session ran, nothing was reported or counted as a look
    assert not any((run / "results").glob("*.json")) and not any((run / "stdout").glob("*"))
    assert not (folder / "compare.json").exists() and not (folder / "compare.md").exists()
    assert not (tmp_path / "runs" / "compare-ledger.jsonl").exists()


def test_no_probe_is_recorded_and_compare_md_says_so(
    tmp_path: Path, claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_probe(*args: Any, **kwargs: Any) -> ProbeResult:
        raise AssertionError("--no-probe ran the probe")

    monkeypatch.setattr(probe_module, "probe", no_probe)
    # --budget-usd 0: no session starts; what the comparison recorded before them is what matters here
    _code, out, folder = _compare(tmp_path, claude, "--no-probe", "--budget-usd", "0")
    assert "probe: skipped (--no-probe)" in out
    (run,) = (folder / "run").iterdir()
    data = orjson.loads((run / "probe.json").read_bytes())
    graders = data.pop("graders")  # the tasks' checks are vetted with or without the cell probe
    assert data == {"schema_version": 1, "ok": None, "skipped": "--no-probe"}
    assert graders["weak"] == [] and [t["id"] for t in graders["tasks"]] == ["greet-exclaim"]
    doc = orjson.loads((folder / "compare.json").read_bytes())
    record = doc["execution"]["probe"]
    assert record["ok"] is None and record["file"] == f"run/{run.name}/probe.json"
    md = (folder / "compare.md").read_text()
    assert "## Probe" in md and "Probe: not run (--no-probe)" in md and f"`run/{run.name}/probe.json`" in md


def test_probe_options_go_with_the_claude_code_executor(tmp_path: Path) -> None:
    md = tmp_path / "a.md"
    md.write_text(RULES)
    args = ["compare", f"{md}", f"{md}@duplicate:Tools", "--executor", "sim", "--no-probe"]
    res = invoke([*args, "--out", str(tmp_path / "runs")])
    assert res.exit_code == 2, res.output
    assert "--probe/--no-probe with --executor sim" in res.output
    assert not (tmp_path / "runs").exists()


def test_a_variant_cell_must_show_its_replacement_and_none_of_the_setups_own_file(tmp_path: Path) -> None:
    from ablate.probe.fingerprints import LayerPrint
    from ablate.probe.judge import _replaced_check
    from ablate.probe.observe import Observation

    own = LayerPrint(
        "user-claude-md", "text", ["- OWN-RULE: the setup's own line", "- SHARED-RULE: kept in both"]
    )
    arm = tmp_path / "two.md"
    arm.write_text("# Arm two\n\n- SHARED-RULE: kept in both\n- ARM-RULE: only the arm has it\n")

    def seen(text: str) -> Observation:
        return Observation("sid", 0, 1.0, None, request_text=text)

    ok = _replaced_check(own, arm, seen("- SHARED-RULE: kept in both\n- ARM-RULE: only the arm has it"), "")
    assert (ok.status, ok.observed) == ("ok", "present"), ok
    # the arm's file never reached the model (the setup's CLAUDE.md did not either)
    gone = _replaced_check(own, arm, seen("nothing of either"), "")
    assert gone.status == "missing" and "two.md" in gone.evidence
    # a line a session without any setup also sends proves nothing: with only that one seen, still missing
    generic = _replaced_check(own, arm, seen("- SHARED-RULE: kept in both"), "- SHARED-RULE: kept in both")
    assert generic.status == "missing", generic
    # the setup's own file reached the model beside the arm's: a leak (a line both hold is no evidence)
    leak = _replaced_check(
        own, arm, seen("- ARM-RULE: only the arm has it\n- OWN-RULE: the setup's own line"), ""
    )
    assert leak.status == "leak" and "OWN-RULE" in leak.evidence
    assert _replaced_check(own, tmp_path / "gone.md", seen(""), "").status == "missing"

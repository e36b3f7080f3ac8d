"""Probe first: a run whose probe finds an unfaithful cell is refused before any session (exit 1, nothing
spent, the files named); --no-probe is recorded and the report says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import ablate.probe.probe as probe_module
from ablate.core.resources import data_dir
from ablate.probe.judge import CellProbe
from ablate.probe.probe import ProbeResult
from ablate.report.isolation import probe_words
from ablate.run.probe_first import kept_probe, summary_line
from ablate.setup.examples import materialise_example
from tests.helpers_cli import invoke

CELLS = (
    'schema_version = 1\nname = "two"\ncontrol = "C0"\n'
    '[[cell]]\nid = "C0"\nstrip = []\n[[cell]]\nid = "C1"\nstrip = ["user-claude-md"]\n'
)


def probe_result(verdicts: dict[str, Any]) -> ProbeResult:
    """A probe's result with these cell verdicts (shadow fidelity equal, the real setup unchanged)."""
    return ProbeResult(
        cells=[CellProbe(cid, cid, v, "", {}, [], "sid", 0, 1.0) for cid, v in verdicts.items()],
        leaks=[],
        fidelity={"checked": True, "equal": True},
        fingerprints={},
        claude={"version": "2.1.332"},
        notes=[],
        real_setup_unchanged=True,
        duration_s=2.0,
    )


def _result(c1: str) -> ProbeResult:
    return probe_result({"C0": "faithful", "C1": c1})


def _run(tmp_path: Path, claude: Path, *extra: str) -> tuple[int, str, Path]:
    ex = materialise_example(tmp_path / "ex")
    cells = tmp_path / "cells.toml"
    cells.write_text(CELLS)
    args = ["run", "--tasks", str(data_dir("tasks") / "greet-exclaim.toml"), "--cells", str(cells)]
    args += [
        "--out",
        str(tmp_path / "runs"),
        "--work-dir",
        str(tmp_path / "envs"),
        "--claude-bin",
        str(claude),
    ]
    args += ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--report", "none", *extra]
    env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    res = invoke(args, env=env)
    (run_dir,) = (tmp_path / "runs").iterdir()
    return res.exit_code, res.output, run_dir


def test_an_unfaithful_cell_stops_the_run_before_any_session(
    tmp_path: Path, claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_probe(setup: Any, catalog: Any, cell_set: Any, *args: Any, **kwargs: Any) -> ProbeResult:
        calls.append([c.id for c in cell_set.cells])
        return _result("leak")

    monkeypatch.setattr(probe_module, "probe", fake_probe)
    code, out, run_dir = _run(tmp_path, claude, "--probe")
    assert code == 1, out
    assert calls == [["C0", "C1"]]
    assert "C1 leak" in out and "nothing was spent" in out and str(run_dir / "probe.json") in out
    assert not any((run_dir / "results").glob("*.json")) and not any((run_dir / "stdout").glob("*"))
    assert orjson.loads((run_dir / "probe.json").read_bytes())["ok"] is False


def test_no_probe_is_recorded_and_the_report_says_so(tmp_path: Path, claude: Path) -> None:
    # --budget-usd 0: no session starts; only what the run recorded before matters here
    _code, out, run_dir = _run(tmp_path, claude, "--no-probe", "--budget-usd", "0")
    assert "probe: skipped (--no-probe)" in out
    data = orjson.loads((run_dir / "probe.json").read_bytes())
    graders = data.pop("graders")  # the tasks' checks are vetted with or without the cell probe
    assert data == {"schema_version": 1, "ok": None, "skipped": "--no-probe"}
    assert graders["weak"] == [] and [t["id"] for t in graders["tasks"]] == ["greet-exclaim"]
    assert probe_words(data).startswith("Probe: not run (--no-probe): nothing in this folder proves")


def test_a_passing_probe_of_the_same_cells_is_kept_on_resume(tmp_path: Path) -> None:
    data = _result("faithful").to_json()
    (tmp_path / "probe.json").write_bytes(orjson.dumps(data))
    assert kept_probe(tmp_path, ["C1", "C0"]) == data
    assert kept_probe(tmp_path, ["C0", "C1", "C2"]) is None  # another cell set: probed again
    (tmp_path / "probe.json").write_bytes(orjson.dumps(_result("missing").to_json()))
    assert kept_probe(tmp_path, ["C0", "C1"]) is None  # a failed probe is never kept
    assert summary_line(data) == "OK: 2 cells (2 faithful), shadow fidelity equal, 2.0 s (1.0 s per cell)"


def test_no_probe_on_a_resume_keeps_a_passing_probe_and_never_erases_a_failing_one(tmp_path: Path) -> None:
    from ablate.run.probe_first import skip_probe

    passing = _result("faithful").to_json()
    (tmp_path / "probe.json").write_bytes(orjson.dumps(passing))
    skip_probe(tmp_path, "--no-probe")
    assert orjson.loads((tmp_path / "probe.json").read_bytes()) == passing
    failing = _result("leak").to_json()
    (tmp_path / "probe.json").write_bytes(orjson.dumps(failing))
    skip_probe(tmp_path, "--no-probe")
    data = orjson.loads((tmp_path / "probe.json").read_bytes())
    assert data["skipped"] == "--no-probe" and data["earlier"] == failing and data["ok"] is None

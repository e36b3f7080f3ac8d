"""The exact shadow-fidelity check over more than one pair of sessions.

A setup's own start-up need not be deterministic: a SessionStart hook that edits the repository races the
CLI's git snapshot, so two sessions of the *untouched* setup can differ in ``Status:`` (seen in CI: the
untouched session's snapshot had `` M README.md``, C0's had not). The probe then draws more pairs; C0 passes
only when one of its requests equals one of the untouched setup's byte for byte, so a difference ablate
made, which is in every pair, still fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import ablate.probe.probe as probe_mod
from ablate.probe.fingerprints import diff_summary, exact_fidelity, fidelity_lines
from ablate.probe.observe import Observation
from ablate.setup.cells import CellSet, ResolvedCell


def request(status: str, *, billing: str = "cc_version=1") -> dict[str, Any]:
    git = f"# gitStatus\nCurrent branch: master\n\nStatus:\n{status}\n\nRecent commits:\n3f6cfa6 empty"
    return {
        "system": [{"type": "text", "text": f"x-anthropic-billing-header: {billing}"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": git}]}],
        "model": "claude-sonnet",
    }


CLEAN, DIRTY = request("(clean)"), request(" M README.md")


def test_one_pair_equal_but_for_the_billing_header() -> None:
    fid = exact_fidelity("C0", [CLEAN], [request("(clean)", billing="cc_version=2")])
    assert fid["equal"] and fid["differences"] == []
    assert fid["sessions"] == {"control": 1, "untouched": 1}
    assert "matched" not in fid and fidelity_lines(fid) == []


def test_one_pair_that_differs_in_git_status_fails_and_says_where() -> None:
    fid = exact_fidelity("C0", [CLEAN], [DIRTY])
    assert not fid["equal"]
    assert any("M README.md" in d for d in fid["differences"])


def test_a_later_pair_that_matches_passes_and_the_unsteady_start_is_said() -> None:
    fid = exact_fidelity("C0", [CLEAN, DIRTY], [DIRTY, CLEAN])
    assert fid["equal"] and fid["differences"] == []
    assert fid["matched"] == {"control": 1, "untouched": 2}
    assert fid["untouched_steady"] is False
    assert any("M README.md" in d for d in fid["first_pair_differences"])
    (line,) = fidelity_lines(fid)
    assert "session 1 of the control equals session 2 of the untouched setup" in line
    assert "not deterministic" in line and "M README.md" in line


def test_a_difference_in_every_pair_still_fails() -> None:
    made = request("(clean)") | {"tools": [{"name": "Stray"}]}  # what ablate would add to every C0 session
    fid = exact_fidelity("C0", [made, made, made], [CLEAN, DIRTY, CLEAN])
    assert not fid["equal"] and fid["matched"] is None
    assert fid["differences"] and fid["untouched_steady"] is False
    (line,) = fidelity_lines(fid)
    assert "no session of the control equals any" in line


def test_differences_in_requests_of_real_size_are_found_and_shown_short() -> None:
    # a real first request is about 89 KB; difflib over all of it took minutes, so only the middle is diffed
    head, tail = "s" * 80_000, "t" * 8_000
    a, b = f"{head}Status:\n(clean)\n{tail}", f"{head}Status:\n M README.md\n(clean)\n{tail}"
    (only,) = diff_summary(a, b)
    assert only.startswith("insert:") and "M README.md" in only and len(only) < 400
    wide = diff_summary(head + "x" * 5000 + tail, head + "y" * 5000 + tail)  # past the diffed window
    assert len(wide) == 1 and wide[0].startswith("replace:") and len(wide[0]) < 2 * 320 + 40
    assert diff_summary(a, a) == []


# ---------------------------------------------------------------------------------------------------------
# The probe's loop that draws the pairs (sessions faked: the real CLI runs in the isolation e2e tests)


@dataclass
class FakeEnv:
    slot: int
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = Path("/repo")
    config_dir: Path = Path("/cfg")
    session_config_dir: Path = Path("/home/u/.claude")


class FakeViews:
    """A backend whose sessions see the real paths: each extra slot it builds, and what it says was written."""

    def __init__(self) -> None:
        self.slots: list[int] = []

    def build(self, cell: ResolvedCell, slot: int) -> FakeEnv:
        self.slots.append(slot)
        return FakeEnv(slot)

    def command(self, env: FakeEnv, argv: list[str]) -> list[str]:
        return argv

    def after_session(self, env: FakeEnv) -> dict[str, Any]:
        return {"slot": env.slot}


def _observation(req: dict[str, Any]) -> Observation:
    return Observation("sid", 0, 0.1, None, first_request=req)


def _draw(
    monkeypatch: pytest.MonkeyPatch, controls: list[dict[str, Any]], untouched: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any], FakeViews, list[str]]:
    c_iter, u_iter = iter(controls[1:]), iter(untouched[1:])
    views: list[str] = []

    def fake_untouched(*args: Any, name: str = "untouched") -> Observation:
        views.append(name)
        return _observation(next(u_iter))

    monkeypatch.setattr(probe_mod, "_untouched_at_real_paths", fake_untouched)
    monkeypatch.setattr(probe_mod, "_run", lambda *a, **k: _observation(next(c_iter)))
    ns = FakeViews()
    cells = tuple(
        ResolvedCell(id=f"C{n}", index=n, label="", stripped=(), empty_config=False) for n in range(4)
    )
    built = probe_mod._Cells(envs={"C0": FakeEnv(0)})
    built.backend = ns  # type: ignore[assignment]
    cell_set = CellSet("four", "", "C0", cells, Path("/cells.toml"))
    nothing: Any = None  # the sessions are faked: no setup, catalog or CLI is read
    run = probe_mod._Probe(nothing, nothing, cell_set, cells, nothing, Path("/w"), "namespace", built=built)
    run.base_url = "http://127.0.0.1:1"
    first = exact_fidelity("C0", controls[:1], untouched[:1])
    # the four cells had slots 0-3: the control's extra sessions get 4, 5, ...
    fid, writes = probe_mod._more_pairs(run, first, _observation(controls[0]), _observation(untouched[0]))
    assert built.more and len(built.more) == len(ns.slots)  # every extra slot is torn down with the cells
    return fid, writes, ns, views


def test_the_loop_stops_at_the_first_pair_that_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    fid, writes, ns, views = _draw(monkeypatch, [CLEAN, CLEAN, CLEAN], [DIRTY, CLEAN, CLEAN])
    assert fid["equal"] and fid["sessions"] == {"control": 2, "untouched": 2}
    assert ns.slots == [4] and views == ["untouched-2"]
    assert writes == {"C0#2": {"slot": 4}}


def test_the_loop_gives_up_after_its_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    made = request("(clean)") | {"tools": [{"name": "Stray"}]}
    fid, writes, ns, views = _draw(monkeypatch, [made] * 3, [CLEAN] * 3)
    assert not fid["equal"] and fid["sessions"] == {"control": 3, "untouched": 3}
    assert fid["untouched_steady"] is True
    assert ns.slots == [4, 5] and views == ["untouched-2", "untouched-3"]
    assert sorted(writes) == ["C0#2", "C0#3"]
    assert probe_mod.FIDELITY_PAIRS == 3


# ---------------------------------------------------------------------------------------------------------
# end to end: a setup whose own start-up differs from session to session, with the real CLI

#: A SessionStart hook whose output depends on how many sessions reached the capture endpoint before it:
#: the probe's first untouched session sees one (the baseline's) and says A; every later session says B.
#: So the first pair (untouched A, C0 B) differs, and C0's first request equals the second untouched one.
PHASE_HOOK = (
    'n=$(grep -o \'"session_id": *"[^"]*"\' {log} | sort -u | wc -l); '
    "if [ \"$n\" -le 1 ]; then echo 'start-up phase A'; else echo 'start-up phase B'; fi"
)


@pytest.mark.e2e
def test_a_setup_whose_start_up_differs_between_its_own_sessions(claude: Path, tmp_path: Path) -> None:
    import json
    import shutil
    import tempfile

    from ablate.core.claude import find_claude
    from ablate.isolate.detect import namespace_check
    from ablate.probe.probe import probe
    from ablate.setup.cells import load_cell_set
    from ablate.setup.examples import materialise_example
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import load_setup

    if not namespace_check().ok:
        pytest.skip("the exact check needs the namespace backend")
    ex = materialise_example(tmp_path / "ex")
    work = Path(tempfile.mkdtemp(prefix="ablate-pairs-", dir="/var/tmp"))  # seen from inside every view
    try:
        settings_path = ex.config_dir / "settings.json"
        settings = json.loads(settings_path.read_text())
        hook = {"type": "command", "command": PHASE_HOOK.format(log=work / "requests.jsonl")}
        settings["hooks"].setdefault("SessionStart", []).append({"hooks": [hook]})
        settings_path.write_text(json.dumps(settings, indent=2))
        setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
        cat = load_catalog()
        result = probe(
            setup, cat, load_cell_set("layered", cat), find_claude(claude), work=work, cell_ids=["C0"],
            isolation="namespace",
        )  # fmt: skip
        fid = result.fidelity
        assert fid["exact"] and fid["equal"], fid
        assert fid["sessions"] == {"control": 2, "untouched": 2}, fid
        assert fid["matched"] == {"control": 1, "untouched": 2}
        assert fid["untouched_steady"] is False
        assert any("phase A" in d for d in fid["first_pair_differences"]), fid["first_pair_differences"]
        assert any("not deterministic" in n and "session 1 of the control" in n for n in result.notes)
        assert result.real_setup_unchanged
    finally:
        shutil.rmtree(work, ignore_errors=True)

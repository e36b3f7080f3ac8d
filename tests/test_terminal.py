"""What the user sees on a terminal and in a log: the ranking's verdict words and trade-offs, the progress
lines without a terminal, simulated dollars, and the work folders a killed command leaves (swept)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ablate.cli.run_display import ProgressLines
from ablate.core.endpoint import is_simulated, money
from ablate.core.tempwork import OWNER, make_work_dir, owner_alive, remove_tree, sweep
from ablate.folder.layout import ManifestCell
from ablate.report.model import Comparison
from ablate.report.ranking import rank_entry
from ablate.run.session import session_uuid
from ablate.sim import SimServer
from tests.helpers_cli import invoke
from tests.user_support import make_user, world_readable_dir


def _cmp(metric: str, delta: float, real: bool, verdict: str, task: str | None = None) -> Comparison:
    return Comparison(
        cell="C1",
        control="C0",
        layers=["user-claude-md"],
        task=task,
        metric=metric,
        cell_value=None,
        control_value=None,
        delta=delta,
        ci_low=None,
        ci_high=None,
        p=0.001 if real else 0.5,
        p_adjusted=0.001 if real else 0.5,
        real=real,
        family="primary" if metric == "pitfall_free" and task is None else "secondary",
        verdict=verdict,
        n_pairs=16,
        method="test",
    )


CELL = ManifestCell(id="C1", dirname="c01", stripped=["user-claude-md"])


def test_a_real_primary_loss_helps_and_its_trade_offs_stand_beside_it() -> None:
    """Stripping the layer lost 44 pts of pitfall-free rate (real) and saved a turn and $0.0288 (real): the
    layer helps and costs a turn; it is not "mixed"."""
    comparisons = [
        _cmp("pitfall_free", -0.44, True, "helps"),
        _cmp("turns", -1.0, True, "hurts"),
        _cmp("cost_usd", -0.0288, True, "hurts"),
        _cmp("turns", -1.0, True, "hurts", task="greet-exclaim"),
    ]
    e = rank_entry(CELL, ["user-claude-md"], comparisons, "pitfall_free")
    assert (e.verdict, e.evidence) == ("helps", "primary")
    assert e.tradeoffs == ["costs 1.00 turns", "costs $0.0288"]
    # a real primary gain when stripped: the layer hurts, and what it buys is its trade-off
    e = rank_entry(
        CELL,
        ["user-claude-md"],
        [_cmp("pitfall_free", 0.3, True, "hurts"), _cmp("checks_passed", -0.2, True, "helps")],
        "pitfall_free",
    )
    assert (e.verdict, e.tradeoffs) == ("hurts", ["adds 20 pts checks-passed rate"])
    # without a real primary comparison the secondary ones still disagree: mixed, no trade-offs
    e = rank_entry(
        CELL,
        ["user-claude-md"],
        [
            _cmp("pitfall_free", -0.1, False, "draw"),
            _cmp("turns", -1.0, True, "hurts"),
            _cmp("cost_usd", 0.01, True, "helps"),
        ],
        "pitfall_free",
    )
    assert (e.verdict, e.evidence, e.tradeoffs) == ("mixed", "secondary", [])


def _p(done: int, total: int = 100, failed: int = 0, spend: float = 0.0, phase: str = "running") -> object:
    return SimpleNamespace(
        done=done, total=total, failed=failed, rate_limited=0, spend_usd=spend, phase=phase
    )


def test_progress_lines_at_each_tenth_and_every_30_seconds() -> None:
    lines = ProgressLines(simulated=True, every_s=30.0)
    assert lines.feed(_p(0), now=0.0) == "0/100 sessions, 0 failed, $0.00 (simulated), eta unknown"
    assert lines.feed(_p(5), now=10.0) is None  # not a tenth yet, and the last line is 10 s old
    assert lines.due(now=20.0) is None
    assert (
        lines.due(now=40.0) == "5/100 sessions, 0 failed, $0.00 (simulated), eta 13m"
    )  # 95 left at 8 s each
    said = lines.feed(_p(10, failed=1, spend=0.84), now=45.0)
    assert said == "10/100 sessions, 1 failed, $0.84 (simulated), eta 6m"
    assert lines.feed(_p(11, failed=1), now=46.0) is None
    assert lines.feed(_p(12, failed=1), now=76.0) is not None  # 31 s since the last line
    real = ProgressLines(simulated=False)
    assert real.feed(_p(100, spend=1.5), now=1.0) == "100/100 sessions, 0 failed, $1.50, eta 0s"


def test_dollars_from_the_simulated_endpoint_are_marked() -> None:
    with SimServer() as sim:
        assert is_simulated(sim.base_url)
    assert not is_simulated("https://api.anthropic.com")  # never asked: not loopback
    assert not is_simulated("http://127.0.0.1:9")  # nothing listens
    assert money(0.84, simulated=True) == "$0.84 (simulated)" and money(0.84, simulated=False) == "$0.84"


def test_session_ids_are_fixed_by_seed_item_and_attempt() -> None:
    a = session_uuid(7, "greet__C1__r00", 1)
    assert a == session_uuid(7, "greet__C1__r00", 1)
    assert len({a, session_uuid(8, "greet__C1__r00", 1), session_uuid(7, "greet__C1__r01", 1)}) == 3
    assert session_uuid(7, "greet__C1__r00", 2) != a


def test_a_killed_commands_work_folder_is_swept_by_the_next_command(tmp_path: Path) -> None:
    """A process that made a work folder (with an overlay-style mode-000 folder inside) dies by SIGKILL; the
    sweep removes its folder, and leaves a live process's folder and anything without an owner file."""
    code = (
        "import os, sys, signal\n"
        "from pathlib import Path\n"
        "from ablate.core.tempwork import make_work_dir\n"
        f"d = make_work_dir('ablate-probe-', Path({str(tmp_path)!r}))\n"
        "wk = d / 'untouched' / 'wk' / 'work'\n"
        "wk.mkdir(parents=True)\n"
        "(wk / 'f').write_text('x')\n"
        "os.chmod(wk, 0)\n"
        "os.chmod(wk.parent, 0)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False)
    assert proc.returncode == -9
    (dead,) = tmp_path.glob("ablate-probe-*")
    assert not owner_alive(dead)
    mine = make_work_dir("ablate-grade-", tmp_path)
    foreign = tmp_path / "ablate-grade-not-ours"
    foreign.mkdir()
    envs = tmp_path / "ablate-envs" / "20261201-run"
    envs.mkdir(parents=True)
    (envs / OWNER).write_text("999999999 1.000\n")  # no such process
    assert sorted(sweep(tmp_path)) == sorted([dead, envs])
    assert not dead.exists() and not (tmp_path / "ablate-envs").exists()
    assert mine.is_dir() and foreign.is_dir()


def test_an_ordinary_user_removes_the_mode_000_work_folder_an_overlay_leaves(tmp_path: Path) -> None:
    """The overlay's ``work/work`` folder is mode 000 and its owner's: rmtree alone fails there for an
    ordinary user (root is not refused). A forked child drops to an ordinary user and removes it."""
    with make_user() as user:
        if user is None:
            pytest.skip("no ordinary user can be had here")
        base = world_readable_dir("ablate-test-")  # pytest's own folders are private to root
        user.own(base)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit status
            try:
                if os.geteuid() != user.uid:
                    os.setgroups([])
                    os.setgid(user.gid)
                    os.setuid(user.uid)
                folder = make_work_dir("ablate-probe-", base)
                wk = folder / "untouched" / "wk" / "work"
                wk.mkdir(parents=True)
                (wk / "f").write_text("x")
                wk.chmod(0)
                wk.parent.chmod(0)
                remove_tree(folder)
                os._exit(0 if not folder.exists() else 1)
            except BaseException:
                os._exit(2)
        try:
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            assert list(base.iterdir()) == []
        finally:
            shutil.rmtree(base, ignore_errors=True)


def test_every_command_sweeps_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    dead = tmp_path / "ablate-grade-x"
    dead.mkdir()
    (dead / OWNER).write_text("999999999 1.000\n")
    legacy = tmp_path / f"ablate-cache-{os.getuid()}" / "checkouts"  # an earlier version's cache in TMPDIR
    legacy.mkdir(parents=True)
    kept = tmp_path / "ablate-cache-someone-else"
    kept.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    res = invoke(["layers", "--help"])
    assert res.exit_code == 0
    assert not dead.exists() and not legacy.parent.exists() and kept.exists()


def test_the_ranking_on_the_terminal_is_report_mds_first_table(tmp_path: Path) -> None:
    from ablate.report.sections import build_report
    from ablate.report.terminal import answer_text
    from tests.report_support import make_run
    from tests.test_report import CELLS, TASKS, planted

    run = make_run(tmp_path / "run", cells=CELLS, tasks=TASKS, repeats=16, outcome=planted)
    lines = answer_text(build_report(run))
    assert lines[0].split()[:5] == ["rank", "cell", "strips", "verdict", "evidence"]
    assert "real on" not in lines[0] and "Δ pitfall-free rate [CI]" in lines[0]
    rows = {line.split()[1]: line for line in lines[2:5]}
    assert set(rows) == {"C1", "C2", "C8"}  # C12 is a no-op: not ranked
    assert " helps" in rows["C8"] and " pts [" in rows["C8"] and " draw " in rows["C2"]
    # then one sentence per verdict, in the table's order, bold marks dropped
    assert [line.split()[0] for line in lines[5:]] == [line.split()[1] for line in lines[2:5]]
    assert lines[5].startswith(f"  {lines[2].split()[1]} (strips ") and "**" not in "".join(lines)


def test_removing_a_folder_never_changes_the_mode_of_the_folder_above(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder that refuses removal is opened to its owner and retried, but the folder holding it (the
    temporary directory itself, /tmp) keeps its mode: make test once left /tmp at 0700, locking every other
    user out of it."""
    above = tmp_path / "tmp"
    folder = above / "ablate-grade-x"
    (folder / "inner").mkdir(parents=True)
    above.chmod(0o1777)
    real_rmdir = os.rmdir
    refused: list[str] = []

    def refusing_rmdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if str(path) == str(folder) and not refused:  # refuses once, as a folder of mode 000 would
            refused.append(str(path))
            raise PermissionError(13, "Permission denied", str(path))
        real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", refusing_rmdir)
    remove_tree(folder)
    assert refused and not folder.exists()  # refused, opened, removed
    assert stat.S_IMODE(above.stat().st_mode) == 0o1777

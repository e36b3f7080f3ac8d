"""An adaptive run's rounds are scheduler passes over one kept environment pool: each cell's environment is
built once per invocation (not once per round), reset between sessions, and removed once at the end; a pass
over a pool of its own (a fixed run) still builds and removes its environments itself.

The fake CLI (tests/runner_support.py) answers every prompt the same way in every cell, so every block is
concordant and no cell is ever decided: the run goes to --max-repeats, one round per repeat."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ablate.core.backoff import BackoffPolicy
from ablate.core.claude import ClaudeBinary
from ablate.core.fsutil import sha256_file
from ablate.folder.adaptive import AdaptiveOptions
from ablate.folder.layout import PlanItem, RunFolder, RunManifest
from ablate.folder.result import iter_results
from ablate.grade.hook import GradingHook
from ablate.run.adaptive import run_adaptive
from ablate.run.create import create_run, load_run_tasks, open_run
from ablate.run.envpool import EnvPool
from ablate.run.scheduler import Runner, RunOptions
from ablate.setup.cells import ResolvedCell, load_cell_set
from ablate.setup.layers import load_catalog
from ablate.setup.tasks import load_task
from tests.runner_support import FakeBackend, base_env, write_fake_claude

OPTS = RunOptions(jobs=2, backoff=BackoffPolicy(first_s=0.3, max_s=1.0), retry_delay_s=0.05, grace_s=5.0)
ROUNDS = 3


def _run(tmp: Path) -> tuple[RunFolder, RunManifest, list[ResolvedCell], ClaudeBinary, FakeBackend]:
    (tmp / "tasks").mkdir()
    tasks = []
    for tid in ("t1", "t2"):
        path = tmp / "tasks" / f"{tid}.toml"
        path.write_text(
            f'id = "{tid}"\nprompt = "do {tid}"\n[[pitfalls]]\nid = "x"\npattern = "never-said"\n'
        )
        tasks.append(load_task(path))
    claude_path = write_fake_claude(tmp / "claude")
    claude = ClaudeBinary(path=claude_path, version="2.1.332", sha256=sha256_file(claude_path))
    cs = load_cell_set("binary", load_catalog())
    folder, manifest = create_run(
        tmp / "runs", tasks=tasks, cell_set=cs.name, cells=list(cs.cells), repeats=ROUNDS, seed=3,
        model="claude-sonnet-4-6", max_turns=5, claude=claude, timeout_s=20,
    )  # fmt: skip
    return folder, manifest, list(cs.cells), claude, FakeBackend(tmp / "envs", base_env(tmp))


def _runner(folder: RunFolder, cells: list[ResolvedCell], claude: ClaudeBinary, backend: FakeBackend,
            pool: EnvPool | None) -> Runner:  # fmt: skip
    _, manifest = open_run(folder.root)
    return Runner(
        folder, manifest, tasks={t.id: t for t in load_run_tasks(folder, manifest)},
        cells={c.id: c for c in cells}, backend=backend, options=OPTS, tree_hook=GradingHook(), claude=claude,
        pool=pool,
    )  # fmt: skip


def test_rounds_reuse_one_environment_per_cell_and_remove_them_once(tmp_path: Path) -> None:
    folder, manifest, cells, claude, backend = _run(tmp_path)
    pool = EnvPool(backend, {c.id: c for c in cells}, OPTS.jobs, keep=True)
    passes: list[int] = []

    def run_items(items: Sequence[PlanItem]) -> str:
        passes.append(len(items))
        summary = _runner(folder, cells, claude, backend, pool).run()
        assert backend.teardowns == 0  # nothing removed between rounds
        assert summary.envs_built == len(backend.builds)  # counted over the invocation, not the pass
        return summary.outcome

    try:
        options = AdaptiveOptions(max_repeats=ROUNDS, min_effect=0.05, alpha=0.05)
        summary = run_adaptive(folder, manifest, run_items, options)
    finally:
        pool.close()
    assert summary.state.stopped == "max-repeats" and passes == [4] * ROUNDS
    assert sorted(cell for cell, _ in backend.builds) == sorted(c.id for c in cells)  # once per cell
    assert backend.teardowns == len(backend.builds)  # every one removed, once, at the end
    assert backend.resets >= 2 * ROUNDS * 2 - len(cells)  # reset before every reuse, across rounds too
    results = list(iter_results(folder))
    assert len(results) == 4 * ROUNDS and all(r.complete for r in results)
    plan = folder.read_plan()
    assert all(len(p.attempts) == 1 for p in plan)  # the driver's plan writes keep the runner's attempts


def test_a_pass_with_its_own_pool_builds_and_removes_its_environments(tmp_path: Path) -> None:
    folder, _, cells, claude, backend = _run(tmp_path)
    summary = _runner(folder, cells, claude, backend, None).run()
    assert summary.outcome == "finished" and summary.envs_built == len(backend.builds) >= len(cells)
    assert backend.teardowns == len(backend.builds)

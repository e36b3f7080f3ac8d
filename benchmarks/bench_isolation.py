"""Isolation backends on a 20,011-file repository: build, reset and per-session view cost; probe time.

``namespace``: the run's pristine checkout (once per run), a cell's repo layer (once per cell), a session
slot, the view's mount time (``nsexec`` running ``true`` in a five-overlay view), and a reset (discarding
the upper folders of a session that wrote 200 files) for the big repository and for the example's own
11-file one (a reset must not depend on the repository's size). ``links``: build and reset of the same
cell, for comparison. Then ``ablate probe`` of the example setup's 12 layered cells (needs the pinned CLI).

Run: ``.venv/bin/python -m benchmarks.bench_isolation`` (``ABLATE_BENCH_FILES`` changes the file count).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ablate.isolate.backend import BackendOptions
from ablate.isolate.detect import namespace_check
from ablate.isolate.environment import build_environment, reset_environment, teardown_environment
from ablate.isolate.namespace import NamespaceEnvironments
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import git, materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup


def _big_repo(repo: Path, files: int) -> None:
    for i in range(files):
        d = repo / "gen" / f"d{i // 500:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.py").write_text(f"VALUE = {i}\n")
    git(repo, "add", "-A", "gen")
    git(repo, "commit", "-q", "-m", "Generated files")


def _timed(fn: Callable[[], object], repeat: int = 1) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _session_writes(root: Path, n: int = 200) -> None:
    for area in ("repo", "tmp", "home", "config"):
        d = root / "up" / area / "bench"
        d.mkdir(parents=True, exist_ok=True)
        for i in range(n // 4):
            (d / f"w{i}").write_bytes(b"x" * 512)


def _namespace_figures(tmp: Path, files: int, label: str) -> dict[str, float]:
    ex = materialise_example(tmp / f"ex-{label}")
    if files:
        _big_repo(ex.repo, files)
    n_files = len(git(ex.repo, "ls-files").splitlines())
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cells = load_cell_set("layered", catalog)
    options = BackendOptions(base_env={"PATH": "/usr/bin:/bin"})
    backend = NamespaceEnvironments(setup, catalog, tmp / f"work-{label}", options)
    lower_s = _timed(backend.lower)
    c0_s = _timed(lambda: backend.cell_layers(cells.get("C0")))
    c7_s = _timed(lambda: backend.cell_layers(cells.get("C7")))
    env = backend.build(cells.get("C0"), 0)
    slot_s = _timed(lambda: backend.build(cells.get("C0"), 1))
    mount_s = _timed(lambda: subprocess.run(backend.command(env, ["true"]), check=True, cwd="/"), repeat=5)

    resets = []
    for _ in range(11):  # a session wrote 200 files, then the reset discards them (only the reset is timed)
        _session_writes(env.root)
        resets.append(_timed(lambda: backend.reset(env)))
    reset_s = statistics.median(resets)
    retarget_s = _timed(lambda: backend.retarget(env, cells.get("C7")))
    backend.close()
    return {
        f"ns_{label}_repo_files": float(n_files),
        f"ns_{label}_lower_s": round(lower_s, 3),
        f"ns_{label}_cell_layer_s": round(statistics.mean([c0_s, c7_s]), 3),
        f"ns_{label}_slot_build_s": round(slot_s, 4),
        f"ns_{label}_view_mount_s": round(mount_s, 4),
        f"ns_{label}_reset_s": round(reset_s, 4),
        f"ns_{label}_retarget_s": round(retarget_s, 4),
    }


def _links_figures(tmp: Path, files: int) -> dict[str, float]:
    ex = materialise_example(tmp / "ex-links")
    _big_repo(ex.repo, files)
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    cell = load_cell_set("layered", catalog).get("C0")
    t0 = time.perf_counter()
    env = build_environment(setup, catalog, cell, tmp / "links-out", base_env={"PATH": "/usr/bin:/bin"})
    build_s = time.perf_counter() - t0
    reset_s = _timed(lambda: reset_environment(env), repeat=3)
    teardown_environment(env)
    return {"links_big_build_s": round(build_s, 3), "links_big_reset_s": round(reset_s, 3)}


def _probe_figure(tmp: Path) -> dict[str, float]:
    from ablate.core.claude import find_claude
    from ablate.probe.probe import probe

    binary = os.environ.get("ABLATE_CLAUDE_BIN")
    local = Path(".cache/claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude")
    try:
        claude = find_claude(binary or (local if local.exists() else None))
    except Exception as exc:  # no CLI: the other figures stand
        print(f"probe skipped: {exc}")
        return {}
    ex = materialise_example(tmp / "ex-probe")
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    catalog = load_catalog()
    os.environ.setdefault("IS_SANDBOX", "1")
    t0 = time.perf_counter()
    result = probe(setup, catalog, load_cell_set("layered", catalog), claude, isolation="namespace")
    return {
        "probe_12_cells_s": round(time.perf_counter() - t0, 1),
        "probe_ok": float(result.ok),
        "probe_fidelity_exact_equal": float(bool(result.fidelity.get("equal"))),
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    ok, why = namespace_check().ok, namespace_check().reason
    figures: dict[str, float] = {}
    files = int(os.environ.get("ABLATE_BENCH_FILES", "20000"))
    with tempfile.TemporaryDirectory(prefix="ablate-bench-iso-") as tmp:
        base = Path(tmp)
        if ok:
            figures.update(_namespace_figures(base, files, "big"))
            figures.update(_namespace_figures(base, 0, "small"))
        else:
            print(f"namespace unavailable: {why}")
        figures.update(_links_figures(base, files))
        if ok:
            figures.update(_probe_figure(base))
    for key, value in figures.items():
        print(f"{key:>32}: {value}")
    return figures


if __name__ == "__main__":
    main()

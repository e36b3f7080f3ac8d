"""Build (and reset, and tear down) one cell for a config dir holding ~1 GB of transcript history.

The history under ``projects/`` must not be copied: building stays fast and small whatever its size.
Run: ``.venv/bin/python -m benchmarks.bench_env [--history-mb N]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from ablate.isolate.environment import build_environment, reset_environment, teardown_environment
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup


def disk_bytes(root: Path) -> int:
    """Allocated bytes under ``root``, links not followed (what the cell really costs on disk)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--history-mb", type=int, default=1024, help="transcript history to plant (MB)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ablate-bench-env-") as tmp:
        t0 = time.monotonic()
        example = materialise_example(Path(tmp) / "ex", history_bytes=args.history_mb << 20)
        plant_s = time.monotonic() - t0
        setup = load_setup(example.config_dir, example.repo, home=example.home)
        catalog = load_catalog()
        cell = load_cell_set("layered", catalog).get("C0")
        t0 = time.monotonic()
        env = build_environment(setup, catalog, cell, Path(tmp) / "out", base_env={"PATH": "/usr/bin:/bin"})
        build_s = time.monotonic() - t0
        cell_kb = disk_bytes(env.root) / 1024
        config_mb = disk_bytes(example.config_dir) / (1 << 20)
        t0 = time.monotonic()
        reset_environment(env)
        reset_s = time.monotonic() - t0
        t0 = time.monotonic()
        teardown_environment(env)
        teardown_s = time.monotonic() - t0
    figures = {
        "history_mb": float(args.history_mb),
        "config_dir_mb": round(config_mb, 1),
        "plant_s": round(plant_s, 2),
        "build_s": round(build_s, 3),
        "cell_disk_kb": round(cell_kb, 1),
        "reset_s": round(reset_s, 3),
        "teardown_s": round(teardown_s, 3),
    }
    for key, value in figures.items():
        print(f"{key:>14}: {value}")
    return figures


if __name__ == "__main__":
    main()

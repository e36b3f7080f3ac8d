"""Benchmark: ablate's own overhead on a run (not a timed test; `make bench`).

ratio = wall time of `ablate run` for a fixed plan against the sim endpoint
        / wall time of the same `claude -p` commands launched by a plain shell loop (xargs -P) with the
          same parallelism, each in its cell's environment, built beforehand and not timed (so both sides
          run exactly the same sessions, hooks and prompts included, and the ratio is ablate's own cost:
          planning, environment builds, resets and retargets, transcript copies, mining, teardown).

The repository has ~20,000 files (the example setup's repo plus generated files), so environment builds
and resets are included at realistic cost. The sim answers every call after ``ABLATE_BENCH_DELAY`` seconds
(default 2.0: a fast real API call), so sessions wait on the "network" as real ones do.

Environment: ABLATE_BENCH_FILES (20000), ABLATE_BENCH_REPEATS (2), ABLATE_BENCH_JOBS (4),
ABLATE_BENCH_CELLS (layered), ABLATE_BENCH_DELAY (2.0), ABLATE_BENCH_ISOLATION (namespace; or links).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ablate.isolate.environment import build_environment
from ablate.setup.cells import load_cell_set
from ablate.setup.examples import git, materialise_example
from ablate.setup.layers import load_catalog
from ablate.setup.load import load_setup
from ablate.sim import SimServer, script_from_data

ROOT = Path(__file__).resolve().parent.parent
TASKS = [ROOT / "tasks" / "greet-exclaim.toml", ROOT / "tasks" / "deploy-command.toml"]
MODEL = "claude-sonnet-4-6"


def _big_repo(repo: Path, files: int) -> None:
    per_dir = 200
    for i in range(files):
        d = repo / "src" / f"pkg{i // per_dir:03d}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i % per_dir:03d}.py").write_text(f"VALUE_{i} = {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Generated files")


def main() -> None:
    files = int(os.environ.get("ABLATE_BENCH_FILES", "20000"))
    repeats = int(os.environ.get("ABLATE_BENCH_REPEATS", "2"))
    jobs = int(os.environ.get("ABLATE_BENCH_JOBS", "4"))
    cells = os.environ.get("ABLATE_BENCH_CELLS", "layered")
    delay = float(os.environ.get("ABLATE_BENCH_DELAY", "2.0"))
    claude = os.environ.get("ABLATE_CLAUDE_BIN") or shutil.which("claude")
    if not claude:
        sys.exit("bench_runner: no claude binary (run `make claude` or set ABLATE_CLAUDE_BIN)")
    ablate = str(Path(sys.executable).parent / "ablate")
    isolation = os.environ.get("ABLATE_BENCH_ISOLATION", "namespace")
    usage = {"input_tokens": 1000, "output_tokens": 10}
    script = script_from_data({"default": {"text": "OK.", "usage": usage, "delay_s": delay}, "usage": usage})

    with tempfile.TemporaryDirectory(prefix="ablate-bench-") as tmp_s:
        tmp = Path(tmp_s)
        ex = materialise_example(tmp / "example")
        t0 = time.monotonic()
        _big_repo(ex.repo, files)
        n_files = int(
            subprocess.run(["git", "ls-files"], cwd=ex.repo, capture_output=True, text=True).stdout.count(
                "\n"
            )
        )
        print(f"bench_runner: repo of {n_files} files made in {time.monotonic() - t0:.1f} s", flush=True)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_", "ABLATE_"))}
        base.update({"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ABLATE_CLAUDE_BIN": claude})

        with SimServer(script) as sim:
            env = {**base, "ANTHROPIC_BASE_URL": sim.base_url}
            # 1. ablate run (planning, environment builds, resets, mining, teardown: everything)
            t0 = time.monotonic()
            args = [
                ablate,
                "run",
                "--cells",
                cells,
                "--repeats",
                str(repeats),
                "--jobs",
                str(jobs),
                "--max-turns",
                "3",
                "--model",
                MODEL,
                "--seed",
                "1",
                "--out",
                str(tmp / "runs"),
                "--work-dir",
                str(tmp / "envs"),
                "--config-dir",
                str(ex.config_dir),
                "--repo",
                str(ex.repo),
                "--isolation",
                isolation,
                "--json",
            ]
            for t in TASKS:
                args += ["--tasks", str(t)]
            proc = subprocess.run(args, env=env, capture_output=True, text=True)
            t_ablate = time.monotonic() - t0
            # the report is written by a detached process after `run` returns: not part of the run's time, but
            # it must not compete with the baseline for the CPU either (not timed)
            wait_until = time.monotonic() + 300
            while not list((tmp / "runs").glob("*/report.html")) and time.monotonic() < wait_until:
                time.sleep(0.2)
            if proc.returncode != 0:
                sys.exit(f"bench_runner: ablate run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            run_dir = next((tmp / "runs").iterdir())
            items = [line for line in (run_dir / "plan.jsonl").read_text().splitlines() if line]

            # 2. the same commands from a plain shell loop with the same parallelism
            import orjson

            prompts = {}
            for t in TASKS:
                import tomllib

                spec = tomllib.loads(t.read_text())
                prompts[spec["id"]] = spec["prompt"]
            cmds = tmp / "cmds"
            cmds.mkdir()
            # the baseline's environments: one per cell, exactly as ablate builds them (not timed)
            setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
            catalog = load_catalog()
            cell_set = load_cell_set(cells, catalog)
            with ThreadPoolExecutor(2) as pool:  # two checkouts at a time, as ablate builds them
                built = pool.map(
                    lambda ic: build_environment(
                        setup, catalog, ic[1], tmp / "plain", name=f"p{ic[0]:02d}", base_env=env
                    ),
                    enumerate(cell_set.cells),
                )
                plain = {e.cell.id: e for e in built}
            for i, raw in enumerate(items):
                item = orjson.loads(raw)
                cell_env = plain[item["cell"]]
                run_env = {**cell_env.env, "CLAUDE_CODE_MAX_RETRIES": "2"}
                p = cmds / f"{i:03d}.prompt"
                p.write_text(prompts[item["task"]])
                assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(run_env.items()))
                (cmds / f"{i:03d}.sh").write_text(
                    f"cd {shlex.quote(str(cell_env.cwd))} && exec env -i {assignments} "
                    f'"{claude}" -p --output-format json --model {MODEL} --permission-mode bypassPermissions '
                    f'--max-turns 3 --session-id {uuid.uuid4()} -- "$(cat {p})" < /dev/null > {cmds}/{i:03d}.json\n'
                )
            t0 = time.monotonic()
            subprocess.run(
                f"ls {cmds}/*.sh | xargs -P {jobs} -n 1 sh", shell=True, cwd=ex.repo, env=env, check=True
            )
            t_plain = time.monotonic() - t0
    summary = orjson.loads(proc.stdout)
    print(
        f"bench_runner: {len(items)} sessions ({cells}, {repeats} repeats, jobs {jobs}, sim delay {delay}s, "
        f"isolation {isolation}, "
        f"{summary['envs_built']} environments over {n_files} files)\n"
        f"  ablate run  {t_ablate:7.1f} s\n  shell loop  {t_plain:7.1f} s\n  ratio       {t_ablate / t_plain:7.3f}"
    )


if __name__ == "__main__":
    main()

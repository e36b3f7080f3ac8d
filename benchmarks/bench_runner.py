"""Benchmark: ablate's own overhead on a run (not a timed test; `make bench`).

ratio = wall time of `ablate run` for a fixed plan against the sim endpoint
        / wall time of the same `claude -p` commands launched by a plain shell loop (xargs -P) with the
          same parallelism, each in a fresh config dir, in the repository itself.

The repository has ~20,000 files (the example setup's repo plus generated files), so environment builds
and resets are included at realistic cost. The sim answers every call after ``ABLATE_BENCH_DELAY`` seconds
(default 2.0: a fast real API call), so sessions wait on the "network" as real ones do.

Environment: ABLATE_BENCH_FILES (20000), ABLATE_BENCH_REPEATS (2), ABLATE_BENCH_JOBS (4),
ABLATE_BENCH_CELLS (layered), ABLATE_BENCH_DELAY (2.0).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ablate.examples import git, materialise_example
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
                "--json",
            ]
            for t in TASKS:
                args += ["--tasks", str(t)]
            proc = subprocess.run(args, env=env, capture_output=True, text=True)
            t_ablate = time.monotonic() - t0
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
            lines = []
            for i, raw in enumerate(items):
                task = orjson.loads(raw)["task"]
                cfg = tmp / "plain" / f"c{i:03d}"
                cfg.mkdir(parents=True)
                p = cmds / f"{i:03d}.prompt"
                p.write_text(prompts[task])
                lines.append(
                    f"CLAUDE_CONFIG_DIR={cfg} IS_SANDBOX=1 CLAUDE_CODE_MAX_RETRIES=2 DISABLE_TELEMETRY=1 "
                    f'"{claude}" -p --output-format json --model {MODEL} --permission-mode bypassPermissions '
                    f'--max-turns 3 --session-id {uuid.uuid4()} -- "$(cat {p})" < /dev/null > {cmds}/{i:03d}.json'
                )
            (cmds / "all.sh").write_text("\n".join(lines) + "\n")
            t0 = time.monotonic()
            subprocess.run(
                f"tr '\\n' '\\0' < {cmds}/all.sh | xargs -0 -P {jobs} -I CMD sh -c 'CMD'",
                shell=True,
                cwd=ex.repo,
                env=env,
                check=True,
            )
            t_plain = time.monotonic() - t0
    summary = orjson.loads(proc.stdout)
    print(
        f"bench_runner: {len(items)} sessions ({cells}, {repeats} repeats, jobs {jobs}, sim delay {delay}s, "
        f"{summary['envs_built']} environments over {n_files} files)\n"
        f"  ablate run  {t_ablate:7.1f} s\n  shell loop  {t_plain:7.1f} s\n  ratio       {t_ablate / t_plain:7.3f}"
    )


if __name__ == "__main__":
    main()

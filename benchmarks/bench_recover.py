"""Benchmark: ``ablate recover`` and ``ablate mine RUN`` over a run folder holding the mining corpus.

The run folder is a real one: ``ablate plan`` of the example setup (one task, the ``layered`` cells, as many
repeats as the corpus has sessions over twelve), each item then given one attempt whose transcript is one of
the corpus's sessions (:mod:`benchmarks.bench_mine`, ``ABLATE_BENCH_GB``), hard-linked into
``transcripts/<item>.a1/`` with its sub-agents, and no stdout: every item is one ``recover`` must rebuild from
its transcript. It is made once under the bench cache (``ABLATE_BENCH_DIR``) and reused. Figures, warm page
cache, wall and CPU of the child: ``recover --dry-run --json`` (mines every transcript, writes nothing; the same
output with ``--jobs 1`` and ``--jobs <cpus>``),
``mine RUN --by tool --json`` with ``--jobs 1`` and ``--jobs <cpus>``, and ``cat`` of the same transcripts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson

from benchmarks.bench_mine import REPO, _timed_shell, prepare
from benchmarks.bench_usage import _child

TASK = REPO / "tasks" / "greet-exclaim.toml"


def run_folder(root: Path) -> Path:
    """The run folder whose items' transcripts are the corpus's sessions (made once, beside the corpus)."""
    dest = root.parent / f"{root.name}-run"
    if (dest / "plan.jsonl").is_file():
        return dest
    from ablate.core.claude import find_claude
    from ablate.folder.layout import Attempt, RunFolder
    from ablate.setup.examples import materialise_example

    sessions = sorted(p for p in root.glob("*/*.jsonl"))
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    ex = materialise_example(tmp / "example")
    cmd = [sys.executable, "-m", "ablate", "plan", "--tasks", str(TASK), "--cells", "layered"]
    cmd += ["--repeats", str(-(-len(sessions) // 12)), "--seed", "1", "--out", str(tmp / "runs")]
    cmd += [
        "--config-dir",
        str(ex.config_dir),
        "--repo",
        str(ex.repo),
        "--claude-bin",
        str(find_claude().path),
    ]
    subprocess.run(cmd, check=True, capture_output=True, cwd=REPO, env={**os.environ, "HOME": str(ex.home)})
    (made,) = (tmp / "runs").iterdir()
    rf = RunFolder(made)
    plan = rf.read_plan()[: len(sessions)]
    for item, session in zip(plan, sessions, strict=True):
        item.attempts = [Attempt(n=1, session_id=session.stem, started_at="2026-01-01T00:00:00Z")]
        there = rf.transcript_dir(item.item, 1)
        there.mkdir(parents=True)
        os.link(session, there / session.name)
        subs = session.with_suffix("") / "subagents"
        if subs.is_dir():
            (there / session.stem / "subagents").mkdir(parents=True)
            for sub in subs.iterdir():
                os.link(sub, there / session.stem / "subagents" / sub.name)
    rf.write_plan(plan)
    made.rename(dest)
    shutil.rmtree(tmp)
    return dest


def main() -> None:
    root, _xargs, cpus, _total = prepare("bench_recover")
    run = run_folder(root)
    files = sorted(str(p) for p in (run / "transcripts").rglob("*.jsonl"))
    listing = run.parent / f"{run.name}.files0"
    listing.write_bytes(b"\0".join(f.encode() for f in files) + b"\0")
    size = sum(os.path.getsize(f) for f in files)
    print(f"run folder: {run} ({len(files)} transcript files, {size / 1e9:.2f} GB)")
    _timed_shell(f"xargs -0 -n 500 -a {listing} cat > /dev/null", run)  # warm the page cache
    t_cat, _ = _timed_shell(f"xargs -0 -n 500 -a {listing} cat > /dev/null", run)
    ablate = [sys.executable, "-m", "ablate"]
    # exit 3: the corpus's rate-limited sessions need a re-run, as they should
    rows = {}
    for jobs in sorted({1, cpus}):
        rows[f"recover --dry-run -j {jobs}"] = _child(
            [*ablate, "recover", str(run), "--dry-run", "--json", "-j", str(jobs)], ok=(0, 3)
        )
        rows[f"mine RUN --jobs {jobs}"] = _child(
            [*ablate, "mine", str(run), "--by", "tool", "--json", "-j", str(jobs)]
        )
    print(f"{'cat the transcripts':28s} {t_cat:7.2f} s wall")
    for name, (wall, cpu, _out) in rows.items():
        print(f"{'ablate ' + name:28s} {wall:7.2f} s wall {cpu:7.2f} s CPU   {wall / t_cat:.1f}x cat (wall)")
    outputs = {rows[f"recover --dry-run -j {jobs}"][2] for jobs in {1, cpus}}
    if len(outputs) != 1:
        raise SystemExit("bench_recover: recover's output depends on --jobs")
    actions = [orjson.loads(line)["action"] for line in outputs.pop().splitlines()]
    print(f"recover: {actions.count('recovered')} of {len(actions)} items rebuilt from their transcripts")


if __name__ == "__main__":
    main()

"""Benchmark: ``ablate usage --all-projects`` over the mining corpus versus ``jq`` and ``ablate mine``.

The corpus is :mod:`benchmarks.bench_mine`'s (real 2.1.332 fixture transcripts spread over project
folders, ``ABLATE_BENCH_GB``, default 1), seen as the ``projects/`` folder of a config dir. Figures, warm
page cache: the jq pipeline counting Skill invocations per skill (what usage's skill table counts), serial
and parallel; ``ablate usage --all-projects --json`` with ``--jobs 1`` and ``--jobs <cpus>``; ``ablate mine
--by tool`` with the same jobs for reference. The benchmark fails when usage's skill counts differ from
jq's. CPU time (user + sys of the child) is printed beside wall time: on a shared machine it is the
steadier figure.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import orjson

from benchmarks.bench_mine import REPO, _timed_shell, prepare

JQ_SKILLS = (
    'select(.type=="assistant") | .message.content[]? | select(.type=="tool_use" and .name=="Skill") '
    "| .input.skill"
)


def config_dir_for(projects: Path) -> Path:
    """A config dir whose ``projects`` is the corpus (a symlink next to it; nothing is copied)."""
    cfg = projects.parent / f"{projects.name}-config"
    cfg.mkdir(exist_ok=True)
    link = cfg / "projects"
    if not link.is_symlink():
        link.symlink_to(projects)
    return cfg


def _child(cmd: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, bytes]:
    """(wall seconds, CPU seconds, stdout) of one child process (exiting with one of ``ok``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, cwd=REPO)
    wall = time.perf_counter() - t0
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    root, xargs, cpus, _ = prepare("bench_usage")
    cfg = config_dir_for(root)
    _timed_shell(f"{xargs} cat > /dev/null", root)  # warm the page cache
    c0 = _cpu()
    t_jq1, jq1 = _timed_shell(f"{xargs} jq -r '{JQ_SKILLS}' | sort | uniq -c", root)
    c_jq1 = _cpu() - c0
    t_jqn, _ = _timed_shell(f"{xargs} -P {cpus} jq -r '{JQ_SKILLS}' | sort | uniq -c", root)
    ablate = [sys.executable, "-m", "ablate"]
    runs = {}
    for jobs in sorted({1, cpus}):
        runs[f"usage --jobs {jobs}"] = _child(
            [*ablate, "usage", "--config-dir", str(cfg), "--all-projects", "--json", "--jobs", str(jobs)]
        )
        runs[f"mine --jobs {jobs}"] = _child(
            [*ablate, "mine", str(root), "--by", "tool", "--json", "-j", str(jobs)]
        )
    print(f"{'jq, serial':28s} {t_jq1:7.2f} s wall {c_jq1:7.2f} s CPU   {JQ_SKILLS!r} | sort | uniq -c")
    print(f"{f'jq, {cpus} in parallel':28s} {t_jqn:7.2f} s wall")
    for name, (wall, cpu, _out) in runs.items():
        print(
            f"{'ablate ' + name:28s} {wall:7.2f} s wall {cpu:7.2f} s CPU   "
            f"{t_jq1 / wall:.1f}x jq serial (wall), {c_jq1 / cpu:.1f}x (CPU)"
        )
    doc = orjson.loads(runs["usage --jobs 1"][2])
    ours = {s["name"]: s["invoked"] for s in doc["skills"] if s["invoked"]}
    theirs = {ln.split()[1]: int(ln.split()[0]) for ln in jq1.splitlines() if ln.strip()}
    print(f"sessions read: {doc['sessions']['count']} ({doc['sessions']['files']} files)")
    if ours != theirs:
        raise SystemExit(f"bench_usage: skill counts differ: ablate {ours}, jq {theirs}")
    print(f"skill counts agree: {dict(sorted(ours.items()))}")


if __name__ == "__main__":
    main()

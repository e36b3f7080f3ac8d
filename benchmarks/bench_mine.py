"""Benchmark: ``ablate mine`` over a generated ``projects/`` tree versus ``jq`` and ``cat``.

The corpus is built from the real Claude Code 2.1.332 fixture transcripts (tests/data/fixtures), each copy
given a fresh session id and spread over project folders, so its record mix is the real one: most bytes are
``api-request-shape``, ``api-request-blob`` and ``attachment:prompt_snapshot`` records. It is generated once
into ``.cache/bench/projects-<size>`` (``ABLATE_BENCH_DIR`` overrides the cache folder) and reused.

Size: ``ABLATE_BENCH_GB`` (default 1; e.g. ``ABLATE_BENCH_GB=0.05`` for a quick run).

Figures, each command run ``ABLATE_BENCH_REPEAT`` times (default 3; min and median), wall and CPU (user +
system of the child and its children), side by side in one run:
- ``cat FILES > /dev/null``: the I/O floor;
- the jq pipeline a user would write for the tool histogram of assistant records, serial (one jq at a time)
  and parallel (``xargs -P <cpus>``);
- ``ablate mine DIR --by tool --json``, which computes every metric of every session, in a subprocess, with
  ``--jobs`` 1, 2 and the CPU count (the default);
then, where the page cache can be dropped (root: ``/proc/sys/vm/drop_caches``), ``cat`` and ``ablate mine``
again from a cold cache. The summary gives the default's ratios to serial jq and to ``cat``, wall and CPU.
The benchmark fails when ablate's tool histogram differs from jq's: a fast wrong answer is no result.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "data" / "fixtures"
# Assistant records only: request snapshots echo earlier tool_use blocks and must not be counted twice.
JQ_FILTER = 'select(.type=="assistant") | .message.content[]? | select(.type=="tool_use") | .name'
JQ_PIPELINE = f"jq -r '{JQ_FILTER}' FILES | sort | uniq -c"


def _templates() -> list[tuple[str, bytes, dict[str, bytes]]]:
    """(fixture name, transcript bytes, {sub-agent file name: bytes}) for every fixture."""
    out = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        if ".subagents_" in path.name or path.name.endswith(".mock-requests.jsonl"):
            continue
        name = path.stem
        subs = {
            p.name.removeprefix(f"{name}.subagents_"): p.read_bytes()
            for p in FIXTURES.glob(f"{name}.subagents_agent-*")
        }
        out.append((name, path.read_bytes(), subs))
    return out


def generate(dest: Path, size_bytes: int) -> tuple[int, int]:
    """Write sessions into ``dest`` until it holds ``size_bytes``; return (sessions, bytes)."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    templates = _templates()
    sid_re = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    sessions = written = 0
    while written < size_bytes:
        _name, body, subs = templates[sessions % len(templates)]
        old = sid_re.search(body)
        assert old is not None
        sid = str(uuid.UUID(int=sessions + 1)).encode()
        project = tmp / f"-srv-bench-project-{sessions % 97:02d}"
        project.mkdir(parents=True, exist_ok=True)
        data = body.replace(old.group(0), sid)
        (project / f"{sid.decode()}.jsonl").write_bytes(data)
        written += len(data)
        for sub_name, sub_body in subs.items():
            target = project / sid.decode() / "subagents" / sub_name
            target.parent.mkdir(parents=True, exist_ok=True)
            sub_data = sub_body.replace(old.group(0), sid)
            target.write_bytes(sub_data)
            written += len(sub_data)
        sessions += 1
    tmp.rename(dest)
    return sessions, written


def corpus(size_gb: float) -> Path:
    cache = Path(os.environ.get("ABLATE_BENCH_DIR", REPO / ".cache" / "bench"))
    dest = cache / f"projects-{size_gb:g}gb"
    if not dest.is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        sessions, written = generate(dest, int(size_gb * (1 << 30)))
        print(
            f"generated {sessions} sessions, {written / 1e9:.2f} GB in {time.perf_counter() - t0:.1f} s: {dest}"
        )
    return dest


def _timed_shell(cmd: str, cwd: Path) -> tuple[float, str]:
    wall, _cpu, out = _measure(["bash", "-o", "pipefail", "-c", cmd], cwd)
    return wall, out.decode()


def _measure(argv: list[str], cwd: Path) -> tuple[float, float, bytes]:
    """(wall seconds, CPU seconds of the child and its children, stdout) of one command that must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv[:5])} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, proc.stdout


def _cwd(argv: list[str], root: Path) -> Path:
    """ablate runs from this checkout (``python -m ablate`` imports the one in its working folder); the shell
    pipelines from the corpus, whose file list names files relative to it."""
    return REPO if argv[0] == sys.executable else root


def drop_caches() -> str:
    """Empty the page cache (root only): "" when done, else why not."""
    subprocess.run(["sync"], check=False)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        return f"cannot drop the page cache ({exc}): cold figures left out"
    return ""


def _files_list(root: Path) -> Path:
    listing = root.parent / f"{root.name}.files0"
    if not listing.exists():
        names = sorted(f"./{p.relative_to(root)}" for p in root.rglob("*.jsonl"))
        listing.write_bytes(b"\0".join(n.encode() for n in names) + b"\0")
    return listing


def _histogram(text: str) -> dict[str, int]:
    return {ln.split()[1]: int(ln.split()[0]) for ln in text.splitlines() if ln.strip()}


def prepare(name: str) -> tuple[Path, str, int, int]:
    """The corpus every mining benchmark reads (``ABLATE_BENCH_GB``), its ``xargs`` prefix over the file
    list, the CPU count and the corpus size in bytes; jq, the baseline, must be installed."""
    if shutil.which("jq") is None:
        raise SystemExit(f"{name}: jq is not installed (apt-get install jq); it is the comparison baseline")
    size_gb = float(os.environ.get("ABLATE_BENCH_GB", "1"))
    cpus = os.cpu_count() or 1
    root = corpus(size_gb)
    listing = _files_list(root)
    total = sum(p.stat().st_size for p in root.rglob("*.jsonl"))
    n_files = listing.read_bytes().count(b"\0")
    print(f"corpus: {root} ({total / 1e9:.2f} GB, {n_files} files, {cpus} CPUs)")
    return root, f"xargs -0 -n 500 -a {listing}", cpus, total


def main() -> None:
    import orjson

    root, xargs, cpus, total = prepare("bench_mine")
    repeat = int(os.environ.get("ABLATE_BENCH_REPEAT", "3"))
    jobs = sorted({1, 2, cpus})
    commands: dict[str, list[str]] = {
        "cat FILES > /dev/null": ["bash", "-c", f"{xargs} cat > /dev/null"],
        "jq, serial": ["bash", "-o", "pipefail", "-c", f"{xargs} jq -r '{JQ_FILTER}' | sort | uniq -c"],
        f"jq, {cpus} in parallel": [
            "bash", "-o", "pipefail", "-c", f"{xargs} -P {cpus} jq -r '{JQ_FILTER}' | sort | uniq -c"
        ],
    }  # fmt: skip
    ablate = [sys.executable, "-m", "ablate", "mine", str(root), "--by", "tool", "--json", "--jobs"]
    commands |= {f"ablate mine --jobs {j}": [*ablate, str(j)] for j in jobs}
    _measure(commands["cat FILES > /dev/null"], root)  # warm the page cache
    warm: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    outputs: dict[str, bytes] = {}
    for _ in range(repeat):
        for name, argv in commands.items():
            wall, cpu, outputs[name] = _measure(argv, _cwd(argv, root))
            warm[name].append((wall, cpu))
    cold: dict[str, list[tuple[float, float]]] = {}
    why = drop_caches()
    for _ in range(repeat if not why else 0):
        for name in ("cat FILES > /dev/null", f"ablate mine --jobs {cpus}", "ablate mine --jobs 1"):
            drop_caches()
            wall, cpu, _out = _measure(commands[name], _cwd(commands[name], root))
            cold.setdefault(name, []).append((wall, cpu))
    print(f"load average at the end: {os.getloadavg()[0]:.2f}; {repeat} runs each: min / median")
    for label, table in (("warm page cache", warm), ("cold page cache", cold)):
        if table:
            print(f"{label}:{'':14s} wall min  median    CPU min  median")
        for name, runs in table.items():
            w, c = sorted(r[0] for r in runs), sorted(r[1] for r in runs)
            print(
                f"  {name:28s} {w[0]:6.2f} s {w[len(w) // 2]:6.2f} s   {c[0]:6.2f} s {c[len(c) // 2]:6.2f} s"
            )
    if why:
        print(why)
    best = {name: (min(r[0] for r in runs), min(r[1] for r in runs)) for name, runs in warm.items()}
    cat, jq, ours = best["cat FILES > /dev/null"], best["jq, serial"], best[f"ablate mine --jobs {cpus}"]
    print(
        f"ablate mine (--jobs {cpus}, the default) vs serial jq: {jq[0] / ours[0]:.1f}x faster (wall), "
        f"{jq[1] / ours[1]:.1f}x (CPU); vs cat: {ours[0] / cat[0]:.2f}x cat's wall, "
        f"{ours[1] / cat[1]:.1f}x its CPU"
    )
    if cold:
        c_cat, c_ours = (
            min(r[0] for r in cold[n]) for n in ("cat FILES > /dev/null", f"ablate mine --jobs {cpus}")
        )
        print(f"cold: ablate mine {c_ours:.2f} s, cat {c_cat:.2f} s: {c_ours / c_cat:.2f}x cat's wall")
    print("--jobs: " + ", ".join(f"{j}: {best[f'ablate mine --jobs {j}'][0]:.2f} s" for j in jobs))
    print(f"ablate throughput: {total / ours[0] / 1e9:.2f} GB/s (--jobs {cpus})")
    histograms = {"jq serial": _histogram(outputs["jq, serial"].decode())}
    histograms |= {"jq parallel": _histogram(outputs[f"jq, {cpus} in parallel"].decode())}
    for j in jobs:
        lines = outputs[f"ablate mine --jobs {j}"].splitlines()
        histograms[f"ablate --jobs {j}"] = {e["tool"]: e["calls"] for e in map(orjson.loads, lines)}
    if len({tuple(sorted(h.items())) for h in histograms.values()}) != 1:
        for name, h in histograms.items():
            print(f"  {name:18s} {dict(sorted(h.items()))}")
        raise SystemExit("bench_mine: the tool histograms differ (above): ablate's figures are not jq's")
    print(f"tool histograms agree: {dict(sorted(histograms['jq serial'].items()))}")


if __name__ == "__main__":
    main()

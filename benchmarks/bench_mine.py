"""Benchmark: ``ablate mine`` over a generated ``projects/`` tree versus ``jq`` and ``cat``.

The corpus is built from the real Claude Code 2.1.332 fixture transcripts (tests/data/fixtures), each copy
given a fresh session id and spread over project folders, so its record mix is the real one: most bytes are
``api-request-shape``, ``api-request-blob`` and ``attachment:prompt_snapshot`` records. It is generated once
into ``.cache/bench/projects-<size>`` (``ABLATE_BENCH_DIR`` overrides the cache folder) and reused.

Size: ``ABLATE_BENCH_GB`` (default 1; e.g. ``ABLATE_BENCH_GB=0.05`` for a quick run).

Figures, warm page cache (``cat`` runs first and twice), like for like:
- ``cat FILES > /dev/null``: the I/O floor;
- the jq pipeline a user would write for the tool histogram of assistant records, serial (one jq at a time)
  and parallel (``xargs -P <cpus>``);
- ``ablate mine DIR --by tool --json``, which computes every metric of every session, in a subprocess,
  with its peak RSS: single process (``--jobs 1``) and parallel (``--jobs <cpus>``).
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
    t0 = time.perf_counter()
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, capture_output=True, check=True)
    return time.perf_counter() - t0, proc.stdout.decode()


def _files_list(root: Path) -> Path:
    listing = root.parent / f"{root.name}.files0"
    if not listing.exists():
        names = sorted(f"./{p.relative_to(root)}" for p in root.rglob("*.jsonl"))
        listing.write_bytes(b"\0".join(n.encode() for n in names) + b"\0")
    return listing


def _ablate(root: Path, jobs: int) -> tuple[float, float, dict[str, int]]:
    """(seconds, peak RSS MB, tool histogram) of ``ablate mine ROOT --by tool --json --jobs N``."""
    import orjson

    cmd = [sys.executable, "-m", "ablate", "mine", str(root), "--by", "tool", "--json", "--jobs", str(jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, cwd=REPO)
    elapsed = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"ablate mine failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return elapsed, peak, {e["tool"]: e["calls"] for e in map(orjson.loads, proc.stdout.splitlines())}


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
    root, xargs, cpus, total = prepare("bench_mine")

    _timed_shell(f"{xargs} cat > /dev/null", root)  # warm the page cache
    t_cat, _ = _timed_shell(f"{xargs} cat > /dev/null", root)
    t_jq1, jq1 = _timed_shell(f"{xargs} jq -r '{JQ_FILTER}' | sort | uniq -c", root)
    t_jqn, jqn = _timed_shell(f"{xargs} -P {cpus} jq -r '{JQ_FILTER}' | sort | uniq -c", root)
    t_a1, rss1, ours1 = _ablate(root, 1)
    t_an, rssn, oursn = _ablate(root, cpus)

    rows = [
        ("cat FILES > /dev/null", t_cat, "I/O floor, warm cache"),
        ("jq, serial", t_jq1, JQ_PIPELINE),
        (f"jq, {cpus} in parallel", t_jqn, f"xargs -P {cpus}"),
        ("ablate mine, --jobs 1", t_a1, f"all metrics; peak RSS {rss1:.0f} MB"),
        (f"ablate mine, --jobs {cpus}", t_an, f"all metrics; peak RSS {rssn:.0f} MB"),
    ]
    for name, t, note in rows:
        print(f"{name:28s} {t:7.2f} s   {note}")
    print(f"single process: ablate {t_jq1 / t_a1:.1f}x faster than jq; parallel: {t_jqn / t_an:.1f}x")
    print(
        f"ablate throughput: {total / t_a1 / 1e9:.2f} GB/s (1 process), {total / t_an / 1e9:.2f} GB/s ({cpus})"
    )
    histograms = {
        "jq serial": _histogram(jq1),
        "jq parallel": _histogram(jqn),
        "ablate --jobs 1": ours1,
        f"ablate --jobs {cpus}": oursn,
    }
    if len({tuple(sorted(h.items())) for h in histograms.values()}) != 1:
        for name, h in histograms.items():
            print(f"  {name:18s} {dict(sorted(h.items()))}")
        raise SystemExit("bench_mine: the tool histograms differ (above): ablate's figures are not jq's")
    print(f"tool histograms agree: {dict(sorted(ours1.items()))}")


if __name__ == "__main__":
    main()

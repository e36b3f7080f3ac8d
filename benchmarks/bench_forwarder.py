"""The forwarder's cost: what one request to the model costs more when it crosses the relay and the
forwarder (:mod:`ablate.isolate.seal`) than when it goes straight to the endpoint, and what sealing adds to a
session's start.

(a) per request: one client sends ``REQUESTS`` streamed ``/v1/messages`` requests on one kept-alive
connection to ``ablate.sim``, once directly and once through the relay (``relay.py``, handed its stream to a
forwarder in this process as fd 3, exactly as a sealed session's is) — the median and p90 of each, and the
difference; the forwarder records every exchange meanwhile (into a ``wire`` file, as in a run).
(b) per session: ``/bin/true`` under the bubblewrap fence alone and sealed (nsexec's ticket and seccomp
filter, ``--unshare-net``, the relay's Python start), median of ``STARTS``.

Run: ``python -m benchmarks.run forwarder``. The machine this ran on is shared and loaded: the figures are
noisy; compare the two columns of one run, not runs.

Measured on the shared 2-core machine (load average 10-11, timings noisy; bubblewrap 0.8.0, Python 3.11):

- (a) direct to the sim: median 0.36 ms (p90 0.56); through relay and forwarder: 0.94 ms (2.16); added
  ~0.6 ms per request, every exchange recorded. Before the relay set ``TCP_NODELAY`` the added cost was
  ~48 ms (Nagle's algorithm waiting on the client's delayed ACK).
- (b) ``/bin/true``: the fence alone 33 ms median, sealed 470 ms. Almost all of it is two interpreter
  starts (nsexec outside the fence, the relay inside), each 80-300 ms on this loaded machine (20-30 ms
  unloaded); ``--unshare-net`` itself costs no more than the fence. A ``claude -p`` start takes ~1.5 s of CPU.

Again at load average 5.7: (a) 0.38 ms direct, 1.01 ms relayed (+0.64 ms); (b) fence alone 6 ms, sealed
91 ms (p90 167).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ablate.isolate import relay
from ablate.isolate.fence import bwrap_path, fence_argv
from ablate.isolate.forwarder import Forwarder
from ablate.isolate.seal import seal
from ablate.sim import SimServer, script_from_data

REQUESTS = 200
STARTS = 10
CLIENT = r"""
import http.client, json, os, sys, time
from urllib.parse import urlsplit
url = urlsplit(os.environ["ANTHROPIC_BASE_URL"])
body = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 10, "stream": True, "system": "s" * 20000,
                   "messages": [{"role": "user", "content": "hello"}]})
conn = http.client.HTTPConnection(url.hostname, url.port)
out = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter()
    conn.request("POST", "/v1/messages", body=body, headers={"content-type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    out.append(time.perf_counter() - t)
print(json.dumps(out))
"""


def _times(argv: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()) -> list[float]:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, pass_fds=pass_fds)
    if proc.returncode != 0:
        raise SystemExit(f"client failed: {proc.stderr[-500:]}")
    times: list[float] = json.loads(proc.stdout.splitlines()[-1])
    return times


def _summary(label: str, times: list[float]) -> float:
    ms = sorted(t * 1000 for t in times)
    median = statistics.median(ms)
    print(f"  {label:<22} median {median:6.2f} ms  p90 {ms[int(len(ms) * 0.9)]:6.2f} ms  (n={len(ms)})")
    return median


def per_request(fwd: Forwarder, sim: SimServer, wire: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ANTHROPIC_BASE_URL": sim.base_url}
    client = [sys.executable, "-c", CLIENT, str(REQUESTS)]
    direct = _summary("direct to the sim", _times(client, env))
    token = fwd.ticket("bench")
    fwd.expect("bench", wire, item="bench")
    control = socket.socket(socket.AF_UNIX)
    control.connect(str(fwd.socket_path))
    control.sendall(f"{token} {sim.base_url}\n".encode())
    assert control.recv(3) == b"ok\n"
    fd = control.fileno()
    argv = [sys.executable, "-I", relay.__file__, str(fd), "--", *client]
    relayed = _summary("relay + forwarder", _times(argv, env, (fd,)))
    control.close()
    recorded = len(fwd.records("bench"))
    print(f"  added per request: {relayed - direct:+.2f} ms (median); {recorded} exchanges recorded")


def per_session() -> None:
    bwrap = bwrap_path()
    if bwrap is None:
        print("  (b) skipped: no bubblewrap")
        return
    with tempfile.TemporaryDirectory(prefix="ablate-bench-") as tmp:
        plain = fence_argv(bwrap, ["/bin/true"], writable=[Path(tmp)], cwd=tmp)
        runs = {"fence alone": plain, "fence, sealed": seal(plain)}
        for label, argv in runs.items():
            times = []
            for _ in range(STARTS):
                argv_now = seal(plain) if label == "fence, sealed" else argv  # a ticket is spent per start
                t = time.perf_counter()
                subprocess.run(argv_now, check=True, capture_output=True)
                times.append(time.perf_counter() - t)
            _summary(label, times)


def main() -> None:
    print("(a) one streamed /v1/messages request (20 KB system prompt), kept-alive connection:")
    fwd = Forwarder()
    try:
        with (
            SimServer(script_from_data({"default": {"text": "OK"}, "rules": []})) as sim,
            tempfile.TemporaryDirectory(prefix="ablate-bench-") as tmp,
        ):
            per_request(fwd, sim, Path(tmp) / "wire.jsonl")
    finally:
        fwd.close()
    print(f"(b) session start, /bin/true, median of {STARTS}:")
    per_session()


if __name__ == "__main__":
    main()

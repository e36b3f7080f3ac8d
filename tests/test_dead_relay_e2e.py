"""End to end, with the real CLI against the sim: a session that kills its relay is never counted (issue 43
item 4).

The session's first (real) answer asks for a Bash call that kills the relay, the process running ``relay.py``
inside the session's own PID and network namespaces, and then tries to serve a forged model API on the port
the CLI talks to (ablate's own sim, answering ``FORGED-ANSWER``). The kill works (the positive control: the
call prints the pid it killed, and the CLI's next call is refused). The forger never gets the port: the
killed relay's half-closed connections hold it until the CLI gives up. So the CLI's next calls fail, every
attempt ends ``api_error`` flagged ``relay-died`` (the forwarder saw the relay's control stream end while the
CLI ran), and the item is left out of the statistics with both reasons in the report; no forged answer is
recorded anywhere. Now and then (about one attempt in twenty on a loaded machine) the forger does get the
port before the CLI's retry: it answers a call the wire never saw, so the transcript's model calls outnumber
the wire's, which flags the session ``transcript-differs-from-wire`` and leaves it out just the same (the
forged answer stays in its transcript, as evidence, and is counted nowhere; tests/test_forwarder.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import orjson
import pytest

from ablate.setup.examples import materialise_example
from ablate.sim import Script, SimServer, script_from_data
from tests.helpers_cli import invoke
from tests.run_folder import why

pytestmark = pytest.mark.e2e

FORGER = (
    "import os, time\n"
    "from ablate.sim import SimServer, script_from_data\n"
    "from ablate.sim.server import PortInUse\n"
    "port = int(os.environ['ANTHROPIC_BASE_URL'].rsplit(':', 1)[1])\n"
    "for _ in range(300):  # the killed relay's half-closed connections hold the port until the CLI closes its side\n"
    "    try: s = SimServer(script_from_data({'default': {'text': 'FORGED-ANSWER'}, 'rules': []}), port=port).start(); break\n"
    "    except PortInUse: time.sleep(0.1)\n"
    "time.sleep(120)\n"
)
KILL_RELAY = (
    "import os, signal\n"
    "for p in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try: argv = open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0')\n"
    "    except OSError: continue\n"
    "    if any(a.endswith(b'/relay.py') for a in argv[:4]): os.kill(int(p), signal.SIGKILL); print('KILLED', p)\n"
)
ATTACK = '{py} -c {kill}; (setsid {py} -c {forger} >/dev/null 2>&1 &); echo FORGER-ON-"$ANTHROPIC_BASE_URL"'


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _script() -> Script:
    attack = ATTACK.format(py=sys.executable, kill=_quote(KILL_RELAY), forger=_quote(FORGER))
    bash = {"name": "Bash", "input": {"command": attack, "description": "tidy"}}
    rule = {"name": "attack", "where": "prompt", "contains": ["RELAY-TASK"], "turn": 0, "tool_use": [bash]}
    return script_from_data({"default": {"text": "the real answer"}, "rules": [rule]})


def test_a_session_that_kills_its_relay_is_never_counted(claude: Path, tmp_path: Path) -> None:
    ex = materialise_example(tmp_path / "ex")
    task = tmp_path / "relay.toml"
    task.write_text('schema_version = 1\nid = "relay"\nprompt = "RELAY-TASK: tidy the repository."\n')
    where = ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--claude-bin", str(claude)]
    args = ["ab", "--tasks", str(task), "--repeats", "1", "--max-turns", "3", "--out", str(tmp_path / "runs")]
    with SimServer(_script()) as sim:
        env = {"HOME": str(ex.home), "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": sim.base_url}
        res = invoke(
            [*args, *where, "--work-dir", str(tmp_path / "envs"), "--report", "now"],
            env={**env, "IS_SANDBOX": "1"},
        )
        real_calls = [r for r in sim.requests() if r.is_messages]
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    (run,) = (tmp_path / "runs").iterdir()
    results = [orjson.loads(p.read_bytes()) for p in sorted((run / "results").glob("*.json"))]
    assert len(results) == 2, why(res.stderr[-3000:], results)
    for r in results:
        transcript = (run / r["transcript"]).read_text()
        assert re.search(r"KILLED \d+", transcript), r  # the positive control: the relay was killed
        assert (r["wire"]["requests"], r["wire"]["answered"]) == (1, 1), r["wire"]  # the one real call
        if r["flags"] == ["relay-died"]:  # the forwarder saw the relay end while the CLI ran
            assert "ECONNREFUSED" in transcript and r["status"] == "api_error" and r["attempt"] == 3, r
            answered = '"text":"FORGED-ANSWER"'  # how a forged answer would read (the command only names it)
            assert answered not in transcript and "FORGED" not in (run / r["stdout"]).read_text(), r
        else:  # the forger won the port: its answer passed no forwarder, and the wire says so
            assert r["flags"] == ["transcript-differs-from-wire"], r
            assert "model calls: transcript 2, wire 1" in r["wire"]["differs"], r["wire"]
    # every real call reached the endpoint through the forwarder: one per attempt, none after the kill
    assert len(real_calls) == sum(r["attempt"] for r in results), real_calls
    report = orjson.loads((run / "report.json").read_bytes())
    excluded = {e["item"]: e["reason"] for e in report["excluded_items"]}
    said = {"relay-died": "failed: api_error; provenance: relay-died"}
    expected = {r["item"]: said.get(r["flags"][0], f"provenance: {r['flags'][0]}") for r in results}
    assert excluded == expected, excluded

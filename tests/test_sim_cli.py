"""``ablate sim check`` and ``ablate sim serve``."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
from typer.testing import CliRunner

from ablate.cli.sim import app
from ablate.core.resources import data_dir
from ablate.sim import SimServer, iter_requests

# The sim group on its own (``ablate sim`` = this app), so a half-built sibling group cannot break this test.
SIM_CLI = [sys.executable, "-c", "from ablate.cli.sim import app; app(prog_name='ablate sim')"]
runner = CliRunner()


def test_every_command_has_help() -> None:
    for command in ("serve", "check"):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0, result.output
        assert "Usage" in result.output


def test_check_ok() -> None:
    path = data_dir("shadow") / "sim" / "default.toml"
    result = runner.invoke(app, ["check", str(path)])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output and "demo-read" in result.output
    as_json = runner.invoke(app, ["check", str(path), "--json"])
    assert orjson.loads(as_json.output)["ok"] is True


def test_check_malformed_exits_2_with_located_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[rules]]\nname = "a"\ntext = "x"\nturn = -1\n')
    result = runner.invoke(app, ["check", str(path)])
    assert result.exit_code == 2
    assert f"{path}: rules.0.turn: " in result.output


def test_check_missing_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2
    assert "no such file" in result.output


def test_serve_prints_json_serves_and_exits_130_on_ctrl_c(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    proc = subprocess.Popen(
        [*SIM_CLI, "serve", "--json", "--log", str(log), "--seed", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        lines: list[bytes] = []
        while not b"}" in b"".join(lines):  # noqa: E713 - the JSON object ends with a closing brace
            line = proc.stdout.readline()
            assert line, "serve exited before printing its address"
            lines.append(line)
        info = orjson.loads(b"".join(lines))
        assert (
            info["url"] == f"http://127.0.0.1:{info['port']}"
            and info["log"] == str(log)
            and info["seed"] == 3
        )
        req = urllib.request.Request(
            info["url"] + "/v1/messages",
            data=orjson.dumps(
                {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
            ),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert orjson.loads(resp.read())["content"][0]["text"] == "OK."
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 130
    assert b"interrupted" in err
    assert [r.rule for r in iter_requests(log)] == ["default"]


def test_serve_on_a_busy_port_exits_2(tmp_path: Path) -> None:
    with SimServer() as busy:
        result = runner.invoke(app, ["serve", "--port", str(busy.port), "--log", str(tmp_path / "l.jsonl")])
    assert result.exit_code == 2
    assert "already in use" in result.output

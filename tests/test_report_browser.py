"""report.html in a real headless browser (Debian's chromium, driven over the DevTools protocol on a pipe).

It must render with no console errors and no network requests, show the ranking table and the forest plot,
and produce a screenshot that is not blank. No new dependency: the DevTools protocol is JSON messages
separated by NUL bytes on file descriptors 3 (to the browser) and 4 (from it) with --remote-debugging-pipe.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import io
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ablate.report import write_report
from tests.report_support import make_run
from tests.test_report import CELLS, TASKS, planted

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--remote-debugging-pipe",
    "--window-size=1280,900",
]


def chromium_bin() -> str | None:
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _high(fd: int) -> int:
    """Move ``fd`` to a number >= 10, so the shell's ``3<&N 4>&M`` redirections cannot clobber each other."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return new


class DevTools:
    """A minimal DevTools-protocol client over the browser's debugging pipe."""

    def __init__(self, binary: str, profile: Path) -> None:
        self._to_r, self._to_w = (_high(fd) for fd in os.pipe())
        self._from_r, self._from_w = (_high(fd) for fd in os.pipe())
        args = " ".join(f"'{a}'" for a in [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"])
        self.proc = subprocess.Popen(
            ["bash", "-c", f"exec {args} 3<&{self._to_r} 4>&{self._from_w}"],
            pass_fds=(self._to_r, self._from_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(self._to_r)
        os.close(self._from_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no message from the browser")
            chunk = os.read(self._from_r, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed the pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        msg: dict[str, Any] = json.loads(raw)
        return msg

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + 30
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read_message(deadline))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_w)
        os.close(self._from_r)


def opened(tools: DevTools, page: Path) -> str:
    """A new tab with the page loaded (its console, log and network recorded): the tab's session id."""
    target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session: str = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Runtime", "Log", "Network", "Page"):
        tools.call(f"{domain}.enable", session=session)
    tools.events.clear()
    tools.call("Page.navigate", {"url": page.as_uri()}, session=session)
    tools.wait_for("Page.loadEventFired")
    time.sleep(0.5)
    return session


def evaluate(tools: DevTools, session: str, expression: str) -> Any:
    """The JSON value of a script run in the tab."""
    probe = tools.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
    return json.loads(probe["result"]["value"])


def errors(tools: DevTools) -> list[dict[str, Any]]:
    """The exceptions and console or log errors the browser reported."""
    return [
        e
        for e in tools.events
        if e.get("method") == "Runtime.exceptionThrown"
        or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "assert"))
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
    ]


@pytest.fixture
def chromium() -> str:
    """Debian's chromium; `make test` installs it. CI fails (never skips) when it is missing."""
    path = chromium_bin()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; run `make chromium`")
        pytest.skip("chromium not installed (run `make chromium`)")
    return path


def test_report_html_renders_offline_with_ranking_and_plot(chromium: str, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", cells=CELLS, tasks=TASKS, repeats=12, outcome=planted)
    written = write_report(run, formats=["html"])
    html_path = written.paths["html"]
    text = html_path.read_text()
    assert "<metadata>" not in text and "<svg" in text
    for fetch in ('src="http', 'href="http', "url(http", "@import", "<link", "<script src"):
        assert fetch not in text, fetch
    tools = DevTools(chromium, tmp_path / "profile")
    try:
        session = opened(tools, html_path)
        state = evaluate(
            tools,
            session,
            """JSON.stringify((() => {
                const box = sel => { const e = document.querySelector(sel); if (!e) return null;
                    const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
                    return {w: r.width, h: r.height, visible: s.visibility !== 'hidden' && s.display !== 'none'}; };
                return {ranking: box('#ranking'), plot: box('#forest-plot svg'),
                        rows: document.querySelectorAll('#ranking tbody tr').length,
                        caveats: document.body.innerText.includes('Caveats')};
            })())""",
        )
        shot = tools.call("Page.captureScreenshot", {"format": "png"}, session=session)
    finally:
        tools.close()
    requests = [
        e["params"]["request"]["url"]
        for e in tools.events
        if e.get("method") == "Network.requestWillBeSent"
        and not e["params"]["request"]["url"].startswith(("file:", "data:", "about:"))
    ]
    assert errors(tools) == []
    assert requests == []
    assert any(e.get("method") == "Network.requestWillBeSent" for e in tools.events)  # the recorder works
    assert state["ranking"] and state["ranking"]["visible"] and state["ranking"]["w"] > 200
    assert state["rows"] == 3 and state["caveats"]
    assert (
        state["plot"] and state["plot"]["visible"] and state["plot"]["w"] > 300 and state["plot"]["h"] > 100
    )
    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("L")
    histogram = image.histogram()
    dark, light = sum(histogram[:128]), sum(histogram[128:])
    assert image.size[0] >= 1000  # text on a background, not a blank page
    assert dark > 0.005 * image.size[0] * image.size[1] and light > 0.5 * image.size[0] * image.size[1]


def test_a_flipped_pair_opens_from_the_ranking_with_both_answers_and_the_diff(
    chromium: str, tmp_path: Path
) -> None:
    from tests.test_show import CELLS as FLIP_CELLS, _outcome, _session

    run = make_run(
        tmp_path / "run", cells=FLIP_CELLS, tasks=["greet", "validate"], repeats=3, outcome=_outcome
    )
    _session(run, "greet", "C0", 0, claude_md=True, tokens=1200)
    _session(run, "greet", "C1", 0, claude_md=False, tokens=1100)
    html_path = write_report(run, formats=["html"]).paths["html"]
    tools = DevTools(chromium, tmp_path / "profile")
    try:
        session = opened(tools, html_path)
        closed = evaluate(tools, session, "JSON.stringify(document.querySelectorAll('.pair-view *').length)")
        evaluate(
            tools,
            session,
            "JSON.stringify(!document.querySelector('#ranking a[href=\"#pairs-C1\"]').click())",
        )
        time.sleep(0.3)
        state = evaluate(
            tools,
            session,
            """JSON.stringify((() => { const v = document.querySelector('#pairs-C1 .pair-view');
                const r = v.getBoundingClientRect();
                return {open: document.querySelector('#pairs-C1').open, text: v.innerText, w: r.width,
                        answers: [...v.querySelectorAll('.answer')].map(e => e.innerText),
                        removed: [...v.querySelectorAll('.ctxdiff .del')].map(e => e.innerText.trim()),
                        turns: v.querySelectorAll('details.turn').length, page: document.body.scrollWidth}; })())""",
        )
    finally:
        tools.close()
    assert errors(tools) == [] and closed == 0  # nothing drawn before it is opened
    assert state["open"] and state["answers"] == ["Done: app.py now prints `Hello, world!`."] * 2
    assert state["removed"] == ["-# Global rules", "-Prefer small diffs.", "-@axioms.md"]
    assert "C0 1210 tokens, C1 1110 tokens" in state["text"] and state["turns"] == 5
    assert state["w"] > 1000 and state["page"] <= 1280  # two columns, readable at 1280 px

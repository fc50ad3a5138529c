"""The HTML view in a real browser: Debian's headless Chromium, driven over the DevTools
protocol (``websockets``). It must render with no console errors and no network
requests, show the graph and the timeline, and show a step's payload when its row is
clicked. A screenshot is saved to ``test-artifacts/view.png``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hermes_fsm.events.recording import Recording, parse_recording, recording_text
from hermes_fsm.testing import ScriptedBrain
from hermes_fsm.viz.view import render_view
from tests.support import INTENT_TOOLS, graph_with, happy_script

websockets = pytest.importorskip("websockets", reason="the browser test needs `websockets`")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
STEP_TIMEOUT = 20.0

pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason="Debian's chromium is not installed (apt-get install chromium); .ci/run installs it")


class DevTools:
    """A minimal Chrome DevTools Protocol client over one page session."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.ids = itertools.count(1)
        self.session: str | None = None
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.socket:
            message = json.loads(raw)
            if "id" in message and message["id"] in self.pending:
                self.pending.pop(message["id"]).set_result(message)
            elif "method" in message:
                self.events.append(message)

    async def send(self, method: str, params: dict[str, Any] | None = None,
                   session: bool = True) -> dict[str, Any]:
        number = next(self.ids)
        request: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session and self.session:
            request["sessionId"] = self.session
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[number] = future
        await self.socket.send(json.dumps(request))
        reply = await asyncio.wait_for(future, STEP_TIMEOUT)
        assert "error" not in reply, f"{method}: {reply['error']}"
        return reply["result"]  # type: ignore[no-any-return]

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", {"expression": expression,
                                                      "returnByValue": True})
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    async def wait_for_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < deadline:
            for event in self.events:
                if event["method"] == method:
                    return event
            await asyncio.sleep(0.05)
        raise AssertionError(f"no {method} within {STEP_TIMEOUT}s")

    def errors(self) -> list[str]:
        out = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error",
                                                                                "assert"):
                out.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                out.append(f"log: {params['entry'].get('text')}")
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events
                if e["method"] == "Network.requestWillBeSent"]


def _start_chromium(profile: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-sync", "--disable-quic", "--disable-extensions", "--mute-audio",
         f"--user-data-dir={profile}", "--remote-debugging-port=0", "--window-size=1400,1000",
         "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)  # its own group: chromium and its children
        process.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)


async def _devtools_url(profile: Path, process: subprocess.Popen[bytes]) -> str:
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"chromium exited with {process.returncode} at start")
        if port_file.exists():
            lines = port_file.read_text(encoding="utf-8").split()
            if len(lines) >= 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        await asyncio.sleep(0.1)
    raise AssertionError("chromium wrote no DevToolsActivePort within 30s")


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[DevTools]:
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    process = _start_chromium(profile)
    try:
        url = await _devtools_url(profile, process)
        async with websockets.connect(url, max_size=64 * 2**20, open_timeout=STEP_TIMEOUT) as ws:
            tools = DevTools(ws)
            target = await tools.send("Target.createTarget", {"url": "about:blank"})
            attached = await tools.send("Target.attachToTarget",
                                        {"targetId": target["targetId"], "flatten": True})
            tools.session = attached["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                await tools.send(f"{domain}.enable")
            await tools.send("Emulation.setDeviceMetricsOverride",
                             {"width": 1400, "height": 1000, "deviceScaleFactor": 1,
                              "mobile": False})
            try:
                yield tools
            finally:
                tools.reader.cancel()
    finally:
        _stop(process)


@pytest.fixture
async def page_file(make_orchestrator: Any, tmp_path: Path) -> tuple[Path, Recording]:
    graph = graph_with()
    brain = ScriptedBrain(happy_script(intent=[{**INTENT_TOOLS, "confidence": 1.7},
                                               INTENT_TOOLS]))
    orchestrator = make_orchestrator(graph, brain=brain)
    await orchestrator.run_turn("s1", "How many <script>alert(1)</script> A1001 east?", "alice")
    await orchestrator.run_turn("s1", "And in the east, again?", "alice")
    recording = parse_recording(recording_text(orchestrator, "s1"), "<test>")
    path = tmp_path / "view.html"
    path.write_text(render_view(recording, graph), encoding="utf-8")
    return path, recording


async def test_the_view_renders_in_chromium_and_shows_a_clicked_steps_payload(
        browser: DevTools, page_file: tuple[Path, Recording]) -> None:
    path, recording = page_file
    url = path.as_uri()
    await browser.send("Page.navigate", {"url": url})
    await browser.wait_for_event("Page.loadEventFired")

    assert await browser.evaluate("document.querySelectorAll('svg.hermes-graph').length") == 1
    states = await browser.evaluate(
        "Array.from(document.querySelectorAll('svg.hermes-graph g.state'))"
        ".map(g => g.getAttribute('data-state'))")
    assert sorted(states) == sorted(graph_with().states)
    assert await browser.evaluate("document.querySelectorAll('tr.step').length") == len(
        recording.events)

    violation = next(e for e in recording.events if e.kind == "contract_violation")
    box = await browser.evaluate(
        f"(() => {{ const row = document.querySelector('tr.step[data-seq=\"{violation.seq}\"]');"
        " row.scrollIntoView({block: 'center'}); const r = row.getBoundingClientRect();"
        " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()")
    for kind in ("mousePressed", "mouseReleased"):
        await browser.send("Input.dispatchMouseEvent", {"type": kind, "x": box["x"],
                                                        "y": box["y"], "button": "left",
                                                        "clickCount": 1})
    shown = await browser.evaluate("document.getElementById('payload').textContent")
    assert json.loads(shown) == violation.model_dump(mode="json")
    chain = await browser.evaluate("document.getElementById('chain').textContent")
    assert "[user message]" in chain and "[tool call]" in chain  # the step's turn's chain
    assert "inventory_lookup" in chain and "[answer]" in chain
    assert await browser.evaluate(
        "document.querySelector('svg.hermes-graph g.state.active').getAttribute('data-state')"
    ) == "INTENT"

    shot = await browser.send("Page.captureScreenshot", {"format": "png"})
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "view.png").write_bytes(base64.b64decode(shot["data"]))

    await asyncio.sleep(0.2)  # let late console messages arrive
    assert browser.errors() == []
    assert [u for u in browser.requests() if u != url] == []

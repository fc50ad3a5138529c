"""MCP resources and prompts of a third-party server: npm's reference server
``@modelcontextprotocol/server-everything`` (the one the README's "Bring your own tools and
MCP servers" runs) over stdio. ``mcp list`` shows its resources and prompts, a plan reads
one of its resources on demand (``everything.read_resource``), and its ``args-prompt``
template loads into a turn whose intent the configuration names, with the intent's
parameter as the prompt's argument.

Needs ``npx``/``npm`` and the package (from the npm cache or registry); without them the
tests skip, saying why.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hermes_fsm.cli.main import main
from hermes_fsm.config.settings import HermesConfig, MCPServerConfig
from hermes_fsm.config.toolbox import Toolbox
from hermes_fsm.testing import ScriptedBrain, capture_events, demo_orchestrator
from tests.support import MEMORY_NONE, PLAN_EMPTY, happy_script

PACKAGE = "@modelcontextprotocol/server-everything@2026.8.31"  # as the README pins it
DOCUMENT = "demo://resource/static/document/features.md"
PROMPTS = {"args-prompt": {"intents": ["weather_query"], "arguments": {"city": "city"}}}

pytestmark = pytest.mark.skipif(shutil.which("npm") is None or shutil.which("npx") is None,
                                reason="needs npm and npx (node) for server-everything")


@pytest.fixture(scope="module")
def everything_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The server's executable, installed into a folder of the test's own."""
    folder = tmp_path_factory.mktemp("everything")
    env = {**os.environ, "npm_config_cache": os.environ.get(
        "npm_config_cache", str(Path.home() / ".npm"))}
    try:
        done = subprocess.run(["npm", "install", "--silent", "--no-save", "--prefer-offline",
                               "--prefix", str(folder), PACKAGE], env=env, capture_output=True,
                              text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm install {PACKAGE} did not finish in 300 s (no registry, no cache?)")
    binary = folder / "node_modules" / ".bin" / "mcp-server-everything"
    if done.returncode != 0 or not binary.exists():
        pytest.skip(f"npm install {PACKAGE} failed (offline without a cached copy?): "
                    f"{(done.stderr or done.stdout).strip()[-300:]}")
    return str(binary)


def server(binary: str, **options: Any) -> MCPServerConfig:
    return MCPServerConfig(transport="stdio", command=binary, resources=True,
                           prompts=PROMPTS, connect_timeout_s=60, **options)


async def started(config: HermesConfig) -> Toolbox:
    box = Toolbox.from_config(config)
    async with asyncio.timeout(90):
        await box.mcp.start()
    return box


def test_mcp_list_shows_its_resources_and_prompts(everything_bin: str, tmp_path: Path) -> None:
    path = tmp_path / "hermes.yaml"
    path.write_text(yaml.safe_dump({"mcp_servers": {"everything": server(
        everything_bin).model_dump(mode="json", exclude_defaults=True)}}), encoding="utf-8")
    out = io.StringIO()
    assert main(["--config", str(path), "mcp", "list"], out=out) == 0
    text = out.getvalue()
    assert "everything" in text and "ready" in text
    assert DOCUMENT in text  # its resources, by URI
    assert "args-prompt" in text and "simple-prompt" in text  # its prompts


async def test_a_plan_reads_one_of_its_resources_on_demand(everything_bin: str) -> None:
    box = await started(HermesConfig(mcp_servers={"everything": server(everything_bin)}))
    outputs: list[Any] = []

    def emit(kind: Any, **fields: Any) -> None:  # the event keeps the whole output
        if kind.model_fields["kind"].default == "tool_call_finished":
            outputs.append(fields.get("output"))

    try:
        [read] = await box.executor.execute(
            [("c1", "everything.read_resource", {"uri": DOCUMENT})], emit)
        [bad] = await box.executor.execute(
            [("c2", "everything.read_resource", {"uri": "demo://nowhere"})])
    finally:
        await box.mcp.aclose()
    assert read["success"], read  # (the model sees a preview of a long document)
    assert outputs[0]["uri"] == DOCUMENT and len(outputs[0]["text"]) > 100
    assert bad["error_code"] == "VALIDATION_FAILED"


async def test_its_prompt_loads_when_the_intent_matches(everything_bin: str) -> None:
    box = await started(HermesConfig(mcp_servers={"everything": server(everything_bin)}))
    assert "everything.args-prompt" in box.registry.prompts
    intent = {"intent_type": "weather_query", "parameters": {"city": "Paris"},
              "confidence": 0.9, "needs_tools": False}
    brain = ScriptedBrain(happy_script(intent=[intent], plan=[PLAN_EMPTY],
                                       response=[{"text": "sunny", "evidence": []}],
                                       memory_commit=[MEMORY_NONE]))
    orchestrator = demo_orchestrator(tools=box.registry, executor=box.executor, brain=brain)
    try:
        with capture_events(orchestrator) as seen:
            await orchestrator.run_turn("s1", "what's the weather like in Paris?")
    finally:
        await box.mcp.aclose()
    loaded = [e for e in seen.events if e.kind == "prompt_loaded"]
    assert loaded and all(e.prompt == "everything.args-prompt" and e.error is None
                          and e.arguments == {"city": "Paris"} and e.tokens > 0
                          for e in loaded), loaded
    [response] = brain.requests_for("response")
    assert "Guidance from everything.args-prompt" in response.memory
    assert "Paris" in response.memory
    assert "Guidance from" not in brain.requests_for("intent")[0].memory

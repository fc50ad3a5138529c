"""MCP servers as tool sources, against real servers in subprocesses.

Third-party servers from PyPI over stdio (``mcp-server-time``, ``mcp-server-git`` on a
temporary repository), the SDK demo server over streamable HTTP on 127.0.0.1, and the
dependency-free demo calendar server over stdio (2025-11-25 handshake).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from mcp import MCPError
from mcp.types import HEADER_MISMATCH

from hermes_fsm.cli.main import main
from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import HermesConfig, MCPServerConfig
from hermes_fsm.contracts.retry import RetryPolicy
from hermes_fsm.contracts.tools import Fallback, default_tool_contract_dir, load_tool_contract
from hermes_fsm.errors import ToolCallFailed
from hermes_fsm.events.model import ToolCallFinished, ToolCallProgress
from hermes_fsm.tools.executor import ToolExecutor
from hermes_fsm.tools.mcp.connection import MCPConnection
from hermes_fsm.tools.registry import ToolRegistry

BOUND = 60.0  # a broken connection fails the test in this time instead of hanging CI
CALENDAR_SCRIPT = str(Path(__file__).resolve().parents[1] / "hermes_fsm" / "demo" / "calendar.py")
BIN = Path(sys.executable).parent


def stdio(command: str, *args: str, **options: Any) -> MCPServerConfig:
    return MCPServerConfig(transport="stdio", command=command, args=list(args), **options)


def calendar(**options: Any) -> MCPServerConfig:
    return stdio("python", CALENDAR_SCRIPT, **options)


async def connect(name: str, config: MCPServerConfig, registry: ToolRegistry | None = None,
                  pinned: dict[str, Any] | None = None) -> MCPConnection:
    connection = MCPConnection(name, config, registry if registry is not None else ToolRegistry(),
                               pinned)
    async with asyncio.timeout(BOUND):
        await connection.start()
    return connection


@pytest.fixture
async def demo_calendar() -> AsyncIterator[MCPConnection]:
    connection = await connect("demo", calendar(restart_backoff_s=0.05))
    yield connection
    await connection.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """The SDK demo server over streamable HTTP on a free port of 127.0.0.1."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "hermes_fsm.demo.mcp_server", "--http", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + BOUND
    try:
        while True:  # readiness = the port accepts connections (the server has no other signal)
            assert process.poll() is None, "the demo HTTP server exited at start"
            assert time.monotonic() < deadline, "the demo HTTP server did not listen in time"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


# --- third-party servers from PyPI over stdio --------------------------------------------


async def test_mcp_server_time_lists_and_calls_over_stdio() -> None:
    registry = ToolRegistry()
    connection = await connect(
        "time", stdio(str(BIN / "mcp-server-time"), "--local-timezone", "UTC"), registry)
    try:
        assert connection.status == "ready"
        assert connection.protocol_version == "2026-07-28"
        assert {"time.get_current_time", "time.convert_time"} <= set(registry.names())
        tool = registry.get("time.get_current_time")
        assert tool.source == "mcp:time" and tool.side_effects == "read"
        (envelope,) = await ToolExecutor(registry).execute(
            [("c1", "time.get_current_time", {"timezone": "UTC"})])
        assert envelope["success"] is True
        assert envelope["output"]["timezone"] == "UTC"
        assert set(envelope["output"]) == {"timezone", "datetime", "day_of_week", "is_dst"}
    finally:
        await connection.aclose()
    assert registry.names() == []


async def test_an_mcp_tool_error_becomes_a_non_retryable_envelope() -> None:
    registry = ToolRegistry()
    connection = await connect(
        "time", stdio(str(BIN / "mcp-server-time"), "--local-timezone", "UTC"), registry)
    try:
        (envelope,) = await ToolExecutor(registry).execute(
            [("c1", "time.get_current_time", {"timezone": "Nowhere/Atlantis"})])
    finally:
        await connection.aclose()
    assert (envelope["error_code"], envelope["retryable"]) == ("TOOL_ERROR", False)
    assert "Invalid timezone" in envelope["message"]


@pytest.fixture
def git_repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    (repo / "notes.txt").write_text("first\n")
    for args in (["init", "-q", "-b", "main"], ["add", "notes.txt"],
                 ["commit", "-q", "-m", "first commit"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, timeout=30)
    (repo / "notes.txt").write_text("first\nsecond\n")
    return repo


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_mcp_server_git_serves_only_the_allowed_tools_on_a_temporary_repository(
        git_repository: Path) -> None:
    registry = ToolRegistry()
    config = stdio(str(BIN / "mcp-server-git"), "--repository", str(git_repository),
                   enabled_tools=["git_status", "git_log"])
    connection = await connect("git", config, registry)
    try:
        assert registry.names() == ["git.git_log", "git.git_status"]
        executor = ToolExecutor(registry)
        status, log = await executor.execute([
            ("c1", "git.git_status", {"repo_path": str(git_repository)}),
            ("c2", "git.git_log", {"repo_path": str(git_repository)})])
    finally:
        await connection.aclose()
    assert status["success"] and "notes.txt" in json.dumps(status["output"])
    assert log["success"] and "first commit" in json.dumps(log["output"])


# --- the SDK demo server over streamable HTTP -----------------------------------------------


async def test_the_demo_server_over_http_lists_and_calls_tools(http_server: str) -> None:
    registry = ToolRegistry()
    connection = await connect("demo", MCPServerConfig(transport="http", url=http_server),
                               registry)
    try:
        assert connection.status == "ready"
        assert connection.protocol_version == "2026-07-28"
        assert "demo.calendar_query" in registry.names()
        (envelope,) = await ToolExecutor(registry).execute(
            [("c1", "demo.calendar_query", {"query": "A1001", "warehouse": "east"})])
    finally:
        await connection.aclose()
    assert envelope["output"]["events"][0]["date"] == "2026-12-03"


async def test_the_demo_server_over_http_lists_and_reads_resources_and_prompts(
        http_server: str) -> None:
    connection = await connect("demo", MCPServerConfig(transport="http", url=http_server))
    try:
        assert (connection.resource_count, connection.prompt_count) == (2, 2)
        resources = await connection.list_resources()
        assert [r["uri"] for r in resources] == ["demo://calendar", "demo://stock-policy"]
        (text,) = await connection.read_resource("demo://calendar")
        assert json.loads(text)[0]["title"].startswith("Restock A1001")
        prompts = {p["name"]: p["arguments"] for p in await connection.list_prompts()}
        assert prompts == {"plan_my_day": ["date"], "return_request": ["order_id"]}
        (message,) = await connection.get_prompt("plan_my_day", {"date": "2026-12-08"})
        assert "Stocktake" in message["text"]
    finally:
        await connection.aclose()


async def test_progress_of_an_mcp_call_becomes_events(http_server: str) -> None:
    registry = ToolRegistry()
    connection = await connect("demo", MCPServerConfig(transport="http", url=http_server),
                               registry)
    events: list[tuple[Any, dict[str, Any]]] = []
    try:
        (envelope,) = await ToolExecutor(registry).execute(
            [("c1", "demo.count_slowly", {"steps": 3})],
            lambda kind, **fields: events.append((kind, fields)))
    finally:
        await connection.aclose()
    assert envelope["output"] == {"counted": 3}
    progress = [(f["progress"], f["total"]) for k, f in events if k is ToolCallProgress]
    assert progress == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]


async def test_tools_list_changed_refreshes_the_catalog(http_server: str) -> None:
    registry = ToolRegistry()
    connection = await connect("demo", MCPServerConfig(transport="http", url=http_server),
                               registry)
    try:
        listed = connection.next_listing()
        await connection.call("add_tool", {"name": "echo_fresh"})
        async with asyncio.timeout(BOUND):
            await listed.wait()
        assert "demo.echo_fresh" in registry.names()
    finally:
        await connection.aclose()


# --- the dependency-free demo calendar over stdio (2025-11-25 handshake) ---------------------


async def test_a_2025_era_server_is_served_through_the_initialize_fallback(
        demo_calendar: MCPConnection) -> None:
    assert demo_calendar.protocol_version == "2025-11-25"
    assert demo_calendar.server_name == "hermes-demo-calendar"
    result = await demo_calendar.call("calendar_query", {"query": "stocktake"})
    assert result["events"] == [{"date": "2026-12-08", "title": "Stocktake",
                                 "warehouse": "east"}]


async def test_a_server_killed_mid_call_gives_an_unknown_outcome_restarts_and_serves_again(
        demo_calendar: MCPConnection) -> None:
    registry = demo_calendar.registry
    pid = (await demo_calendar.call("server_pid", {}))["pid"]
    killed = asyncio.Event()

    def emit(kind: Any, **fields: Any) -> None:
        if kind is ToolCallProgress and not killed.is_set():
            os.kill(pid, signal.SIGKILL)  # the call is provably in flight
            killed.set()

    executor = ToolExecutor(registry)
    tool = registry.get("demo.count_slowly")  # one attempt: show the error, not a retry
    assert tool.contract is not None
    tool.contract = tool.contract.model_copy(update={"retry": RetryPolicy(max_attempts=1)})
    async with asyncio.timeout(BOUND):
        (envelope,) = await executor.execute(
            [("c1", "demo.count_slowly", {"steps": 10_000, "delay_s": 0.01})], emit)
    assert killed.is_set()
    # sent, then the server died: the outcome is unknown (retryable: the tool is a read)
    assert (envelope["error_code"], envelope["retryable"]) == ("OUTCOME_UNKNOWN", True)
    assert "died" in envelope["message"]
    assert await demo_calendar.wait_ready(BOUND)
    (again,) = await executor.execute([("c2", "demo.server_pid", {})])
    assert again["success"] and again["output"]["pid"] != pid
    assert demo_calendar.restarts == 1


async def test_a_server_that_never_becomes_ready_has_no_tools_and_says_why() -> None:
    registry = ToolRegistry()
    connection = await connect(
        "broken", stdio("python", "-c", "import sys; print('no config', file=sys.stderr); "
                        "sys.exit(3)"), registry)
    try:
        assert connection.status == "failed"
        assert registry.names() == []
        assert connection.last_error is not None and "no config" in connection.last_error
    finally:
        await connection.aclose()


async def test_a_server_that_never_answers_the_handshake_times_out() -> None:
    connection = await connect("mute", stdio("python", "-c", "import time; time.sleep(60)",
                                             connect_timeout_s=0.5))
    try:
        assert connection.status == "failed"
        assert "no handshake within 0.5s" in (connection.last_error or "")
    finally:
        await connection.aclose()


def test_mcp_list_says_why_a_server_is_not_ready(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "hermes.yaml"
    config.write_text(yaml.safe_dump({"mcp_servers": {
        "demo": {"transport": "stdio", "command": "python", "args": [CALENDAR_SCRIPT]},
        "broken": {"transport": "stdio", "command": "python",
                   "args": ["-c", "import sys; print('missing API key', file=sys.stderr); "
                            "sys.exit(3)"]}}}))
    assert main(["mcp", "list", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "demo: ready" in out and "protocol=2025-11-25" in out and "tools=4" in out
    assert "broken: failed" in out and "missing API key" in out
    assert main(["mcp", "list", "--json", "--config", str(config)]) == 0
    servers = {s["name"]: s for s in json.loads(capsys.readouterr().out)["servers"]}
    assert (servers["demo"]["resources"], servers["demo"]["prompts"]) == (2, 2)
    assert servers["broken"]["status"] == "failed" and servers["broken"]["tools"] == 0


async def test_a_drifted_server_schema_is_refused_with_the_diff() -> None:
    pinned = load_tool_contract(default_tool_contract_dir() / "demo.calendar_query.yaml")
    schema = {**pinned.input_schema, "required": ["query", "warehouse"]}
    stale = pinned.model_copy(update={"input_schema": schema})
    registry = ToolRegistry()
    connection = await connect("demo", calendar(), registry, {"demo.calendar_query": stale})
    try:
        assert "demo.calendar_query" not in registry.names()
        assert "demo.server_pid" in registry.names()  # the other tools are unaffected
        (problem,) = connection.problems
        assert "demo.calendar_query drifted from its pinned contract" in problem
        assert "/properties/warehouse" in problem
    finally:
        await connection.aclose()


async def test_a_pinned_contract_that_matches_governs_the_mcp_tool() -> None:
    pinned = load_tool_contract(default_tool_contract_dir() / "demo.calendar_query.yaml")
    registry = ToolRegistry()
    connection = await connect("demo", calendar(), registry, {"demo.calendar_query": pinned})
    try:
        assert registry.get("demo.calendar_query").contract == pinned
        assert connection.problems == []
    finally:
        await connection.aclose()


# --- the main job -------------------------------------------------------------------------


async def test_the_default_turn_calls_a_local_tool_and_an_mcp_tool_and_answers_342() -> None:
    async with asyncio.timeout(BOUND), build_orchestrator(HermesConfig()) as orchestrator:
        result = await orchestrator.run_turn(
            None, "How many A1001 are left in the east warehouse?")
    finished = [e for e in result.events if e.kind == "tool_call_finished"]
    assert [(e.tool, e.source, e.ok) for e in finished] == [
        ("inventory_lookup", "local", True), ("demo.calendar_query", "mcp:demo", True)]
    assert result.path == ["IDLE", "INTENT", "PLANNING", "EXECUTION", "RESULT", "RESPONSE",
                           "MEMORY_COMMIT", "IDLE"]
    assert "342" in result.answer and "2026-12-03" in result.answer
    assert orchestrator.services.tools.find("demo.calendar_query") is None  # stopped


async def test_a_hanging_mcp_tool_returns_a_timeout_envelope_and_the_server_serves_on(
        demo_calendar: MCPConnection) -> None:
    registry = demo_calendar.registry
    tool = registry.get("demo.count_slowly")
    assert tool.own_timeout  # the MCP client's request timeout bounds the call
    assert tool.contract is not None
    tool.contract = tool.contract.model_copy(update={"retry": RetryPolicy(max_attempts=1)})
    tool.timeout_s = 0.3
    started = time.perf_counter()
    async with asyncio.timeout(BOUND):
        (envelope,) = await ToolExecutor(registry).execute(
            [("c1", "demo.count_slowly", {"steps": 10_000, "delay_s": 0.01})])
    elapsed = time.perf_counter() - started
    assert (envelope["error_code"], envelope["retryable"]) == ("TIMEOUT", True), envelope
    assert elapsed < 5.0  # bounded by the tool's budget, not by the 100 s the tool would take
    (again,) = await ToolExecutor(registry).execute([("c2", "demo.server_pid", {})])
    assert again["success"]


@pytest.fixture
async def lying_calendar() -> AsyncIterator[MCPConnection]:
    """The demo calendar made to answer events without the `warehouse` its schema requires."""
    connection = await connect("liar", calendar(env={"HERMES_DEMO_CALENDAR_LIES": "1"}))
    yield connection
    await connection.aclose()


def with_policy(connection: MCPConnection, policy: Any) -> Any:
    tool = connection.registry.get("liar.calendar_query")
    assert tool.contract is not None
    tool.contract = tool.contract.model_copy(update={"on_output_violation": policy})
    return tool


async def test_an_mcp_output_breaking_its_contract_fails_under_policy_fail(
        lying_calendar: MCPConnection) -> None:
    with_policy(lying_calendar, "fail")
    events: list[tuple[Any, dict[str, Any]]] = []
    (envelope,) = await ToolExecutor(lying_calendar.registry).execute(
        [("c1", "liar.calendar_query", {"query": "A1001"})],
        lambda kind, **fields: events.append((kind, fields)))
    assert (envelope["error_code"], envelope["retryable"]) == ("OUTPUT_VIOLATION", False)
    assert "is a required property" in envelope["message"]
    (finished,) = [f for k, f in events if k is ToolCallFinished]
    assert "is a required property" in finished["output_violation"]


async def test_an_mcp_output_breaking_its_contract_passes_under_policy_log_only(
        lying_calendar: MCPConnection) -> None:
    with_policy(lying_calendar, "log_only")
    events: list[tuple[Any, dict[str, Any]]] = []
    (envelope,) = await ToolExecutor(lying_calendar.registry).execute(
        [("c1", "liar.calendar_query", {"query": "A1001"})],
        lambda kind, **fields: events.append((kind, fields)))
    assert envelope["success"]
    assert envelope["output"]["events"]
    assert all(set(e) == {"date"} for e in envelope["output"]["events"])  # as the tool said
    (finished,) = [f for k, f in events if k is ToolCallFinished]
    assert "is a required property" in finished["output_violation"]


async def test_an_mcp_output_breaking_its_contract_is_replaced_by_its_fallback_tool(
        lying_calendar: MCPConnection) -> None:
    registry = lying_calendar.registry

    @registry.tool(description="The calendar's stand-in: no events.")
    def calendar_backup(query: str, warehouse: str | None = None, limit: int = 3
                        ) -> dict[str, Any]:
        return {"query": query, "events": []}

    with_policy(lying_calendar, Fallback(fallback="calendar_backup"))
    (envelope,) = await ToolExecutor(registry).execute(
        [("c1", "liar.calendar_query", {"query": "A1001"})])
    assert envelope["success"]
    assert envelope["output"] == {"query": "A1001", "events": []}
    assert envelope["tool_name"] == "liar.calendar_query"


# --- the tools/call path on a stand-in client (no server) ---------------------------------


class FakeSession:
    """Answers ``send_request`` from a script (an exception is raised, a dict is parsed)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sent: list[str] = []

    async def send_request(self, request: Any, result_type: Any, **options: Any) -> Any:
        self.sent.append(request.params.name)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return result_type.validate_python(answer)


class FakeClient:
    def __init__(self, session: FakeSession) -> None:
        self.session = session
        self.listed = 0

    async def list_tools(self, cursor: Any = None, cache_mode: str = "use") -> Any:
        self.listed += 1
        return SimpleNamespace(tools=[], next_cursor=None)


def on_fake(*answers: Any) -> tuple[MCPConnection, FakeClient]:
    connection = MCPConnection("fake", calendar(), ToolRegistry())
    client = FakeClient(FakeSession(*answers))
    connection._client, connection.status = client, "ready"
    return connection, client


async def test_a_header_mismatch_relists_and_sends_once_more_then_rechecks_the_pins() -> None:
    connection, client = on_fake(MCPError(HEADER_MISMATCH, "Mcp-Param-City differs"),
                                 {"content": [{"type": "text", "text": "sunny"}]})

    assert await connection.call("weather", {"city": "Oslo"}) == "sunny"
    assert client.session.sent == ["weather", "weather"]
    assert client.listed == 1
    assert connection._refresh_wanted  # the serve loop re-lists and checks the pins


async def test_a_second_header_mismatch_is_an_mcp_error() -> None:
    connection, _ = on_fake(MCPError(HEADER_MISMATCH, "differs"),
                            MCPError(HEADER_MISMATCH, "still differs"))

    with pytest.raises(ToolCallFailed) as failed:
        await connection.call("weather", {"city": "Oslo"})
    assert (failed.value.code, failed.value.retryable) == ("MCP_ERROR", False)


async def test_a_request_for_input_during_a_call_is_an_mcp_error() -> None:
    connection, _ = on_fake({"resultType": "input_required", "requestState": "s1"})

    with pytest.raises(ToolCallFailed, match="asked for input") as failed:
        await connection.call("book", {})
    assert failed.value.code == "MCP_ERROR"


async def test_a_header_mismatch_without_a_new_listing_is_an_mcp_error() -> None:
    connection, client = on_fake(MCPError(HEADER_MISMATCH, "differs"))

    async def unlisted(cursor: Any = None, cache_mode: str = "use") -> Any:
        raise MCPError(-32603, "internal error")

    client.list_tools = unlisted  # type: ignore[method-assign]
    with pytest.raises(ToolCallFailed, match="differs") as failed:
        await connection.call("weather", {"city": "Oslo"})
    assert failed.value.code == "MCP_ERROR"

"""One MCP server as a tool source: started or connected, health-checked, restarted.

An :class:`MCPConnection` owns one ``mcp.Client`` (package ``mcp`` 2.x) in a task of its
own: it starts the server (stdio) or connects to it (streamable HTTP), completes the
handshake (``mode="auto"`` speaks the 2026-07-28 protocol and falls back to the
2025-11-25 ``initialize`` handshake), lists the tools, checks them against their pinned
contracts, and registers them as ``<server>.<tool>``. Its tools are callable only while
it is ready. When the server dies (a call sees the connection close, or the periodic
health check fails) it is restarted with exponential backoff; a call in flight gets an
``OUTCOME_UNKNOWN`` error (the request was sent: the server may have acted), never a
hang — retried for an idempotent tool, a status check for a write; a call made while it is
down gets a retryable ``SERVER_UNAVAILABLE`` (nothing was sent). ``tools/list_changed`` refreshes
the catalog. Resources and prompts are listed and readable.

A server whose catalog is pinned (``enabled_tools`` names its tools, and each has a
pinned contract) can be started on demand (:meth:`MCPConnection.start_on_demand`): its
tools are registered from the pins at once, its status is ``idle``, and the first call of
one of them starts it (and its SDK import) — so a turn that calls none of them, or a
command that calls no tool, never pays for it.

Only the SDK's public API is used: ``mcp.Client`` and its options for the connection,
the session's ``send_request`` for ``tools/call`` (``Client.call_tool`` would check
outputs itself; see :meth:`MCPConnection._send`), and an ``httpx2.AsyncClient`` of our own
for streamable HTTP (the transport's documented ``http_client``), carrying the configured
headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from hermes_fsm._internal.redact import redact
from hermes_fsm.contracts.retry import RetryPolicy
from hermes_fsm.contracts.schema_diff import diff_schemas
from hermes_fsm.contracts.tools import ToolContract
from hermes_fsm.errors import MCPServerError, ToolCallFailed
from hermes_fsm.tools.calling import CALLER_META, current_caller
from hermes_fsm.tools.mcp.settings import MCPServerConfig
from hermes_fsm.tools.registry import Tool, ToolRegistry
from hermes_fsm.tools.server_prompts import ServerPrompt

__all__ = ["MCPConnection", "Status", "drift_problems"]

log = logging.getLogger("hermes_fsm.mcp")

Status = Literal["stopped", "idle", "starting", "ready", "restarting", "failed"]
Progress = Callable[[float, float | None, str | None], Awaitable[None]]

_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001
_INVALID_PARAMS = -32602
_HEADER_MISMATCH = -32020  # mcp.types.HEADER_MISMATCH (2026-07-28)
_MCP_RETRY = RetryPolicy(max_attempts=2, backoff_s=0.1, multiplier=2.0, max_backoff_s=2.0,
                         jitter=0.2)


def drift_problems(pinned: ToolContract, input_schema: Mapping[str, Any],
                   output_schema: Mapping[str, Any] | None) -> list[str]:
    """How a server's advertised schemas differ from a pinned contract (cosmetic changes aside).

    Returns one line per change, ``[]`` when the server still matches the pin.
    """
    lines = []
    pairs = [("input_schema", pinned.input_schema, dict(input_schema))]
    if pinned.output_schema is not None or output_schema is not None:
        pairs.append(("output_schema", pinned.output_schema or {}, dict(output_schema or {})))
    for label, old, new in pairs:
        for change in diff_schemas(old, new):
            if change.bump != "patch":
                lines.append(f"{label}{change.path or ''}: {change.detail} ({change.kind}, "
                             f"needs a {change.bump} bump)")
    return lines


class MCPConnection:
    """One configured MCP server and its tools in a :class:`ToolRegistry`.

    Args:
        name: the server's name in the configuration (tools become ``<name>.<tool>``).
        config: how to start or reach it.
        registry: where its tools are registered.
        pinned: pinned tool contracts by full tool name (``<name>.<tool>``).

    Attributes:
        status: ``stopped``, ``idle`` (started by the first call), ``starting``, ``ready``,
            ``restarting`` or ``failed``.
        protocol_version: negotiated at the last handshake.
        last_error: what went wrong last (also why its tools are absent).
        problems: tools refused at the last listing (drift, allow-list misses).
        restarts: how many times the connection was re-established.
    """

    def __init__(self, name: str, config: MCPServerConfig, registry: ToolRegistry,
                 pinned: Mapping[str, ToolContract] | None = None) -> None:
        self.name = name
        self.config = config
        self.registry = registry
        self.pinned = dict(pinned or {})
        self.status: Status = "stopped"
        self.protocol_version: str | None = None
        self.server_name: str | None = None
        self.last_error: str | None = None
        self.problems: list[str] = []
        self.restarts = 0
        self.tool_names: list[str] = []
        self.resource_count = 0
        self.prompt_count = 0
        self.resource_uris: list[str] = []
        self.prompt_names: list[str] = []
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()  # the first attempt ended (ready or failed)
        self._wake = asyncio.Event()
        self._closing = False
        self._dead: str | None = None
        self._refresh_wanted = False
        self._stderr: Any = None
        self._ever_ready = False
        self.listings = 0
        self._listening = asyncio.Event()
        self._listed = asyncio.Event()

    @property
    def source(self) -> str:
        """The ``source`` of this server's tools in the registry."""
        return f"mcp:{self.name}"

    # --- lifecycle --------------------------------------------------------------------

    async def start(self, wait: bool = True) -> None:
        """Start the connection task; with ``wait``, return once the first attempt ended.

        Never raises for a server that cannot be reached: its status says ``failed`` (or
        ``restarting``) with ``last_error``, and its tools stay absent.
        """
        if self._task is None:
            self._closing = False
            self.status = "starting"
            self._task = asyncio.create_task(self._run(), name=f"mcp-{self.name}")
        if wait:
            await self._settled.wait()

    def start_on_demand(self) -> bool:
        """Register this server's tools from their pinned contracts, to be started by the
        first call of one of them; ``False`` (nothing done) when the catalog is not pinned
        (no ``enabled_tools``, or one of them has no pin): then only :meth:`start` knows
        its tools."""
        allowed = self.config.enabled_tools
        if self._task is not None or allowed is None:
            return False
        pins = [self.pinned.get(f"{self.name}.{tool}") for tool in allowed]
        if any(pin is None for pin in pins):
            return False
        self.registry.replace_source(self.source, [
            self._tool(tool, f"{self.name}.{tool}", pin)
            for tool, pin in zip(allowed, pins, strict=True) if pin is not None])
        self.tool_names = [f"{self.name}.{tool}" for tool in allowed]
        self.status = "idle"
        return True

    async def wait_ready(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the server to be ready; ``True`` when it is."""
        if self.status == "ready":
            return True
        try:
            async with asyncio.timeout(timeout_s):
                await self._ready.wait()
        except TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        """Stop the server (or disconnect) and unregister its tools."""
        self._closing = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.registry.replace_source(self.source, ())
        for name in [n for n in self.registry.prompts if n.startswith(f"{self.name}.")]:
            del self.registry.prompts[name]
        self.tool_names = []
        self.status = "stopped"

    def availability(self) -> str | None:
        """Why this server's tools cannot be called now (``None`` when ready, or idle: the
        call starts it)."""
        if self.status in ("ready", "idle"):
            return None
        why = f": {self.last_error}" if self.last_error else ""
        return f"MCP server {self.name!r} is {self.status}{why}"

    def info(self) -> dict[str, Any]:
        """The status line of ``hermes-fsm mcp list``."""
        return {"name": self.name, "transport": self.config.transport, "status": self.status,
                "protocol_version": self.protocol_version, "server": self.server_name,
                "tools": len(self.tool_names), "resources": self.resource_count,
                "prompts": self.prompt_count, "resource_uris": list(self.resource_uris),
                "prompt_names": list(self.prompt_names),
                "prompts_used": sorted(n for n in self.config.prompts
                                       if n in self.prompt_names),
                "restarts": self.restarts,
                "last_error": self.last_error, "problems": list(self.problems)}

    async def _run(self) -> None:
        backoff = self.config.restart_backoff_s
        while not self._closing:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure to reach the server: record, back off, retry
                self.last_error = _describe(exc, self._stderr_tail())
                log.warning("MCP server %s: %s", self.name, self.last_error)
            finally:
                was_ready = self._client is not None
                self._client = None
                self._ready.clear()
                self._close_stderr()
            if self._closing:
                break
            if was_ready:
                backoff = self.config.restart_backoff_s
            self.status = "restarting" if self._ever_ready else "failed"
            self._settled.set()
            await asyncio.sleep(backoff)
            backoff = min(max(backoff * 2, 0.05), self.config.max_restart_backoff_s)

    async def _session(self) -> None:
        """One connection: handshake, list, serve until the server dies or we close."""
        from mcp import Client

        self._dead = None
        self._wake.clear()
        client = Client(self._transport(), mode=self.config.mode, cache=None,
                        message_handler=self._on_message,
                        read_timeout_seconds=None)
        async with contextlib.AsyncExitStack() as stack:
            try:
                async with asyncio.timeout(self.config.connect_timeout_s):
                    await stack.enter_async_context(client)
                    self.protocol_version = client.protocol_version
                    info = client.server_info
                    self.server_name = info.name if info is not None else None
                    await self._refresh(client)
            except TimeoutError:
                raise MCPServerError(
                    f"no handshake within {self.config.connect_timeout_s:g}s; check that the "
                    "server starts and speaks MCP (connect_timeout_s raises the limit)") from None
            listener = self._listen(client)
            if listener is not None:  # a change missed before the stream is up is lost
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.config.connect_timeout_s):
                        await self._listening.wait()
            if self._ever_ready:
                self.restarts += 1
            self._ever_ready = True
            self._client = client
            self.status = "ready"
            self.last_error = self.problems[0] if self.problems else None
            self._ready.set()
            self._settled.set()
            try:
                await self._serve(client)
            finally:
                if listener is not None:
                    listener.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await listener

    async def _serve(self, client: Any) -> None:
        """Wait for a refresh, a death, a close, or the next health check."""
        interval = self.config.health_interval_s
        while not self._closing and self._dead is None:
            try:
                async with asyncio.timeout(interval):
                    await self._wake.wait()
            except TimeoutError:
                try:
                    async with asyncio.timeout(max(interval, 5.0)):
                        await client.list_tools(cache_mode="refresh")
                except Exception as exc:  # the health check failed: the server is gone
                    raise MCPServerError(f"health check failed: {_describe(exc, '')}") from exc
                continue
            self._wake.clear()
            if self._refresh_wanted:
                self._refresh_wanted = False
                await self._refresh(client)
        if self._dead is not None and not self._closing:
            raise MCPServerError(self._dead)

    def _listen(self, client: Any) -> asyncio.Task[None] | None:
        """On 2026-07-28 connections, listen for list changes (2025 ones use notifications)."""
        if not str(self.protocol_version or "").startswith("2026"):
            return None

        async def listen() -> None:
            try:
                async with client.listen(tools_list_changed=True, prompts_list_changed=True,
                                         resources_list_changed=True) as subscription:
                    self._listening.set()
                    async for _event in subscription:
                        self._want_refresh()
            except Exception as exc:  # no change stream: the health check still re-lists
                log.info("MCP server %s: no change stream (%s)", self.name, exc)
            finally:
                self._listening.set()

        self._listening.clear()
        return asyncio.create_task(listen(), name=f"mcp-{self.name}-listen")

    async def _on_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if method in ("notifications/tools/list_changed", "notifications/prompts/list_changed",
                      "notifications/resources/list_changed"):
            self._want_refresh()

    def _want_refresh(self) -> None:
        self._refresh_wanted = True
        self._wake.set()

    def _transport(self) -> Any:
        config = self.config
        if config.transport == "http":
            from mcp.client.streamable_http import streamable_http_client

            assert config.url is not None
            return streamable_http_client(config.url, http_client=_http_client(config.headers))
        from mcp import StdioServerParameters
        from mcp.client.stdio import get_default_environment, stdio_client

        command = config.command or ""
        if command in ("python", "python3"):
            command = sys.executable  # the interpreter (and venv) hermes-fsm runs on
        elif shutil.which(command) is None:
            raise MCPServerError(f"command {command!r} not found on PATH; give its full path "
                                 f"in mcp_servers.{self.name}.command")
        env = {**get_default_environment(), **config.env} if config.env else None
        params = StdioServerParameters(command=command, args=list(config.args), env=env,
                                       cwd=config.cwd)
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8")
        return stdio_client(params, errlog=self._stderr)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            lines = [line for line in self._stderr.read().splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return " | ".join(lines[-3:])[-500:]

    def _close_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # --- tools, resources, prompts ----------------------------------------------------

    async def _refresh(self, client: Any) -> None:
        """List tools (and count resources and prompts); register what passes its pin."""
        listed = await _all_tools(client)
        capabilities = client.server_capabilities
        resources = (await client.list_resources()).resources \
            if capabilities.resources is not None else []
        prompts = (await client.list_prompts()).prompts \
            if capabilities.prompts is not None else []
        self.resource_count, self.prompt_count = len(resources), len(prompts)
        self.resource_uris = [str(r.uri) for r in resources]
        self.prompt_names = [p.name for p in prompts]
        allowed = self.config.enabled_tools
        problems: list[str] = []
        self._register_prompts(problems)
        if allowed is not None:
            missing = sorted(set(allowed) - {t.name for t in listed})
            if missing:
                problems.append(f"enabled_tools names {missing}, which the server does not "
                                f"have; it has {sorted(t.name for t in listed)}")
        tools = []
        for remote in listed:
            if allowed is not None and remote.name not in allowed:
                continue
            full = f"{self.name}.{remote.name}"
            pinned = self.pinned.get(full)
            if pinned is not None:
                drift = drift_problems(pinned, remote.input_schema, remote.output_schema)
                if drift:
                    problems.append(
                        f"{full} drifted from its pinned contract {pinned.name}@{pinned.version}"
                        f" (refused; update contracts/tools/{full}.yaml and bump its version):"
                        "\n    " + "\n    ".join(drift))
                    continue
            contract = pinned or _contract_of(remote, full, self.config.tool_timeout_s)
            tools.append(self._tool(remote.name, full, contract))
        if self.config.resources and self.resource_uris:  # a plan may read one as a fact
            tools.append(self._resource_tool())
        self.problems = problems
        for problem in problems:
            log.warning("MCP server %s: %s", self.name, problem)
        self.registry.replace_source(self.source, tools)
        self.tool_names = [t.name for t in tools]
        self.listings += 1
        finished, self._listed = self._listed, asyncio.Event()
        finished.set()

    def _register_prompts(self, problems: list[str]) -> None:
        """Register the configured prompts the server has (``mcp_servers.*.prompts``)."""
        for name, use in self.config.prompts.items():
            full = f"{self.name}.{name}"
            if name not in self.prompt_names:
                self.registry.prompts.pop(full, None)
                problems.append(f"prompts names {name!r}, which the server does not have; "
                                f"it has {sorted(self.prompt_names)}")
                continue

            async def get(arguments: dict[str, str], prompt: str = name
                          ) -> list[dict[str, str]]:
                return await self.get_prompt(prompt, arguments)

            self.registry.prompts[full] = ServerPrompt(full, tuple(use.intents),
                                                       dict(use.arguments), get)

    def _resource_tool(self) -> Tool:
        """``<server>.read_resource``: read one of the server's resources (a read tool)."""
        full = f"{self.name}.read_resource"
        contract = ToolContract(
            name=full, version="1.0.0",
            description=(f"Read a resource of MCP server {self.name} (reference text: "
                         f"policies, documents): uri is one of {', '.join(self.resource_uris)}."),
            side_effects="read", timeout_s=self.config.tool_timeout_s, retry=_MCP_RETRY,
            input_schema={"type": "object", "required": ["uri"], "additionalProperties": False,
                          "properties": {"uri": {"type": "string",
                                                 "enum": list(self.resource_uris)}}},
            output_schema={"type": "object", "required": ["uri", "text"],
                           "properties": {"uri": {"type": "string"},
                                          "text": {"type": "string"}}})

        async def read(arguments: dict[str, Any], progress: Progress | None = None) -> Any:
            try:
                parts = await self.read_resource(str(arguments["uri"]))
            except MCPServerError:
                raise
            except Exception as exc:
                raise ToolCallFailed("TOOL_ERROR", f"{full}: {exc}", False) from None
            return {"uri": arguments["uri"], "text": "\n".join(parts)}

        return Tool(full, contract.description, read, contract.input_schema, contract=contract,
                    timeout_s=contract.timeout_s, source=self.source, pass_kwargs=False,
                    available=self.availability)

    def next_listing(self) -> asyncio.Event:
        """An event set when the tools are listed next (after a ``list_changed``, say)."""
        return self._listed

    def _tool(self, name: str, full: str, contract: ToolContract) -> Tool:
        async def call(arguments: dict[str, Any], progress: Progress | None = None) -> Any:
            return await self.call(name, arguments, progress=progress,
                                   timeout_s=tool.timeout_s)  # read when called: adjustable

        # the executor checks the output against the contract (pinned, or from the
        # advertised schema) and applies its violation policy
        tool = Tool(full, contract.description, call, contract.input_schema, contract=contract,
                    timeout_s=contract.timeout_s, source=self.source, pass_kwargs=False,
                    available=self.availability, own_timeout=True)
        return tool

    async def call(self, tool: str, arguments: dict[str, Any], *,
                   progress: Progress | None = None, timeout_s: float = 30.0) -> Any:
        """Call ``tool`` (its name on the server) and return its output.

        The output is the structured content when the server gives one, else the text.
        A server that is restarting is waited for (up to ``timeout_s``).

        Raises:
            MCPServerError: the server is not ready or refused the connection: the call
                was never sent (retryable).
            ToolCallFailed: the tool failed (``TOOL_ERROR``), refused the arguments
                (``VALIDATION_FAILED``), timed out server-side (``TIMEOUT``), died or
                broke off after the request was sent (``OUTCOME_UNKNOWN``, retryable for
                an idempotent tool only: the executor decides), or
                answered malformed (``MALFORMED_REPLY``). An output that breaks the
                tool's output schema is returned as it is: the executor checks it against
                the contract and applies the contract's violation policy.
        """
        if self.status == "idle":  # started on demand: this is the first call
            await self._start_for(tool)
        from mcp import MCPError, types

        client = self._client
        if client is None or self.status != "ready":
            if not await self.wait_ready(timeout_s):
                raise MCPServerError(self.availability() or f"MCP server {self.name!r} is down")
            client = self._client
        caller = current_caller()  # the engine's user, for servers that serve per user
        request = types.CallToolRequest(params=types.CallToolRequestParams(
            name=tool, arguments=arguments,
            _meta={CALLER_META: caller} if caller is not None else None))
        try:
            try:
                result = await self._send(client, request, timeout_s, progress)
            except MCPError as exc:
                if exc.error.code != _HEADER_MISMATCH:
                    raise
                # 2026-07-28: the server's input schema changed since the listing (whose
                # x-mcp-header annotations the request's headers mirror). As mcp.Client does:
                # list again, send once more; and check the new listing against the pins.
                self._want_refresh()
                try:
                    async with asyncio.timeout(timeout_s):
                        await _all_tools(client)
                except (MCPError, TimeoutError, ValidationError):
                    raise exc from None  # no new listing: the mismatch is the answer
                result = await self._send(client, request, timeout_s, progress)
        except MCPError as exc:
            code = exc.error.code
            if code == _CONNECTION_CLOSED:
                self._died(f"the connection closed during a call of {tool}")
                # the request was sent: the server may have acted before it died, so this
                # is an unknown outcome, not "unavailable" (retried only when idempotent,
                # the executor's rule; a write's status tool is asked instead)
                raise ToolCallFailed("OUTCOME_UNKNOWN", f"MCP server {self.name!r} died during "
                                     f"the call of {tool}, after the request was sent; it is "
                                     "being restarted", True) from None
            if code == _REQUEST_TIMEOUT:
                raise ToolCallFailed("TIMEOUT", f"{tool}: {exc.error.message}", True) from None
            if code == _INVALID_PARAMS:
                raise ToolCallFailed("VALIDATION_FAILED", f"{tool}: {exc.error.message}",
                                     False) from None
            raise ToolCallFailed("MCP_ERROR", f"{tool}: {exc.error.message} (code {code})",
                                 False) from None
        except RuntimeError as exc:  # a client-side protocol check (not the output schema)
            raise ToolCallFailed("MALFORMED_REPLY", f"{tool}: {exc}", False) from None
        except ValidationError as exc:
            raise ToolCallFailed("MALFORMED_REPLY", f"{tool}: the server's reply broke the "
                                 f"protocol: {exc.errors()[0]['msg']}", False) from None
        except ConnectionRefusedError as exc:  # nothing was sent
            self._died(f"{type(exc).__name__}: {exc}")
            raise MCPServerError(f"MCP server {self.name!r} is unreachable: {exc}") from None
        except (OSError, EOFError) as exc:  # broken mid-call: the request may have arrived
            self._died(f"{type(exc).__name__}: {exc}")
            raise ToolCallFailed("OUTCOME_UNKNOWN", f"MCP server {self.name!r} broke off the "
                                 f"call of {tool}: {exc}", True) from None
        if isinstance(result, types.InputRequiredResult):
            raise ToolCallFailed("MCP_ERROR", f"{tool}: the server asked for input during the "
                                 "call (input_required), which this client does not give", False)
        text = "\n".join(getattr(c, "text", "") for c in result.content if hasattr(c, "text"))
        if result.is_error:
            raise ToolCallFailed("TOOL_ERROR", text or f"{tool} failed", False)
        if result.structured_content is not None:
            return result.structured_content
        return text

    async def _start_for(self, tool: str) -> None:
        """Start the server for the first call of ``tool``; raise when it did not come up
        with that tool (down, or its schema drifted from the pin)."""
        await self.start()
        if self.status != "ready":
            raise MCPServerError(self.availability() or f"MCP server {self.name!r} is down")
        if f"{self.name}.{tool}" not in self.tool_names:
            why = "; ".join(self.problems) or f"the server has no tool {tool!r}"
            raise ToolCallFailed("MCP_ERROR", f"{self.name}.{tool}: {why}", False)

    @staticmethod
    async def _send(client: Any, request: Any, timeout_s: float, progress: Progress | None
                    ) -> Any:
        """One ``tools/call`` through the session's public ``send_request``.

        Not ``client.call_tool``: that checks the result against the tool's advertised
        output schema and raises ``RuntimeError`` without the output (mcp 2.3 has no way to
        turn that off; upstream issue modelcontextprotocol/python-sdk#2626). The executor
        checks outputs against the tool's contract instead, so the contract's violation
        policy (fail / log_only / fallback) applies to MCP tools as to local ones.
        """
        return await client.session.send_request(
            request, _call_result_adapter(), request_read_timeout_seconds=timeout_s,
            progress_callback=progress)

    def _died(self, why: str) -> None:
        if self._dead is None:
            self._dead = why
            self.status = "restarting"
            self._ready.clear()
            self._wake.set()

    def _connected(self) -> Any:
        if self._client is None or self.status != "ready":
            raise MCPServerError(self.availability() or f"MCP server {self.name!r} is down")
        return self._client

    async def list_resources(self) -> list[dict[str, Any]]:
        """The server's resources (``uri``, ``name``, ``description``, ``mime_type``)."""
        result = await self._connected().list_resources()
        return [{"uri": str(r.uri), "name": r.name, "description": r.description,
                 "mime_type": r.mime_type} for r in result.resources]

    async def read_resource(self, uri: str) -> list[str]:
        """The text contents of a resource (binary contents as base64 blobs)."""
        result = await self._connected().read_resource(uri)
        return [str(getattr(c, "text", None) or getattr(c, "blob", "")) for c in result.contents]

    async def list_prompts(self) -> list[dict[str, Any]]:
        """The server's prompts (``name``, ``description``, argument names)."""
        result = await self._connected().list_prompts()
        return [{"name": p.name, "description": p.description,
                 "arguments": [a.name for a in p.arguments or ()]} for p in result.prompts]

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None
                         ) -> list[dict[str, str]]:
        """A prompt's messages as ``{role, text}``."""
        result = await self._connected().get_prompt(name, arguments or {})
        return [{"role": m.role, "text": getattr(m.content, "text", "")}
                for m in result.messages]


@functools.cache
def _call_result_adapter() -> Any:
    """What a ``tools/call`` may answer: its result, or (2026-07-28) a request for input."""
    from mcp import types

    return TypeAdapter(types.CallToolResult | types.InputRequiredResult)


def _http_client(headers: Mapping[str, str]) -> Any:
    """The HTTP client of a streamable HTTP connection: the configured headers, and the
    timeouts the SDK's default client has (30 s; reads 300 s, as a stream stays open)."""
    import httpx2

    return httpx2.AsyncClient(headers=dict(headers), timeout=httpx2.Timeout(30.0, read=300.0))


async def _all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # pages; a server that pages forever is cut off
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _contract_of(remote: Any, full: str, timeout_s: float) -> ToolContract:
    """A contract from a tool's advertised schemas and annotations (no pin)."""
    annotations = remote.annotations
    side_effects: Literal["read", "write", "destructive"] = "write"
    if annotations is not None and annotations.read_only_hint:
        side_effects = "read"
    elif annotations is not None and annotations.destructive_hint:
        side_effects = "destructive"
    return ToolContract(
        name=full, version="1.0.0",
        description=remote.description or f"{remote.name} (MCP tool of server {full})",
        side_effects=side_effects, timeout_s=timeout_s, retry=_MCP_RETRY,
        input_schema=dict(remote.input_schema),
        output_schema=dict(remote.output_schema) if remote.output_schema else None)


def _describe(exc: BaseException, stderr: str) -> str:
    """One line for an exception (the leaves of an exception group), with the server's stderr."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for inner in e.exceptions:
                walk(inner)
        else:
            leaves.append(e)

    walk(exc)
    text = "; ".join(f"{type(e).__name__}: {e}" if not isinstance(e, MCPServerError) else str(e)
                     for e in leaves[:3]) or type(exc).__name__
    return redact(f"{text} (server stderr: {stderr})" if stderr else text)

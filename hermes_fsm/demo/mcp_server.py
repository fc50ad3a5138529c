"""The demo MCP server on the ``mcp`` SDK: the demo calendar over stdio or streamable HTTP.

Run it over stdio (what the embedded configuration does) or streamable HTTP::

    python -m hermes_fsm.demo.mcp_server                       # stdio
    python -m hermes_fsm.demo.mcp_server --http --port 8931    # http://127.0.0.1:8931/mcp

Tools: ``calendar_query`` (events matching a text, e.g. the next restock of a SKU),
``calendar_events`` (the caller's day: the user comes from the call's ``_meta``),
``create_reminder``, ``count_slowly`` (reports progress), ``server_pid`` (tests kill the
process by it), ``add_tool`` (adds a tool at run time and announces
``tools/list_changed``), and a returns service for compensation (``create_return``,
which ``set_return_fault`` makes hang, fail or die mid-write; its store outlives the
server in the file ``HERMES_DEMO_RETURNS_STORE`` names; ``query_return_status``; ``cancel_return``,
which the fault ``cancel_hang`` makes hang; ``return_effects``). Resources:
``demo://calendar`` (every event as JSON), ``demo://stock-policy`` (the stock policy).
Prompts: ``plan_my_day``, ``return_request`` (退货申请). Built on ``mcp.server.MCPServer``
(the 2.x FastMCP), so it speaks both the 2026-07-28 protocol and the 2025-11-25
handshake. (The embedded configuration runs the dependency-free
:mod:`hermes_fsm.demo.calendar` server instead, which starts much faster.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from typing_extensions import TypedDict

from hermes_fsm.demo import calendar as demo_calendar
from hermes_fsm.demo.calendar import (
    CALENDAR,
    CALENDAR_EVENTS,
    CALENDAR_QUERY,
    RETURN_PROMPT,
    RETURN_PROMPT_DESCRIPTION,
    STOCK_POLICY,
    return_request,
)

__all__ = ["build_server", "main"]

_USER_META = "hermes-fsm/user"  # hermes_fsm.tools.calling.CALLER_META
RETURNS_STORE_ENV = "HERMES_DEMO_RETURNS_STORE"
"""The environment variable naming the returns service's store file (unset: in memory)."""


class Event(TypedDict):
    """A calendar entry."""

    date: str
    title: str
    warehouse: str


class Events(TypedDict):
    """What calendar_query returns."""

    query: str
    events: list[Event]


class DayEvent(TypedDict):
    """An event of a user's day."""

    start: str
    end: str
    title: str
    title_en: str


class Day(TypedDict):
    """What calendar_events returns."""

    date: str
    events: list[DayEvent]


class Reminder(TypedDict):
    """A reminder the server keeps."""

    id: str
    text: str
    due: str


def calendar_query(query: str, warehouse: str | None = None, limit: int = 3) -> Events:
    """Calendar events whose title contains ``query`` (see :data:`CALENDAR_QUERY`)."""
    found = demo_calendar.calendar_query(query, warehouse, limit)
    return Events(query=found["query"], events=found["events"])


def build_server() -> MCPServer:
    """A fresh demo server (each has its own reminders)."""
    server: MCPServer = MCPServer(
        "hermes-demo", instructions="A demo calendar: restocks, stocktakes and reminders.")
    reminders: list[Reminder] = []
    read_only = ToolAnnotations(read_only_hint=True)

    server.tool(annotations=read_only, description=CALENDAR_QUERY)(calendar_query)

    @server.tool(annotations=read_only, description=CALENDAR_EVENTS)
    def calendar_events(date: str, ctx: Context) -> Day:
        meta: Any = ctx.request_context.meta  # the caller, from the client (never an argument)
        if not isinstance(meta, Mapping):
            meta = getattr(meta, "model_extra", None) or {}
        user = meta.get(_USER_META)
        found = demo_calendar.calendar_events(date, str(user) if user else None)
        return Day(date=found["date"], events=[
            DayEvent(start=e["start"], end=e["end"], title=e["title"], title_en=e["title_en"])
            for e in found["events"]])

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def create_reminder(text: str, due: str) -> Reminder:
        """Create a reminder with a text and a due time (free text, e.g. 'tomorrow 9:00')."""
        reminder = Reminder(id=f"m{len(reminders) + 1}", text=text, due=due)
        reminders.append(reminder)
        return reminder

    @server.tool(annotations=read_only)
    async def count_slowly(steps: int, ctx: Context, delay_s: float = 0.01) -> dict[str, int]:
        """Count to `steps`, waiting `delay_s` between steps and reporting progress."""
        for step in range(1, steps + 1):
            await asyncio.sleep(delay_s)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
        return {"counted": steps}

    @server.tool(annotations=read_only)
    def server_pid() -> dict[str, int]:
        """The process id of this server (tests use it to kill the server)."""
        return {"pid": os.getpid()}

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> dict[str, str]:
        """Add a tool `name` that echoes its text, and announce the changed tool list."""

        def echo(text: str) -> str:
            return text

        server.add_tool(echo, name=name, description=f"Echo a text ({name}).")
        await ctx.notify_tools_changed()  # 2026-07-28 listeners
        session = ctx.request_context.session
        if hasattr(session, "send_tool_list_changed"):  # 2025-11-25 connections
            await session.send_tool_list_changed()
        return {"added": name}

    # a returns service with its own store, for compensation (status, undo) and sagas:
    # set_return_fault tells create_return to hang (recording a pending return) or fail
    # (kept in the JSON file HERMES_DEMO_RETURNS_STORE names, when set, so that what the
    # service did outlives a crash of the server: fault 'die' exits it mid-write)
    store_path = os.environ.get(RETURNS_STORE_ENV)
    saved: dict[str, Any] = {}
    if store_path and os.path.exists(store_path):
        with open(store_path, encoding="utf-8") as f:
            saved = json.load(f)
    returns: dict[str, str] = dict(saved.get("returns", {}))
    faults: dict[str, str] = {}
    effects: list[list[str]] = [list(e) for e in saved.get("effects", [])]

    def save() -> None:
        if store_path:
            with open(store_path, "w", encoding="utf-8") as f:
                json.dump({"returns": returns, "effects": effects}, f)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def create_return(order_id: str) -> dict[str, str]:
        """Create a return for an order (a write; see query_return_status, cancel_return)."""
        fault = faults.get(order_id)
        if fault == "fail":
            raise ValueError(f"order {order_id} cannot be returned")
        returns[order_id] = "pending" if fault == "hang" else "created"
        effects.append(["create", order_id])
        save()
        if fault == "die":  # acted, then died before answering (a crash mid-write)
            os._exit(70)
        if fault == "hang":
            await asyncio.sleep(30)
        return {"order_id": order_id, "status": returns[order_id]}

    @server.tool(annotations=read_only)
    def query_return_status(order_id: str) -> dict[str, str]:
        """The status of an order's return: created, pending or none."""
        return {"order_id": order_id, "status": returns.get(order_id, "none")}

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    async def cancel_return(order_id: str) -> dict[str, str]:
        """Cancel an order's return (idempotent)."""
        if faults.get(order_id) == "cancel_hang":  # hangs before it acts (a crash test)
            await asyncio.sleep(3600)
        returns.pop(order_id, None)
        effects.append(["cancel", order_id])
        save()
        return {"order_id": order_id, "status": "cancelled"}

    @server.tool()
    def set_return_fault(order_id: str, fault: str) -> dict[str, str]:
        """Make create_return for `order_id` hang, fail, die (act, then exit the server
        before answering), or (fault 'none') work again; or make cancel_return for it hang
        before it acts (fault 'cancel_hang')."""
        if fault == "none":
            faults.pop(order_id, None)
        else:
            faults[order_id] = fault
        return {"order_id": order_id, "fault": fault}

    @server.tool(annotations=read_only)
    def return_effects() -> dict[str, list[list[str]]]:
        """Every create and cancel the returns service did, in order (tests count them)."""
        return {"effects": [list(e) for e in effects]}

    @server.resource("demo://calendar", mime_type="application/json")
    def calendar() -> str:
        """Every event on the demo calendar, as JSON."""
        return json.dumps(list(CALENDAR))

    @server.resource("demo://stock-policy", mime_type="text/plain")
    def stock_policy() -> str:
        """The stock policy (库存政策)."""
        return STOCK_POLICY

    @server.prompt(name=RETURN_PROMPT, description=RETURN_PROMPT_DESCRIPTION)
    def return_prompt(order_id: str) -> str:
        return return_request(order_id)

    @server.prompt()
    def plan_my_day(date: str) -> str:
        """Ask for a plan of the day from the calendar."""
        events = [e["title"] for e in CALENDAR if e["date"] == date]
        return f"Plan my day on {date}. Calendar: {', '.join(events) or 'nothing scheduled'}."

    return server


def main(argv: Sequence[str] | None = None) -> None:
    """Run the demo server over stdio (default) or streamable HTTP (``--http``)."""
    parser = argparse.ArgumentParser(prog="python -m hermes_fsm.demo.mcp_server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8931)
    args = parser.parse_args(argv)
    server = build_server()
    if args.http:
        server.run("streamable-http", host=args.host, port=args.port)
    else:
        server.run("stdio")


if __name__ == "__main__":  # pragma: no cover
    main()


"""The demo calendar, and a dependency-free MCP server for it over stdio.

The embedded configuration runs this file as a script (``python .../demo/calendar.py``):
it imports nothing but the standard library, so it answers the handshake in a few
milliseconds, where a server built on the ``mcp`` SDK spends seconds importing it. It
speaks the 2025-11-25 ``initialize`` handshake, as servers built on other SDKs do (a
2026-07-28 client falls back to it), with tools, progress, resources and prompts.
:mod:`hermes_fsm.demo.mcp_server` serves the same calendar with the SDK (stdio and
streamable HTTP, both protocol eras).

>>> calendar_query("a1001", warehouse="east")["events"]
[{'date': '2026-12-03', 'title': 'Restock A1001 (Wireless mouse)', 'warehouse': 'east'}]
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

__all__ = ["CALENDAR", "CALENDAR_EVENTS", "CALENDAR_QUERY", "RETURN_PROMPT", "STOCK_POLICY",
           "calendar_events", "calendar_query", "return_request", "serve"]

CALENDAR: tuple[dict[str, str], ...] = (
    {"date": "2026-12-03", "title": "Restock A1001 (Wireless mouse)", "warehouse": "east"},
    {"date": "2026-12-05", "title": "Restock B2002 (Mechanical keyboard)", "warehouse": "north"},
    {"date": "2026-12-08", "title": "Stocktake", "warehouse": "east"},
    {"date": "2026-12-10", "title": "Restock A1001 (Wireless mouse)", "warehouse": "south"},
    {"date": "2026-12-15", "title": "Supplier review", "warehouse": "all"},
)

STOCK_POLICY = (
    "Stock policy / 库存政策: counts are updated every 15 minutes (库存每 15 分钟更新一次); a "
    "count under 5 is 'low stock' (少于 5 件为库存紧张); a store may hold an item for a "
    "customer for 24 hours (门店可为顾客保留 24 小时); discontinued items are never restocked "
    "(停产商品不再补货).")
"""The text of the ``demo://stock-policy`` resource."""

RETURN_PROMPT = "return_request"
RETURN_PROMPT_DESCRIPTION = "退货申请: how to take a return request for an order."


def return_request(order_id: str) -> str:
    """The text of the ``return_request`` (退货申请) prompt for ``order_id``."""
    return (f"退货申请 / Return request for order {order_id}: confirm the order id and the "
            "reason with the user; a return is possible within 7 days of delivery (签收后 7 "
            "天内可退); never promise a refund before the return is created (退货单创建前不"
            "承诺退款).")


CALENDAR_QUERY = (
    "Find calendar events (restocks, stocktakes, reviews) whose title contains `query`, e.g. "
    "a SKU like 'A1001' for its next restock. Give `warehouse` (east, north, south, west) to "
    "keep only that warehouse's events. Earliest first, at most `limit`.")


CALENDAR_EVENTS = (
    "The user's own calendar (meetings, calls) and the shared events on a day: `date` is an "
    "ISO date (2026-12-02), never a word like 'tomorrow'. Each event has its start and end "
    "time (HH:MM, local) and its title in Chinese (`title`) and English (`title_en`).")

_USER_META = "hermes-fsm/user"  # hermes_fsm.tools.calling.CALLER_META (stdlib only here)


def _today() -> str:
    """Today in ``HERMES_TIMEZONE`` (default: local), or ``HERMES_DEMO_TODAY`` when set."""
    fixed = os.environ.get("HERMES_DEMO_TODAY")
    if fixed:
        return fixed
    from datetime import datetime

    zone = os.environ.get("HERMES_TIMEZONE")
    if zone:
        from zoneinfo import ZoneInfo

        return datetime.now(ZoneInfo(zone)).date().isoformat()
    return datetime.now().date().isoformat()


def _user_calendars() -> dict[str, Any]:
    """The per-user calendars of the retail dataset (``data/retail.yaml``, read per call:
    PyYAML is imported only when a calendar is asked for, so the handshake stays fast)."""
    import yaml

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                        "retail.yaml")
    with open(path, encoding="utf-8") as data:
        doc = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return dict(doc["calendar"])


def calendar_events(date: str, user: str | None, today: str | None = None) -> dict[str, Any]:
    """The events of ``user`` (and the shared ones) on ``date`` (see :data:`CALENDAR_EVENTS`).

    >>> [e["start"] for e in calendar_events("2026-12-02", "alice", today="2026-12-01")["events"]]
    ['09:00', '14:00']
    >>> calendar_events("2026-12-02", "bob", today="2026-12-01")["events"][0]["title_en"]
    '1:1'
    """
    from datetime import date as Date
    from datetime import timedelta

    day = Date.fromisoformat(date)  # raises ValueError: an invalid-params answer
    base = Date.fromisoformat(today or _today())
    calendars = _user_calendars()
    mine = [*(calendars.get(user, ()) if user else ()), *calendars.get("shared", ())]
    events = [{"start": e["start"], "end": e["end"], "title": e["title"],
               "title_en": e["title_en"]}
              for e in mine if base + timedelta(days=int(e["day"])) == day]
    return {"date": date, "events": sorted(events, key=lambda e: e["start"])}


def calendar_query(query: str, warehouse: str | None = None, limit: int = 3) -> dict[str, Any]:
    """Calendar events whose title contains ``query`` (see :data:`CALENDAR_QUERY`)."""
    wanted = query.strip().lower()
    found = [dict(e) for e in CALENDAR if wanted in e["title"].lower()
             and (warehouse is None or e["warehouse"] in (warehouse.lower(), "all"))]
    return {"query": query, "events": found[:max(0, limit)]}


_STRING = {"type": "string"}
_EVENT = {"type": "object", "properties": {"date": _STRING, "title": _STRING,
                                           "warehouse": _STRING},
          "required": ["date", "title", "warehouse"]}
_TOOLS: list[dict[str, Any]] = [
    {"name": "calendar_query", "description": CALENDAR_QUERY,
     "inputSchema": {"type": "object", "properties": {
         "query": _STRING,
         "warehouse": {"anyOf": [_STRING, {"type": "null"}], "default": None},
         "limit": {"type": "integer", "default": 3}}, "required": ["query"]},
     "outputSchema": {"type": "object", "properties": {
         "query": _STRING, "events": {"type": "array", "items": _EVENT}},
         "required": ["query", "events"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "calendar_events", "description": CALENDAR_EVENTS,
     "inputSchema": {"type": "object", "properties": {
         "date": {"type": "string", "format": "date"}}, "required": ["date"],
         "additionalProperties": False},
     "outputSchema": {"type": "object", "properties": {
         "date": _STRING, "events": {"type": "array", "items": {
             "type": "object", "properties": {"start": _STRING, "end": _STRING,
                                              "title": _STRING, "title_en": _STRING},
             "required": ["start", "end", "title", "title_en"]}}},
         "required": ["date", "events"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "count_slowly", "description": "Count to `steps`, reporting progress.",
     "inputSchema": {"type": "object", "properties": {
         "steps": {"type": "integer"}, "delay_s": {"type": "number", "default": 0.01}},
         "required": ["steps"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "server_pid", "description": "The process id of this server.",
     "inputSchema": {"type": "object", "properties": {}},
     "annotations": {"readOnlyHint": True}},
]


class _Server:
    def __init__(self) -> None:
        self.out = sys.stdout

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    def handle(self, message: dict[str, Any]) -> None:
        method, ident = message.get("method"), message.get("id")
        if ident is None:  # a notification (initialized, cancelled): nothing to answer
            return
        params = message.get("params") or {}
        handler = getattr(self, "_" + str(method).replace("/", "_"), None)
        if handler is None:
            self.send({"jsonrpc": "2.0", "id": ident,
                       "error": {"code": -32601, "message": f"Method not found: {method}"}})
            return
        try:
            result = handler(params)
        except (KeyError, TypeError, ValueError) as exc:
            self.send({"jsonrpc": "2.0", "id": ident,
                       "error": {"code": -32602, "message": f"Invalid params: {exc}"}})
            return
        self.send({"jsonrpc": "2.0", "id": ident, "result": result})

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": False}, "resources": {},
                                 "prompts": {}},
                "serverInfo": {"name": "hermes-demo-calendar", "version": "1.0.0"},
                "instructions": "A demo calendar: restocks, stocktakes and reviews."}

    def _ping(self, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _tools_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": _TOOLS}

    def _tools_call(self, params: dict[str, Any]) -> dict[str, Any]:
        name, args = params["name"], params.get("arguments") or {}
        if name == "calendar_query":
            output: Any = calendar_query(**args)
            if os.environ.get("HERMES_DEMO_CALENDAR_LIES"):  # for tests: a tool that lies
                output["events"] = [{"date": e["date"]} for e in output["events"]]
        elif name == "calendar_events":
            user = (params.get("_meta") or {}).get(_USER_META)
            output = calendar_events(str(args["date"]), user)
        elif name == "count_slowly":
            token = (params.get("_meta") or {}).get("progressToken")
            steps = int(args["steps"])
            for step in range(1, steps + 1):
                time.sleep(float(args.get("delay_s", 0.01)))
                if token is not None:
                    self.send({"jsonrpc": "2.0", "method": "notifications/progress",
                               "params": {"progressToken": token, "progress": step,
                                          "total": steps, "message": f"step {step}"}})
            output = {"counted": steps}
        elif name == "server_pid":
            output = {"pid": os.getpid()}
        else:
            raise KeyError(f"unknown tool {name!r}")
        return {"content": [{"type": "text", "text": json.dumps(output)}],
                "structuredContent": output, "isError": False}

    def _resources_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"resources": [{"uri": "demo://calendar", "name": "calendar",
                               "description": "Every event on the demo calendar, as JSON.",
                               "mimeType": "application/json"},
                              {"uri": "demo://stock-policy", "name": "stock-policy",
                               "description": "The stock policy (库存政策).",
                               "mimeType": "text/plain"}]}

    def _resources_read(self, params: dict[str, Any]) -> dict[str, Any]:
        if params["uri"] == "demo://stock-policy":
            return {"contents": [{"uri": "demo://stock-policy", "mimeType": "text/plain",
                                  "text": STOCK_POLICY}]}
        if params["uri"] != "demo://calendar":
            raise KeyError(f"no resource {params['uri']!r}")
        return {"contents": [{"uri": "demo://calendar", "mimeType": "application/json",
                              "text": json.dumps(list(CALENDAR))}]}

    def _prompts_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"prompts": [{"name": "plan_my_day",
                             "description": "Ask for a plan of the day from the calendar.",
                             "arguments": [{"name": "date", "required": True}]},
                            {"name": RETURN_PROMPT, "description": RETURN_PROMPT_DESCRIPTION,
                             "arguments": [{"name": "order_id", "required": True}]}]}

    def _prompts_get(self, params: dict[str, Any]) -> dict[str, Any]:
        if params["name"] == RETURN_PROMPT:
            text = return_request(str(params["arguments"]["order_id"]))
            return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
        date = params["arguments"]["date"]
        events = [e["title"] for e in CALENDAR if e["date"] == date]
        text = f"Plan my day on {date}. Calendar: {', '.join(events) or 'nothing scheduled'}."
        return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


def serve() -> None:
    """Serve MCP over stdin/stdout until stdin closes."""
    server = _Server()
    for line in sys.stdin:
        if line.strip():
            server.handle(json.loads(line))


if __name__ == "__main__":  # pragma: no cover
    serve()

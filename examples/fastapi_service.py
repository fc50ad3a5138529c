"""A FastAPI service that embeds hermes-fsm: the agent's API under ``/agent``, its own tool.

Run it::

    pip install -e . fastapi
    uvicorn examples.fastapi_service:app --port 8000
    curl -s -X POST localhost:8000/agent/v1/sessions/s1/turns \\
         -H 'Authorization: Bearer demo-token' -H 'Content-Type: application/json' \\
         -d '{"text": "What is the status of order 42?"}'

The service adds a tool of its own (``order_status``) to the bundled demo tools, teaches the
rules brain one intent for it, mounts hermes-fsm's ASGI app, and keeps its own routes
(``/orders/{id}``) beside it. Its lifespan starts and stops the orchestrator, because a
mounted app's own lifespan does not run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import yaml
from fastapi import FastAPI, HTTPException

from hermes_fsm import Orchestrator, RulesBrain, create_app
from hermes_fsm.brain import RuleBook
from hermes_fsm.demo.tools import build_demo_registry

ORDERS: dict[str, dict[str, Any]] = {
    "42": {"order_id": "42", "status": "shipped", "carrier": "SF Express"},
    "7": {"order_id": "7", "status": "packing", "carrier": None},
}



def _rules() -> RuleBook:
    """The bundled rules plus an ``order_status`` intent, its plan and its answer."""
    text = resources.files("hermes_fsm").joinpath("data/rules.yaml").read_text("utf-8")
    doc = yaml.safe_load(text)
    doc["intents"].insert(0, {
        "name": "order_status", "confidence": 0.9, "needs_tools": True,
        "patterns": [r"\border\b", "订单"],
        "extract": [r"(?P<order_id>\d+)"]})
    doc["plans"]["order_status"] = [{
        "tool": "order_status", "arguments": {"order_id": "{order_id}"},
        "reasoning": "The user asks about order {order_id}; order_status knows it."}]
    doc["answers"]["tools"]["order_status"] = [{
        "en": "Order {order_id} is {status}.", "zh": "订单 {order_id} 的状态:{status}。"}]
    return RuleBook.from_yaml(yaml.safe_dump(doc, allow_unicode=True), "<shop rules>")


def build_orchestrator() -> Orchestrator:
    """The demo tools plus ``order_status``, and a rules brain that knows when to use it."""
    tools = build_demo_registry()
    tools.remove("order_status")  # the service's own orders replace the demo's

    @tools.tool(timeout_s=2)
    async def order_status(order_id: str) -> dict[str, Any]:
        """Look up an order's shipping status by its number."""
        order = ORDERS.get(order_id)
        if order is None:
            return {"order_id": order_id, "status": "unknown", "carrier": None}
        return order

    return Orchestrator(tools=tools, brain=RulesBrain(_rules()))


orchestrator = build_orchestrator()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with orchestrator:  # MCP servers (if any) up with the service, down after it
        yield


app = FastAPI(title="Shop with an agent", lifespan=lifespan)
app.mount("/agent", create_app(orchestrator, tokens={"demo-token": "demo-user"},
                               manage_lifecycle=False))


@app.get("/orders/{order_id}")
async def get_order(order_id: str) -> dict[str, Any]:
    """The service's own route, beside the agent."""
    if order_id not in ORDERS:
        raise HTTPException(404, f"no order {order_id}")
    return ORDERS[order_id]

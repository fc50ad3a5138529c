"""The FastAPI embedding example, served by uvicorn and driven over HTTP."""

from __future__ import annotations

import httpx

from tests.http_support import read_sse, served

AUTH = {"Authorization": "Bearer demo-token"}


async def test_the_mounted_agent_answers_with_the_services_own_tool() -> None:
    from examples.fastapi_service import app

    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        response = await http.post("/agent/v1/sessions/s1/turns",
                                   json={"text": "What is the status of order 42?"},
                                   headers=AUTH)

    body = response.json()
    assert response.status_code == 200, body
    assert body["answer"] == "Order 42 is shipped."


async def test_the_mounted_agent_streams_the_tool_call_of_the_services_tool() -> None:
    from examples.fastapi_service import app

    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        async with http.stream("POST", "/agent/v1/sessions/s2/turns",
                               json={"text": "Where is my order 7?"},
                               headers={**AUTH, "Accept": "text/event-stream"}) as response:
            received = [e async for e in read_sse(response)]

    calls = [e["data"] for e in received if e["event"] == "tool_call_finished"]
    assert [(c["tool"], c["output"]["status"]) for c in calls] == [("order_status", "packing")]
    assert received[-1]["event"] == "result"


async def test_the_services_own_routes_live_beside_the_agent() -> None:
    from examples.fastapi_service import app

    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        order = await http.get("/orders/42")
        unauthenticated = await http.post("/agent/v1/sessions/s3/turns", json={"text": "hi"})

    assert order.json()["status"] == "shipped"
    assert unauthenticated.status_code == 401

"""U+0000 in a turn's body over HTTP: a 422 in the API's error shape, naming the position,
and the session goes on (it was a 500 for every later turn on PostgreSQL; issue 16: 1)."""

from __future__ import annotations

import httpx

from hermes_fsm.server import create_app
from hermes_fsm.testing import ScriptedBrain, demo_orchestrator
from tests.http_support import served
from tests.store.conftest import dispose_store, make_store
from tests.support import graph_with, happy_script

ALICE = {"Authorization": "Bearer alice-token"}


async def test_a_nul_in_the_body_is_a_422_and_the_durable_session_goes_on(tmp_path) -> None:
    store = await make_store("postgres", tmp_path)
    try:
        orchestrator = demo_orchestrator(graph_with(), brain=ScriptedBrain(happy_script()),
                                         store=store)
        app = create_app(orchestrator, tokens={"alice-token": "alice"})
        async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
            for body in ({"text": "a\u0000b"}, {"text": "hi", "user_id": "alice\u0000"}):
                for accept in ("application/json", "text/event-stream"):
                    response = await http.post("/v1/sessions/s1/turns", json=body,
                                               headers={**ALICE, "Accept": accept})
                    assert response.status_code == 422
                    error = response.json()["error"]
                    assert error["code"] == "validation_failed"
                    (detail,) = error["details"]
                    assert detail["loc"][0] == "body"
                    assert "U+0000" in detail["msg"] and "position" in detail["msg"]
            assert "at position 1" in str((await http.post(
                "/v1/sessions/s1/turns", json={"text": "a\u0000b"}, headers=ALICE)).json())
            for _ in range(2):
                response = await http.post("/v1/sessions/s1/turns",
                                           json={"text": "how many?"}, headers=ALICE)
                assert response.status_code == 200, response.text
                assert response.json()["status"] == "completed"
    finally:
        await dispose_store(store)

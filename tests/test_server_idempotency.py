"""``Idempotency-Key`` on turns, over real HTTP (uvicorn on 127.0.0.1, httpx)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from hermes_fsm.server import create_app
from hermes_fsm.store.sqlite import SQLiteStore
from hermes_fsm.testing import demo_orchestrator
from tests.http_support import served
from tests.test_server import ALICE, QUESTION, TOKENS, GatedBrain


class CountingBrain(GatedBrain):
    """The gated rules brain, counting the turns it decided the first state of."""

    def __init__(self, state: str = "RESPONSE", gated: bool = False) -> None:
        super().__init__(state)
        self.turns = 0
        if not gated:
            self.gate.set()

    async def decide(self, request: Any) -> Any:
        if request.state == "RESPONSE":
            self.turns += 1
        return await super().decide(request)


def _keyed(key: str) -> dict[str, str]:
    return {**ALICE, "Idempotency-Key": key}


async def test_a_retry_with_the_same_key_gets_the_same_answer_without_a_second_run() -> None:
    brain = CountingBrain()
    app = create_app(demo_orchestrator(brain=brain), tokens=TOKENS)
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        first = await http.post(
            "/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("k-1")
        )
        again = await http.post(
            "/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("k-1")
        )
        other = await http.post(
            "/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("k-2")
        )
    assert first.status_code == again.status_code == other.status_code == 200
    assert again.content == first.content and "342" in first.json()["answer"]
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert other.json()["turn_id"] != first.json()["turn_id"]
    assert brain.turns == 2  # k-1 once, k-2 once


async def test_concurrent_duplicates_run_once_and_get_the_same_answer() -> None:
    brain = CountingBrain(gated=True)
    app = create_app(demo_orchestrator(brain=brain), tokens=TOKENS)
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        sends = [
            asyncio.create_task(
                http.post("/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("dup"))
            )
            for _ in range(3)
        ]
        await asyncio.wait_for(brain.waiting.wait(), 10)
        await asyncio.sleep(0.2)  # the duplicates have arrived and wait
        assert not any(s.done() for s in sends)
        brain.gate.set()
        answers = await asyncio.gather(*sends)
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert len({a.content for a in answers}) == 1
    assert sorted(a.headers.get("idempotent-replayed", "") for a in answers) == ["", "true", "true"]
    assert brain.turns == 1


async def test_the_same_key_with_another_body_is_refused_with_422() -> None:
    brain = CountingBrain()
    app = create_app(demo_orchestrator(brain=brain), tokens=TOKENS)
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        first = await http.post(
            "/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("k")
        )
        changed = await http.post(
            "/v1/sessions/s1/turns", json={"text": "What about B2002?"}, headers=_keyed("k")
        )
    assert first.status_code == 200
    assert changed.status_code == 422
    error = changed.json()["error"]
    assert error["code"] == "idempotency_key_reused"
    assert "'k'" in error["message"] and "new key" in error["message"]
    assert brain.turns == 1


async def test_a_bad_key_or_a_keyed_stream_is_refused_with_422() -> None:
    app = create_app(demo_orchestrator(), tokens=TOKENS)
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        spaced = await http.post(
            "/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("has space")
        )
        stream = await http.post(
            "/v1/sessions/s1/turns",
            json={"text": QUESTION},
            headers={**_keyed("k"), "Accept": "text/event-stream"},
        )
    for refused in (spaced, stream):
        assert refused.status_code == 422
        assert refused.json()["error"]["details"][0]["loc"] == ["header", "Idempotency-Key"]
    assert "visible ASCII" in spaced.json()["error"]["message"]
    assert "JSON turns" in stream.json()["error"]["message"]


async def test_a_busy_answer_is_not_kept_the_retry_runs_the_turn() -> None:
    brain = CountingBrain(gated=True)
    app = create_app(demo_orchestrator(brain=brain), tokens=TOKENS)
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        holding = asyncio.create_task(
            http.post("/v1/sessions/s1/turns", json={"text": QUESTION}, headers=ALICE)
        )
        await asyncio.wait_for(brain.waiting.wait(), 10)
        busy = await http.post(
            "/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("k")
        )
        brain.gate.set()
        assert (await holding).status_code == 200
        retried = await http.post(
            "/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("k")
        )
        replayed = await http.post(
            "/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("k")
        )
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"
    assert retried.status_code == 200 and "idempotent-replayed" not in retried.headers
    assert replayed.content == retried.content and replayed.headers["idempotent-replayed"]
    assert brain.turns == 2


async def test_keys_survive_a_server_restart_with_a_durable_store(tmp_path) -> None:
    path = tmp_path / "sessions.db"
    answers = []
    turns = []
    for _ in range(2):  # a server, stopped; another one on the same store
        brain = CountingBrain()
        orchestrator = demo_orchestrator(brain=brain, store=SQLiteStore(path))
        app = create_app(orchestrator, tokens=TOKENS)
        async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
            answers.append(
                await http.post(
                    "/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("durable")
                )
            )
            events = await http.get("/v1/sessions/s1/events", headers=ALICE)
        turns.append(brain.turns)
        logged = events.json()
        started = [e for e in logged.get("events", logged) if e["kind"] == "turn_started"]
        assert len(started) == 1
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[1].content == answers[0].content
    assert answers[1].headers["idempotent-replayed"] == "true"
    assert turns == [1, 0]


async def test_a_duplicate_waits_for_a_turn_running_on_another_server(tmp_path) -> None:
    """Two servers on one store: the duplicate sent to the second waits for the first."""
    path = tmp_path / "sessions.db"
    first_brain, second_brain = CountingBrain(gated=True), CountingBrain()
    first = create_app(demo_orchestrator(brain=first_brain, store=SQLiteStore(path)), tokens=TOKENS)
    second = create_app(
        demo_orchestrator(brain=second_brain, store=SQLiteStore(path)), tokens=TOKENS
    )
    async with served(first) as url1, served(second) as url2, httpx.AsyncClient(timeout=20) as http:
        running = asyncio.create_task(
            http.post(f"{url1}/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("x"))
        )
        await asyncio.wait_for(first_brain.waiting.wait(), 10)
        duplicate = asyncio.create_task(
            http.post(f"{url2}/v1/sessions/s1/turns", json={"text": QUESTION}, headers=_keyed("x"))
        )
        await asyncio.sleep(0.3)
        assert not duplicate.done()
        first_brain.gate.set()
        one, two = await asyncio.gather(running, duplicate)
    assert one.status_code == two.status_code == 200
    assert one.content == two.content and two.headers["idempotent-replayed"] == "true"
    assert (first_brain.turns, second_brain.turns) == (1, 0)


async def test_the_openapi_document_describes_the_header_as_the_server_checks_it() -> None:
    """The ``Idempotency-Key`` parameter's schema accepts exactly the keys the server
    accepts, and the replay header and the key's error codes are documented."""
    import jsonschema

    app = create_app(demo_orchestrator(brain=CountingBrain()), tokens=TOKENS)
    keys = ["k-1", "a" * 200, "a" * 201, "has space", "", "~!#$%&'*+.^_`|"]
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        doc = (await http.get("/openapi.json")).json()
        accepted = []
        for i, key in enumerate(keys):
            answer = await http.post(
                f"/v1/sessions/s{i}/turns", json={"text": QUESTION}, headers=_keyed(key)
            )
            assert answer.status_code in (200, 422), answer.text
            accepted.append(answer.status_code == 200)

    turn = doc["paths"]["/v1/sessions/{session_id}/turns"]["post"]
    (param,) = [p for p in turn["parameters"] if p["in"] == "header"]
    assert param["name"].lower() == "idempotency-key" and param["required"] is False
    validator = jsonschema.Draft202012Validator(param["schema"])
    assert [validator.is_valid(key) for key in keys] == accepted
    assert accepted == [True, True, False, False, False, True]
    assert "Idempotent-Replayed" in turn["responses"]["200"]["headers"]
    assert "idempotency_key_in_progress" in turn["responses"]["409"]["description"]
    assert "Retry-After" in turn["responses"]["409"]["headers"]
    assert "idempotency_key_reused" in turn["responses"]["422"]["description"]
    events = doc["paths"]["/v1/sessions/{session_id}/events"]["get"]
    assert "Idempotency" not in str(events)  # only the turn operation takes a key

"""The ASGI app served by uvicorn on 127.0.0.1, driven by a real HTTP client (httpx)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from hermes_fsm import Orchestrator
from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.server import create_app
from hermes_fsm.testing import demo_orchestrator
from tests.http_support import read_sse, served

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}
STREAM = {**ALICE, "Accept": "text/event-stream"}
QUESTION = "How many A1001 are left in the east warehouse?"


class GatedBrain:
    """The rules brain, holding at one state until ``gate`` is set (``waiting`` says it is)."""

    name = "gated-rules"

    def __init__(self, state: str = "RESPONSE") -> None:
        self.inner = RulesBrain()
        self.state = state
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def decide(self, request: BrainRequest) -> Any:
        if request.state == self.state:
            self.waiting.set()
            await self.gate.wait()
        return await self.inner.decide(request)


@pytest.fixture
async def orchestrator() -> Orchestrator:
    return demo_orchestrator()


@pytest.fixture
def serve_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """uvicorn's defaults (what ``hermes-fsm serve`` runs), or (parametrized) one of its
    HTTP protocols."""
    http = getattr(request, "param", None)
    if http == "httptools":
        pytest.importorskip("httptools")  # the serve extra
    return {"http": http} if http else {}


BOTH_SERVERS = pytest.mark.parametrize("serve_options", ["h11", "httptools"], indirect=True)


@pytest.fixture
async def client(orchestrator: Orchestrator,
                 serve_options: dict[str, Any]) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(orchestrator, tokens=TOKENS)
    async with served(app, **serve_options) as url, httpx.AsyncClient(base_url=url,
                                                                      timeout=20) as http:
        yield http


async def wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.01)


# --- turns --------------------------------------------------------------------------------


@BOTH_SERVERS
async def test_a_json_turn_returns_the_result(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/sessions/s1/turns", json={"text": QUESTION}, headers=ALICE)

    assert response.status_code == 200
    body = response.json()
    assert body["session_id"] == "s1" and body["status"] == "completed"
    assert "342" in body["answer"]
    assert body["path"][0] == body["path"][-1] == "IDLE"


@BOTH_SERVERS
async def test_a_streamed_turn_sends_its_events_in_order_and_ends_with_the_result(
        client: httpx.AsyncClient) -> None:
    async with client.stream("POST", "/v1/sessions/s1/turns", json={"text": QUESTION},
                             headers=STREAM) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        received = [e async for e in read_sse(response)]

    events, result = received[:-1], received[-1]
    assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))
    assert [e["event"] for e in events] == [e["data"]["kind"] for e in events]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_finished"
    assert {"state_entered", "tool_call_started", "tool_call_finished"} <= set(kinds)
    assert result["event"] == "result"
    assert result["data"]["status"] == "completed" and "342" in result["data"]["answer"]
    assert result["data"]["last_seq"] == len(events)


async def test_a_second_turn_on_a_busy_session_is_refused_with_409(
        orchestrator: Orchestrator, client: httpx.AsyncClient) -> None:
    brain = orchestrator.services.brain = GatedBrain()
    first = asyncio.create_task(client.post("/v1/sessions/s1/turns", json={"text": QUESTION},
                                            headers=ALICE))
    await asyncio.wait_for(brain.waiting.wait(), 10)

    second = await client.post("/v1/sessions/s1/turns", json={"text": "hi"}, headers=ALICE)
    brain.gate.set()

    assert second.status_code == 409
    assert second.json()["error"]["code"] == "session_busy"
    assert (await first).json()["status"] == "completed"


@BOTH_SERVERS
async def test_a_streamed_turn_on_a_busy_session_is_refused_with_409(
        orchestrator: Orchestrator, client: httpx.AsyncClient) -> None:
    brain = orchestrator.services.brain = GatedBrain()
    first = asyncio.create_task(client.post("/v1/sessions/s1/turns", json={"text": QUESTION},
                                            headers=ALICE))
    await asyncio.wait_for(brain.waiting.wait(), 10)

    second = await client.post("/v1/sessions/s1/turns", json={"text": "hi"}, headers=STREAM)
    brain.gate.set()

    assert second.status_code == 409
    assert (await first).status_code == 200


@BOTH_SERVERS
async def test_a_client_that_disconnects_mid_stream_leaves_a_complete_turn_in_the_log(
        orchestrator: Orchestrator, client: httpx.AsyncClient) -> None:
    brain = orchestrator.services.brain = GatedBrain()
    async with client.stream("POST", "/v1/sessions/s1/turns", json={"text": QUESTION},
                             headers=STREAM) as response:
        first = [e async for e in read_sse(response, limit=3)]
    # the stream is closed while the turn waits in RESPONSE
    running = _hub(orchestrator).running["s1"]
    await wait_for(lambda: not running._subscribers)
    assert not running.finished
    brain.gate.set()
    await wait_for(lambda: "s1" not in _hub(orchestrator).running)

    logged = (await client.get("/v1/sessions/s1/events", headers=ALICE)).json()["events"]
    assert [e["event"] for e in first] == [e["kind"] for e in logged[:3]]
    assert logged[0]["kind"] == "turn_started" and logged[-1]["kind"] == "turn_finished"
    assert logged[-1]["status"] == "completed"
    assert [e["seq"] for e in logged] == list(range(1, len(logged) + 1))
    assert orchestrator.sessions()["s1"].state == "IDLE"


def _hub(orchestrator: Orchestrator) -> Any:
    return next(s for s in orchestrator.sinks if type(s).__name__ == "TurnHub")


# --- reading events -------------------------------------------------------------------------


async def test_events_after_a_sequence_number_resume_the_log(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sessions/s1/turns", json={"text": QUESTION}, headers=ALICE)
    everything = (await client.get("/v1/sessions/s1/events", headers=ALICE)).json()["events"]

    rest = (await client.get("/v1/sessions/s1/events", params={"after": 5},
                             headers=ALICE)).json()["events"]

    assert rest == everything[5:]
    assert rest[0]["seq"] == 6


@BOTH_SERVERS
async def test_a_resumed_stream_joins_a_running_turn_without_gaps_or_repeats(
        orchestrator: Orchestrator, client: httpx.AsyncClient) -> None:
    brain = orchestrator.services.brain = GatedBrain()
    async with client.stream("POST", "/v1/sessions/s1/turns", json={"text": QUESTION},
                             headers=STREAM) as response:
        first = [e async for e in read_sse(response, limit=4)]
    last = int(first[-1]["id"])

    async with client.stream("GET", "/v1/sessions/s1/events", params={"after": last},
                             headers=STREAM) as response:
        await asyncio.wait_for(brain.waiting.wait(), 10)
        brain.gate.set()
        resumed = [e async for e in read_sse(response)]

    seqs = [int(e["id"]) for e in first] + [int(e["id"]) for e in resumed[:-1]]
    assert seqs == list(range(1, len(seqs) + 1))
    assert resumed[-2]["event"] == "turn_finished"
    assert resumed[-1]["event"] == "result" and resumed[-1]["data"]["status"] == "completed"


@BOTH_SERVERS
async def test_a_resumed_stream_of_an_idle_session_sends_the_log_and_ends(
        client: httpx.AsyncClient) -> None:
    await client.post("/v1/sessions/s1/turns", json={"text": QUESTION}, headers=ALICE)

    async with client.stream("GET", "/v1/sessions/s1/events",
                             headers={**STREAM, "Last-Event-ID": "3"}) as response:
        resumed = [e async for e in read_sse(response)]

    assert int(resumed[0]["id"]) == 4
    assert resumed[-1]["event"] == "turn_finished"


async def test_the_recording_of_a_session_is_jsonl_with_a_header(
        client: httpx.AsyncClient) -> None:
    await client.post("/v1/sessions/s1/turns", json={"text": QUESTION}, headers=ALICE)

    response = await client.get("/v1/sessions/s1/recording", headers=ALICE)

    lines = response.text.splitlines()
    assert response.status_code == 200
    assert '"format":"hermes-fsm/recording"' in lines[0].replace(" ", "")
    assert '"kind":"turn_started"' in lines[1].replace(" ", "")


@pytest.mark.parametrize(("fmt", "needle"), [("mermaid", "flowchart"), ("svg", "<svg"),
                                             ("html", "<html"), ("dot", "digraph")])
async def test_the_graph_is_served_in_each_format(client: httpx.AsyncClient, fmt: str,
                                                  needle: str) -> None:
    response = await client.get("/v1/graph", params={"format": fmt}, headers=ALICE)

    assert response.status_code == 200
    assert needle in response.text


# --- authentication -------------------------------------------------------------------------


async def test_a_request_without_a_token_is_refused_with_401(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/sessions/s1/turns", json={"text": QUESTION})

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "unauthenticated"


async def test_a_request_with_a_wrong_token_is_refused_with_401(
        client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/graph", headers={"Authorization": "Bearer nope"})

    assert response.status_code == 401


async def test_a_user_cannot_run_a_turn_on_another_users_session(
        client: httpx.AsyncClient) -> None:
    await client.post("/v1/sessions/s1/turns", json={"text": QUESTION}, headers=ALICE)

    response = await client.post("/v1/sessions/s1/turns", json={"text": "hi"}, headers=BOB)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


@pytest.mark.parametrize("what", ["events", "recording"])
async def test_a_user_cannot_read_another_users_session(client: httpx.AsyncClient,
                                                        what: str) -> None:
    await client.post("/v1/sessions/s1/turns", json={"text": QUESTION}, headers=ALICE)

    response = await client.get(f"/v1/sessions/s1/{what}", headers=BOB)

    assert response.status_code == 403


async def test_a_body_user_id_other_than_the_tokens_user_is_refused(
        client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/sessions/s1/turns",
                                 json={"text": QUESTION, "user_id": "bob"}, headers=ALICE)

    assert response.status_code == 403


# --- validation and unknown sessions ---------------------------------------------------------


@pytest.mark.parametrize(("body", "field"), [
    ({}, "text"),
    ({"text": "   "}, "text"),
    ({"text": 42}, "text"),
    ({"text": "hi", "colour": "red"}, "colour"),
])
async def test_an_invalid_turn_body_is_refused_with_422_naming_the_field(
        client: httpx.AsyncClient, body: dict[str, Any], field: str) -> None:
    response = await client.post("/v1/sessions/s1/turns", json=body, headers=ALICE)

    assert response.status_code == 422
    details = response.json()["error"]["details"]
    assert ["body", field] in [d["loc"] for d in details]


async def test_a_body_that_is_not_json_is_refused_with_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/sessions/s1/turns", content=b"text=hi", headers=ALICE)

    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["type"] == "json_invalid"


@pytest.mark.parametrize(("path", "params", "loc"), [
    ("/v1/sessions/s1/events", {"after": "x"}, ["query", "after"]),
    ("/v1/sessions/s1/events", {"after": "-1"}, ["query", "after"]),
    ("/v1/graph", {"format": "png"}, ["query", "format"]),
    ("/v1/sessions/bad%20id!/events", {}, ["path", "session_id"]),
])
async def test_invalid_query_and_path_values_are_refused_with_422(
        client: httpx.AsyncClient, path: str, params: dict[str, str], loc: list[str]) -> None:
    await client.post("/v1/sessions/s1/turns", json={"text": QUESTION}, headers=ALICE)

    response = await client.get(path, params=params, headers=ALICE)

    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["loc"] == loc


@pytest.mark.parametrize("what", ["events", "recording"])
async def test_an_unknown_session_is_404(client: httpx.AsyncClient, what: str) -> None:
    response = await client.get(f"/v1/sessions/nobody/{what}", headers=ALICE)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "session_not_found"


# --- service endpoints ------------------------------------------------------------------------


async def test_healthz_answers_without_a_token(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")

    assert response.status_code == 200 and response.text == "ok"


async def test_readyz_reports_each_backend(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")

    body = response.json()
    assert response.status_code == 200 and body["ready"] is True
    assert body["checks"]["brain"] == {"ready": True, "brain": "rules"}
    assert body["checks"]["memory"]["ready"] is True


async def test_readyz_is_503_with_the_reason_when_a_backend_fails(
        orchestrator: Orchestrator, client: httpx.AsyncClient) -> None:
    class DownBrain(RulesBrain):
        async def check(self) -> dict[str, Any]:
            raise ConnectionError("connection refused")

    orchestrator.services.brain = DownBrain()
    response = await client.get("/readyz")

    assert response.status_code == 503
    assert "connection refused" in response.json()["checks"]["brain"]["error"]


async def test_the_openapi_document_describes_every_endpoint(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()

    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {"/v1/sessions/{session_id}/turns",
                                 "/v1/sessions/{session_id}/events",
                                 "/v1/sessions/{session_id}/recording", "/v1/graph",
                                 "/healthz", "/readyz"}
    assert "TurnRequest" in doc["components"]["schemas"]
    assert "Event" in doc["components"]["schemas"]


async def test_without_tokens_the_user_comes_from_the_body() -> None:
    orchestrator = demo_orchestrator()
    async with served(create_app(orchestrator)) as url, httpx.AsyncClient(base_url=url) as http:
        response = await http.post("/v1/sessions/s1/turns",
                                   json={"text": QUESTION, "user_id": "carol"})

    assert response.status_code == 200
    assert orchestrator.sessions()["s1"].user_id == "carol"


# --- many sessions ------------------------------------------------------------------------------


@BOTH_SERVERS
async def test_a_hundred_concurrent_streamed_turns_on_a_hundred_sessions_stay_separate(
        orchestrator: Orchestrator, serve_options: dict[str, Any]) -> None:
    tokens = {f"token-{i}": f"user-{i}" for i in range(100)}
    app = create_app(orchestrator, tokens=tokens)
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)

    async def turn(http: httpx.AsyncClient, i: int) -> list[dict[str, Any]]:
        headers = {"Authorization": f"Bearer token-{i}", "Accept": "text/event-stream"}
        async with http.stream("POST", f"/v1/sessions/session-{i}/turns",
                               json={"text": QUESTION}, headers=headers) as response:
            assert response.status_code == 200
            return [e async for e in read_sse(response)]

    async with served(app, **serve_options) as url, httpx.AsyncClient(
            base_url=url, timeout=60, limits=limits) as http:
        streams = await asyncio.gather(*(turn(http, i) for i in range(100)))

    for i, received in enumerate(streams):
        *events, result = received
        assert result["event"] == "result" and result["data"]["status"] == "completed"
        assert {e["data"]["session_id"] for e in events} == {f"session-{i}"}
        assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))
        session = orchestrator.sessions()[f"session-{i}"]
        assert session.state == "IDLE" and session.user_id == f"user-{i}"
        assert [e.seq for e in session.events] == [int(e["id"]) for e in events]


# --- configuration and the serve command ------------------------------------------------------


def test_server_tokens_come_from_the_environment() -> None:
    from hermes_fsm.config.settings import load_config

    config = load_config(environ={"HERMES_SERVER_TOKENS": "t1=alice, t2=bob"})

    assert config.server.tokens == {"t1": "alice", "t2": "bob"}


def test_a_malformed_tokens_variable_is_a_config_error() -> None:
    from hermes_fsm.config.settings import load_config
    from hermes_fsm.errors import ConfigError

    with pytest.raises(ConfigError, match="HERMES_SERVER_TOKENS"):
        load_config(environ={"HERMES_SERVER_TOKENS": "just-a-token"})


def test_serve_refuses_a_public_address_without_tokens(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_fsm.cli.main import main

    monkeypatch.delenv("HERMES_SERVER_TOKENS", raising=False)
    code = main(["serve", "--host", "0.0.0.0", "--port", "0"])

    assert code == 1
    assert "without authentication" in capsys.readouterr().err


# --- sending less: bursts of events --------------------------------------------------------


async def asgi_post(app: Any, path: str, body: dict[str, Any], headers: dict[str, str],
                    send: Any = None) -> list[dict[str, Any]]:
    """Call the ASGI app directly (no server): the messages it sends (also to ``send``)."""
    raw = json.dumps(body).encode()
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
             "http_version": "1.1", "method": "POST", "scheme": "http", "path": path,
             "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]
             + [(b"content-type", b"application/json")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2), "state": {}}
    received = False
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []
    also = send

    async def sending(message: dict[str, Any]) -> None:
        sent.append(message)
        if also is not None:
            await also(message)

    try:
        await app(scope, receive, sending)
    finally:
        done.set()
    return sent


async def test_a_stream_sends_its_events_in_bursts_and_the_result_with_the_last_one() -> None:
    orchestrator = demo_orchestrator()
    app = create_app(orchestrator, tokens=TOKENS, manage_lifecycle=False)

    sent = await asgi_post(app, "/v1/sessions/s1/turns", {"text": QUESTION}, STREAM)

    bodies = [m["body"] for m in sent if m["type"] == "http.response.body" and m["body"]]
    events = orchestrator.sessions()["s1"].events
    assert 1 < len(bodies) < len(events)  # more than one burst, fewer sends than events
    frames = b"".join(bodies).split(b"\n\n")[:-1]
    assert [int(f.split(b"\n")[0][4:]) for f in frames[:-1]] == [e.seq for e in events]
    assert frames[-1].startswith(b"event: result\n")
    assert b"event: turn_finished" in bodies[-1] and b"event: result" in bodies[-1]
    assert sent[-1]["body"] == bodies[-1] and sent[-1]["more_body"] is False  # and the end


async def test_two_apps_on_one_orchestrator_each_stream_only_their_own_turns() -> None:
    orchestrator = demo_orchestrator()
    create_app(orchestrator, tokens=TOKENS)  # a first app, attached as a sink too
    app = create_app(orchestrator, tokens=TOKENS)

    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as http:
        async with http.stream("POST", "/v1/sessions/s1/turns", json={"text": QUESTION},
                               headers=STREAM) as response:
            received = [e async for e in read_sse(response)]

    seqs = [int(e["id"]) for e in received[:-1]]
    assert seqs == list(range(1, len(orchestrator.sessions()["s1"].events) + 1))


# --- the hub as a data sink: frames from field dicts, the same bytes --------------------------


async def test_a_streamed_turn_sends_the_bytes_each_event_object_would_write() -> None:
    from hermes_fsm.server.wire import sse

    orchestrator = demo_orchestrator()
    app = create_app(orchestrator, tokens=TOKENS, manage_lifecycle=False)

    sent = await asgi_post(app, "/v1/sessions/s1/turns", {"text": QUESTION}, STREAM)

    stream = b"".join(m["body"] for m in sent if m["type"] == "http.response.body")
    logged = b"".join(sse(e) for e in orchestrator.sessions()["s1"].events)
    assert stream.startswith(logged)
    assert stream[len(logged):].startswith(b"event: result\n")


async def test_the_events_of_a_running_turn_read_as_json_are_those_logged_after_it(
        orchestrator: Orchestrator, client: httpx.AsyncClient) -> None:
    brain = orchestrator.services.brain = GatedBrain()
    turn = asyncio.create_task(client.post("/v1/sessions/s1/turns", json={"text": QUESTION},
                                           headers=ALICE))
    await asyncio.wait_for(brain.waiting.wait(), 10)

    live = (await client.get("/v1/sessions/s1/events", params={"after": 2},
                             headers=ALICE)).json()
    brain.gate.set()
    assert (await turn).status_code == 200
    logged = (await client.get("/v1/sessions/s1/events", params={"after": 2},
                               headers=ALICE)).json()

    assert live["running"] is True and logged["running"] is False
    assert live["events"][0]["seq"] == 3
    assert live["events"] == logged["events"][:len(live["events"])]
    assert "turn_finished" not in {e["kind"] for e in live["events"]}  # held in RESPONSE
    assert len(logged["events"]) > len(live["events"])


async def test_an_object_sink_beside_the_hub_gets_every_event_as_before() -> None:
    from hermes_fsm.events import ListSink

    sink = ListSink()
    orchestrator = demo_orchestrator(sinks=[sink])
    app = create_app(orchestrator, tokens=TOKENS, manage_lifecycle=False)

    sent = await asgi_post(app, "/v1/sessions/s1/turns", {"text": QUESTION}, STREAM)

    assert sent[0]["status"] == 200
    assert sink.events == orchestrator.sessions()["s1"].events
    assert type(sink.events[0]).__name__ == "TurnStarted"


# --- the turns route through Starlette's stack ----------------------------------------------


async def test_a_turn_goes_through_middleware_added_to_the_app() -> None:
    seen: list[str] = []

    class Tag:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            seen.append(scope["path"])
            await self.app(scope, receive, send)

    orchestrator = demo_orchestrator()
    app = create_app(orchestrator, tokens=TOKENS, manage_lifecycle=False)
    app.add_middleware(Tag)

    sent = await asgi_post(app, "/v1/sessions/s1/turns", {"text": QUESTION}, ALICE)

    assert sent[0]["status"] == 200
    assert seen == ["/v1/sessions/s1/turns"]


async def test_a_failing_turn_endpoint_answers_500_as_json_and_raises() -> None:
    orchestrator = demo_orchestrator()
    app = create_app(orchestrator, tokens=TOKENS, manage_lifecycle=False)

    def broken() -> Any:
        raise RuntimeError("a bug")

    orchestrator.sessions = broken  # type: ignore[method-assign]
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with pytest.raises(RuntimeError, match="a bug"):
        await asgi_post(app, "/v1/sessions/s1/turns", {"text": QUESTION}, ALICE, send=send)
    assert sent[0]["status"] == 500
    assert json.loads(sent[1]["body"])["error"]["code"] == "internal_error"
    assert (b"content-type", b"application/json") in sent[0]["headers"]


async def test_a_turn_on_the_app_mounted_under_a_prefix_is_served() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    orchestrator = demo_orchestrator()
    inner = create_app(orchestrator, tokens=TOKENS, manage_lifecycle=False)
    outer = Starlette(routes=[Mount("/agent", app=inner)])

    sent = await asgi_post(outer, "/agent/v1/sessions/s1/turns", {"text": QUESTION}, ALICE)

    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"])["session_id"] == "s1"


def test_a_json_answer_is_what_starlettes_json_response_writes_byte_for_byte() -> None:
    from starlette.responses import JSONResponse

    from hermes_fsm.server.wire import JSONBytes

    data = {"answer": "库存: 12 — “east”", "path": ["IDLE", "INTENT"], "ms": 1.5, "x": None}
    ours, theirs = JSONBytes(data), JSONResponse(data)

    assert (ours.status_code, ours.raw_headers, ours.body) == (
        theirs.status_code, theirs.raw_headers, theirs.body)


# --- durable sessions: any server process reads them from the store ------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_durable_session_is_read_by_a_server_that_did_not_run_it(
        kind: str, tmp_path: Any) -> None:
    """A restarted (or second) server serves the owner's events and recording from the
    store; another user is still refused."""
    import uuid

    from hermes_fsm.store import SQLiteStore
    from tests.memory.conftest import PG_URL, need

    schema = f"hermes_test_{uuid.uuid4().hex[:10]}"

    def store() -> Any:
        if kind == "sqlite":
            return SQLiteStore(tmp_path / "sessions.sqlite3")
        need(PG_URL, 5432, "PostgreSQL")
        from hermes_fsm.store import PostgresStore
        return PostgresStore(PG_URL, schema=schema)

    first_store, second_store = store(), store()
    await first_store.open()
    await second_store.open()
    try:
        first = create_app(demo_orchestrator(store=first_store), tokens=TOKENS,
                           manage_lifecycle=False)
        second = create_app(demo_orchestrator(store=second_store), tokens=TOKENS,
                            manage_lifecycle=False)
        one = httpx.AsyncClient(transport=httpx.ASGITransport(app=first), base_url="http://a")
        two = httpx.AsyncClient(transport=httpx.ASGITransport(app=second), base_url="http://b")
        async with one, two:
            turn = await one.post("/v1/sessions/s1/turns", json={"text": QUESTION},
                                  headers=ALICE)
            assert turn.status_code == 200
            ran = (await one.get("/v1/sessions/s1/events", headers=ALICE)).json()["events"]

            events = await two.get("/v1/sessions/s1/events", headers=ALICE)
            later = await two.get("/v1/sessions/s1/events", params={"after": 3}, headers=ALICE)
            recording = await two.get("/v1/sessions/s1/recording", headers=ALICE)
            streamed = await two.get("/v1/sessions/s1/events",
                                     headers={**ALICE, "Accept": "text/event-stream"})
            bob = [await two.get(f"/v1/sessions/s1/{what}", headers=BOB)
                   for what in ("events", "recording")]
            unknown = await two.get("/v1/sessions/nope/events", headers=ALICE)

        assert events.status_code == 200, events.text
        assert events.json()["events"] == ran and len(ran) == turn.json()["last_seq"]
        assert [e["seq"] for e in later.json()["events"]] == list(range(4, len(ran) + 1))
        assert recording.status_code == 200, recording.text
        lines = [json.loads(line) for line in recording.text.splitlines()]
        assert lines[0]["session_id"] == "s1" and lines[0]["user_id"] == "alice"
        assert lines[1:] == ran
        assert streamed.status_code == 200 and streamed.text.count("\nevent: ") + 1 >= len(ran)
        assert [r.status_code for r in bob] == [403, 403]
        assert all(r.json()["error"]["code"] == "forbidden" for r in bob)
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "session_not_found"
    finally:
        for made in (first_store, second_store):
            if hasattr(made, "drop_schema") and made is second_store:
                await made.drop_schema()
            await made.close()


# --- every error is the API's JSON error, routes or not ----------------------------------


def _asgi_client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


@pytest.mark.parametrize(("method", "path", "status", "code"), [
    ("GET", "/nowhere", 404, "not_found"),
    ("GET", "/v1/sessions/s1/turns/extra", 404, "not_found"),
    ("DELETE", "/v1/sessions/s1/turns", 405, "method_not_allowed"),
    ("GET", "/v1/sessions/s1/turns", 405, "method_not_allowed"),
    ("POST", "/healthz", 405, "method_not_allowed"),
])
async def test_an_error_outside_the_routes_is_the_json_error_shape(
        method: str, path: str, status: int, code: str) -> None:
    app = create_app(demo_orchestrator(), tokens=TOKENS, manage_lifecycle=False)
    async with _asgi_client(app) as http:
        response = await http.request(method, path, headers=ALICE)

    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and path in error["message"] and method in error["message"]
    if status == 405:
        assert "allow" in response.headers
        assert all(m in error["message"] for m in response.headers["allow"].split(", "))


async def test_a_client_that_disconnects_mid_body_is_logged_in_one_line(
        caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(demo_orchestrator(), tokens=TOKENS, manage_lifecycle=False)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/sessions/s1/turns",
             "raw_path": b"/v1/sessions/s1/turns", "query_string": b"", "root_path": "",
             "headers": [(b"authorization", b"Bearer alice-token"),
                         (b"content-type", b"application/json"), (b"content-length", b"100")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2), "state": {}}
    messages = iter([{"type": "http.request", "body": b'{"text": "Ho', "more_body": True},
                     {"type": "http.disconnect"}])

    async def receive() -> Any:
        return next(messages)

    async def send(message: Any) -> None:
        pass

    with caplog.at_level("INFO", logger="hermes_fsm.server"):
        await app(scope, receive, send)  # raises nothing: there is nothing to log as a bug

    records = [r for r in caplog.records if "disconnected" in r.getMessage()]
    assert len(records) == 1 and records[0].exc_info is None
    assert "/v1/sessions/s1/turns" in records[0].getMessage()
    assert "s1" not in app.state.orchestrator.sessions()  # no turn started

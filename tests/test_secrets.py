"""No configured secret reaches anything hermes-fsm writes (issue 16, defect 8).

Secrets are planted in every configurable place: the Redis and PostgreSQL URLs'
passwords, the OpenAI-compatible brain's API key (``api_key_env``), the server's bearer
tokens (file and ``HERMES_SERVER_TOKENS``), an MCP server's ``headers`` and a token in its
URL's query. The brain's server answers INTENT with 401 and a body that echoes the
``Authorization`` header it got; the MCP server's URL answers 401 echoing every header;
the Redis URL points to a closed port (the local Redis takes any password), so the
working-memory commit and the Redis lease fail and say where. Then every artefact is
scanned for the planted strings: the events (``run --json``), the JSON log, stderr, the
recording (``--record``), every row the PostgreSQL session store and experience log hold,
``record export``, ``sessions list``, ``mcp list --json``, and the HTTP API's answers
(turn, events, recording, readyz).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from tests.fake_chat_server import FakeChatServer
from tests.http_support import served
from tests.memory.conftest import PG_URL, REDIS_URL, need

COMMIT = {"memory_updates": [{"key": "preference.contact", "update_type": "create",
                              "value": "email", "evidence_source": "user_message"}]}
ANSWER = {"text": "I could not read that, sorry.", "evidence": []}
REPO = Path(__file__).resolve().parent.parent
KEY_ENV = "HERMES_SECRETS_TEST_API_KEY"


def planted() -> dict[str, str]:
    tag = uuid.uuid4().hex[:12]
    return {what: f"{what}-{tag}-planted" for what in (
        "redispw", "pgpw", "apikey", "srvtoken", "envtoken", "mcpbearer", "mcpkey", "mcpquery")}


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def config_text(secrets: dict[str, str], fake: str, data_dir: Path, lease: str,
                schema: str) -> str:
    redis = f"redis://:{secrets['redispw']}@127.0.0.1:{closed_port()}/0"  # refused
    pg = PG_URL.replace("postgresql://postgres@", f"postgresql://postgres:{secrets['pgpw']}@", 1)
    config = {
        "brain": {"kind": "openai", "base_url": f"{fake}/v1", "model": "fake-model",
                  "api_key_env": KEY_ENV, "max_retries": 0, "timeout_s": 5},
        "mcp_servers": {"notes": {
            "transport": "http", "url": f"{fake}/mcp?token={secrets['mcpquery']}",
            "headers": {"Authorization": f"Bearer {secrets['mcpbearer']}",
                        "X-Api-Key": secrets["mcpkey"]},
            "connect_timeout_s": 3, "restart_backoff_s": 5}},
        "server": {"tokens": {secrets["srvtoken"]: "alice"}},
        "memory": {"redis_url": redis, "postgres_url": pg, "postgres_schema": f"{schema}_exp",
                   "data_dir": str(data_dir)},
        "sessions": {"store": "postgres", "pg_schema": f"{schema}_sess", "lease": lease},
        "log": {"format": "json", "level": "debug"},
    }
    return json.dumps(config)  # JSON is YAML


def environment(secrets: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update({KEY_ENV: secrets["apikey"], "PYTHONIOENCODING": "utf-8",
                "HERMES_SERVER_TOKENS": f"{secrets['envtoken']}=bob"})
    return env


async def hermes(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``python -m hermes_fsm.cli.main args``: (exit code, stdout + stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hermes_fsm.cli.main", *args, cwd=REPO, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode() + "\n" + err.decode()


async def stored_rows(schemas: list[str]) -> str:
    """Every row of every table of ``schemas``, as text."""
    import psycopg

    lines: list[str] = []
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        tables = await (await conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema = ANY(%s)", (schemas,))).fetchall()
        for schema, table in tables:
            rows = await (await conn.execute(
                f'SELECT t::text FROM "{schema}"."{table}" t')).fetchall()
            lines += [f"{schema}.{table}: {row[0]}" for row in rows]
    return "\n".join(lines)


async def drop_schemas(schemas: list[str]) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        for schema in schemas:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def leaks(secrets: dict[str, str], artefacts: dict[str, str]) -> list[str]:
    return [f"{what} in {where}: …{text[max(0, text.find(value) - 120):text.find(value) + 40]}…"
            for where, text in artefacts.items() for what, value in secrets.items()
            if value in text]


async def test_no_planted_secret_reaches_any_artefact(tmp_path, monkeypatch):
    need(PG_URL, 5432, "PostgreSQL")
    need(REDIS_URL, 6379, "Redis")
    secrets = planted()
    schema = f"hermes_secrets_{uuid.uuid4().hex[:8]}"
    schemas = [f"{schema}_sess", f"{schema}_exp"]
    server = FakeChatServer(echo_status=401)  # INTENT: 401 with the key echoed
    server.script("response", ANSWER)  # a turn to write to working memory: Redis refuses
    server.script("memory_commit", COMMIT)
    env = environment(secrets)
    artefacts: dict[str, str] = {}
    try:
        async with served(server.app()) as fake:
            config = tmp_path / "hermes.yaml"
            config.write_text(config_text(secrets, fake, tmp_path / "data", "local", schema))
            leased = tmp_path / "leased.yaml"
            leased.write_text(config_text(secrets, fake, tmp_path / "data", "redis", schema))
            records = tmp_path / "records"
            session = ["--session", "s-secrets", "--user", "u1"]

            code, artefacts["run --json (events, JSON log, stderr)"] = await hermes(
                ["run", "--config", str(config), "--json", "--record", str(records),
                 *session, "How many A1001 are left?"], env)
            assert code == 0, artefacts["run --json (events, JSON log, stderr)"]
            events = [json.loads(line) for line in
                      artefacts["run --json (events, JSON log, stderr)"].splitlines()
                      if line.startswith('{') and '"kind"' in line]
            kinds = {e["kind"] for e in events}
            # the failures the secrets would ride on did happen
            assert {"handler_failed", "memory_commit_failed"} <= kinds, events[:3]
            assert server.authorizations and all(
                a == f"Bearer {secrets['apikey']}" for a in server.authorizations)

            code, artefacts["run with the Redis lease"] = await hermes(
                ["run", "--config", str(leased), *session, "again"], env)
            assert code == 1 and "Redis lease" in artefacts["run with the Redis lease"]

            for path in sorted(records.rglob("*")):
                if path.is_file():
                    artefacts[f"recording {path.name}"] = path.read_text("utf-8")
            assert any(k.startswith("recording") for k in artefacts)

            code, artefacts["record export"] = await hermes(
                ["record", "export", "s-secrets", "--config", str(config)], env)
            assert code == 0, artefacts["record export"]
            code, artefacts["sessions list"] = await hermes(
                ["sessions", "list", "--user", "u1", "--json", "--config", str(config)], env)
            assert code == 0 and "s-secrets" in artefacts["sessions list"]
            code, artefacts["mcp list --json"] = await hermes(
                ["mcp", "list", "--json", "--config", str(config)], env)

            artefacts["HTTP API"] = await through_the_api(config, secrets, env, monkeypatch)
            artefacts["store and experience log rows"] = await stored_rows(schemas)
            assert "handler_failed" in artefacts["store and experience log rows"]
    finally:
        await drop_schemas(schemas)

    found = leaks(secrets, artefacts)
    assert not found, f"{len(found)} planted secret(s) written:\n" + "\n".join(found)


async def through_the_api(config: Path, secrets: dict[str, str], env: dict[str, str],
                          monkeypatch: pytest.MonkeyPatch) -> str:
    """A turn over HTTP (the bearer token planted), then its events, recording, readyz."""
    from hermes_fsm.config import build_orchestrator, load_config
    from hermes_fsm.server import create_app

    monkeypatch.setenv(KEY_ENV, secrets["apikey"])
    loaded = load_config(config, environ=env)
    orchestrator = build_orchestrator(loaded)
    app = create_app(orchestrator, tokens=loaded.server.tokens)
    answers: list[str] = []
    auth = {"Authorization": f"Bearer {secrets['envtoken']}"}  # it replaces the file's
    async with served(app) as url, httpx.AsyncClient(base_url=url, headers=auth,
                                                     timeout=60) as http:
        turn = await http.post("/v1/sessions/s-http/turns", json={"text": "hello"})
        answers.append(f"turn {turn.status_code}: {turn.text}")
        for path in ("/v1/sessions/s-http/events", "/v1/sessions/s-http/recording",
                     "/readyz", "/v1/sessions/nope/events"):
            response = await http.get(path)
            answers.append(f"{path} {response.status_code}: {response.text}")
        wrong = await http.get("/v1/sessions/s-http/events",
                               headers={"Authorization": "Bearer wrong"})
        answers.append(f"wrong token {wrong.status_code}: {wrong.text}")
    text = "\n".join(answers)
    assert "handler_failed" in text, text
    return text


# --- the policy itself -------------------------------------------------------------------


def test_every_url_loses_its_password_and_secret_query_values():
    from hermes_fsm._internal.redact import redact

    text = ("redis://:pw-one@cache:6379/0, postgresql://app:pw%40two@db/app, "
            "amqp://u:pw-three@mq/vhost?heartbeat=5, "
            "https://api.example/v1?api_key=qk-four&model=m&token=qk-five")
    assert redact(text) == (
        "redis://:***@cache:6379/0, postgresql://app:***@db/app, amqp://u:***@mq/vhost"
        "?heartbeat=5, https://api.example/v1?api_key=***&model=m&token=***")
    assert redact("Authorization: Bearer abc.def-ghi") == "Authorization: Bearer ***"
    assert redact("postgresql://postgres@127.0.0.1/test") == "postgresql://postgres@127.0.0.1/test"


def test_a_registered_secret_is_masked_in_every_form_and_short_values_are_not_registered():
    from hermes_fsm._internal.redact import redact, register_secret, register_url

    secret = f"s3cr/t {uuid.uuid4().hex[:8]}\"x"
    register_secret(secret)
    from urllib.parse import quote

    for form in (secret, quote(secret, safe=""), json.dumps(secret)[1:-1]):
        assert redact(f"echo: {form}.") == "echo: ***."
    register_secret("abc")  # too short to be a secret: masking it would garble text
    assert redact("abc") == "abc"
    password = f"pw-{uuid.uuid4().hex[:8]}"
    register_url(f"redis://user:{password}@host:6379/0")
    assert redact(f"AUTH failed for {password}") == "AUTH failed for ***"


def test_the_configuration_registers_its_secrets(tmp_path):
    from hermes_fsm._internal.redact import redact
    from hermes_fsm.config import load_config

    secrets = planted()
    config = tmp_path / "hermes.yaml"
    config.write_text(config_text(secrets, "http://127.0.0.1:1", tmp_path, "local",
                                  "hermes_unused"))
    load_config(config, environ=environment(secrets))
    for what, value in secrets.items():
        assert redact(f"... {value} ...") == "... *** ...", what

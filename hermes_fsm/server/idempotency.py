"""Turn-level idempotency over HTTP: ``Idempotency-Key`` on ``POST …/turns``.

A client that did not get its answer (a timeout, a dropped connection) sends the same
request again with the same key; the turn runs once:

- a retry after the turn ended gets the recorded answer (same status, same body, header
  ``Idempotent-Replayed: true``) without running anything;
- a duplicate sent while the turn runs waits for it and gets the same answer (in this
  process through the running turn, on another server process by polling the store);
- the same key with another body (another text or user) is refused ``422
  idempotency_key_reused``: a key names one request, not a slot to fill;
- an answer that says nothing ran to its end (``409 session_busy``, ``500``) is not kept:
  the next retry with that key runs the turn.

The keys live in the session store's effects journal (``effect_begin`` claims a key
atomically, ``effect_finish`` records the answer), so with a durable store (SQLite,
PostgreSQL) they survive a server restart and are shared by every server process. A key
is scoped to the user and the session. A claim whose server stopped mid-turn (started
more than ``stale_s`` ago, no answer) is taken over by the next retry.

>>> fingerprint("s1", "alice", b'{"text": "hi"}') == fingerprint("s1", "alice", b'{"text": "hi"}')
True
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.responses import Response

from hermes_fsm.server.wire import error_response

__all__ = [
    "HEADER",
    "KEY_PATTERN",
    "IdempotencyJournal",
    "TurnIdempotency",
    "fingerprint",
    "key_problem",
]

HEADER = "idempotency-key"
KEY_PATTERN = r"^[\x21-\x7e]{1,200}$"
"""A usable key: 1-200 visible ASCII characters (also the pattern in ``openapi.json``)."""
_KEY = re.compile(KEY_PATTERN)
_KEEP = frozenset({200, 403, 410, 422})
"""Statuses recorded for a key: the turn ran (or was refused for good)."""


class IdempotencyJournal(Protocol):
    """The part of a session store this uses (every ``SessionStore`` is one)."""

    async def effect_begin(self, key: str, session_id: str, tool: str) -> Any: ...

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None: ...


def key_problem(key: str) -> str | None:
    """Why ``key`` is not a usable ``Idempotency-Key``, or ``None``."""
    if _KEY.match(key):
        return None
    return (
        "the Idempotency-Key header must be 1-200 visible ASCII characters (no spaces); "
        "send a fresh random one (a UUID) per new turn and the same one on its retries"
    )


def fingerprint(session_id: str, user_id: str, body: bytes) -> str:
    """What a key is bound to: the session, the user and the request body."""
    digest = hashlib.sha256()
    for part in (session_id.encode(), user_id.encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: bytes
    media_type: str

    def response(self, replayed: bool) -> Response:
        headers = {"Idempotent-Replayed": "true"} if replayed else {}
        return Response(
            self.body, status_code=self.status, media_type=self.media_type, headers=headers
        )


class _Memory:
    """A journal in this process (an orchestrator without a session store)."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, Any]] = {}

    async def effect_begin(self, key: str, session_id: str, tool: str) -> Any:
        row = self._rows.get(key)
        if row is None:
            self._rows[key] = {"tool": tool, "status": "started", "outcome": None}
            return None
        return _Row(row["tool"], row["status"], row["outcome"])

    async def effect_finish(self, key: str, outcome: dict[str, Any]) -> None:
        self._rows[key].update(status="finished", outcome=dict(outcome))


@dataclass(frozen=True, slots=True)
class _Row:
    tool: str
    status: str
    outcome: dict[str, Any] | None


class TurnIdempotency:
    """Runs a turn request at most once per ``(user, session, Idempotency-Key)``.

    Args:
        journal: the session store (``None``: a journal in this process only).
        wait_s: how long a duplicate waits for a turn running on another process
            before it is answered ``409 idempotency_key_in_progress``.
        stale_s: a claim older than this without an answer is abandoned (its server
            stopped mid-turn): the next retry runs the turn.
        poll_s: how often a duplicate looks at the journal while it waits.
    """

    def __init__(
        self,
        journal: IdempotencyJournal | None,
        *,
        wait_s: float = 30.0,
        stale_s: float = 600.0,
        poll_s: float = 0.05,
    ) -> None:
        self.journal: IdempotencyJournal = journal if journal is not None else _Memory()
        self.wait_s, self.stale_s, self.poll_s = wait_s, stale_s, poll_s
        self._running: dict[str, tuple[str, asyncio.Future[_Answer]]] = {}
        self._tasks: set[asyncio.Task[Response]] = set()
        self.replayed = 0

    async def answer(
        self,
        key: str,
        user_id: str,
        session_id: str,
        body: bytes,
        run: Callable[[], Awaitable[Response]],
    ) -> Response:
        """The answer to a turn request carrying ``key``: ``run()``'s, at most once."""
        fp = fingerprint(session_id, user_id, body)
        base = f"http-turn/{user_id}/{session_id}/{key}"
        deadline = time.monotonic() + self.wait_s
        generation = 0
        while True:
            name = base if generation == 0 else f"{base}#{generation}"
            local = self._running.get(name)
            if local is not None:  # a duplicate of a turn this process runs now
                if local[0] != fp:
                    return _reused(key, session_id)
                answer = await asyncio.shield(local[1])
                self.replayed += 1
                return answer.response(replayed=True)
            known = await self.journal.effect_begin(
                name, session_id, f"http-turn:{fp}:{time.time():.3f}"
            )
            if known is None:  # ours: it runs and is recorded even if this client leaves
                future = asyncio.get_running_loop().create_future()
                self._running[name] = (fp, future)
                task = asyncio.get_running_loop().create_task(self._run(name, future, run))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return await asyncio.shield(task)
            known_fp, _, started = str(known.tool).removeprefix("http-turn:").partition(":")
            if known_fp != fp:
                return _reused(key, session_id)
            outcome = known.outcome if known.status == "finished" else None
            if isinstance(outcome, dict) and "status" in outcome:
                self.replayed += 1
                return _Answer(
                    int(outcome["status"]),
                    str(outcome["body"]).encode(),
                    str(outcome["media_type"]),
                ).response(replayed=True)
            if isinstance(outcome, dict) or _age(started) > self.stale_s:
                generation += 1  # not kept (nothing ran to its end), or abandoned: run
                continue
            if time.monotonic() > deadline:  # running on another process, for too long
                return error_response(
                    409,
                    "idempotency_key_in_progress",
                    f"the turn with Idempotency-Key {key!r} on session {session_id!r} is "
                    "still running on another server process; retry with the same key "
                    "later to get its answer",
                    headers={"Retry-After": "1"},
                )
            await asyncio.sleep(self.poll_s)

    async def _run(
        self, name: str, future: asyncio.Future[_Answer], run: Callable[[], Awaitable[Response]]
    ) -> Response:
        try:
            response = await run()
            answer = _Answer(
                response.status_code,
                bytes(response.body),
                response.media_type or "application/json",
            )
            if answer.status in _KEEP:
                await self.journal.effect_finish(
                    name,
                    {
                        "status": answer.status,
                        "body": answer.body.decode(),
                        "media_type": answer.media_type,
                    },
                )
            else:  # nothing ran to its end: the next retry runs it
                await self.journal.effect_finish(name, {"rerun": answer.status})
            future.set_result(answer)
            return response
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc)
                future.exception()  # retrieved: no "never retrieved" warning
            try:  # the turn did not end: the next retry runs it (else it waits to go stale)
                await asyncio.shield(self.journal.effect_finish(name, {"rerun": "error"}))
            except Exception:  # the store is away: the claim goes stale instead
                pass
            raise
        finally:
            self._running.pop(name, None)


def _age(started: str) -> float:
    try:
        return time.time() - float(started)
    except ValueError:
        return 0.0


def _reused(key: str, session_id: str) -> Response:
    return error_response(
        422,
        "idempotency_key_reused",
        f"Idempotency-Key {key!r} was already used on session {session_id!r} for a "
        "different request (another text or user); a key names one turn: send a new key "
        "for a new turn, and the same body with the same key on a retry",
    )

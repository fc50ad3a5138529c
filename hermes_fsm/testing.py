"""Test helpers for users of hermes-fsm (and for our own tests).

- :class:`ScriptedBrain`: a real :class:`~hermes_fsm.brain.protocol.Brain` that returns given
  outputs per state or contract, in order — including invalid ones, exceptions, and
  hangs — and records every request so a test can check what was fed back.
- :func:`capture_events`: collect the events of an orchestrator within a ``with`` block.
- :func:`demo_orchestrator`: an orchestrator over the bundled demo (the rules brain and
  the demo tools), in one call.

>>> import asyncio
>>> brain = ScriptedBrain({"intent": [{"intent_type": "hi", "parameters": {},
...                                    "confidence": 2.0},   # breaks the contract
...                                   {"intent_type": "hi", "parameters": {},
...                                    "confidence": 0.9, "needs_tools": False}],
...                        "response": [{"text": "hello", "evidence": []}],
...                        "memory_commit": [{"memory_updates": []}]})
>>> result = asyncio.run(demo_orchestrator(brain=brain).run_turn("s", "hi"))
>>> result.answer, brain.requests[1].repair is not None
('hello', True)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hermes_fsm.brain.protocol import BrainRequest
from hermes_fsm.brain.rules import RulesBrain
from hermes_fsm.demo.tools import build_demo_registry
from hermes_fsm.engine.orchestrator import Orchestrator
from hermes_fsm.errors import BrainError
from hermes_fsm.events.model import Event
from hermes_fsm.events.sinks import SinkHost
from hermes_fsm.graph.model import Graph

__all__ = ["HANG", "ScriptedBrain", "capture_events", "demo_orchestrator"]


class _Hang:
    """Script entry: never answer (until cancelled by a timeout)."""

    def __repr__(self) -> str:
        return "HANG"


HANG = _Hang()
"""Put in a script to make that call hang until its timeout cancels it."""


class ScriptedBrain:
    """A brain that plays scripts.

    Args:
        script: per state name (``"INTENT"``) or contract name (``"intent"``) — state names
            win — a sequence of entries, played in order; the last entry repeats once the
            sequence is used up. An entry is an output (mapping, JSON text, Contract), an
            exception instance (raised), :data:`HANG`, or a callable taking the
            :class:`BrainRequest` and returning an entry.
        delay_s: await this long before every answer (simulates a model's latency).

    Attributes:
        requests: every request received, in order.
    """

    name = "scripted"

    def __init__(self, script: Mapping[str, Sequence[Any]], delay_s: float = 0.0) -> None:
        self.script = {key: list(entries) for key, entries in script.items()}
        self.delay_s = delay_s
        self.requests: list[BrainRequest] = []
        self._played: dict[str, int] = {}

    async def decide(self, request: BrainRequest) -> Any:
        self.requests.append(request)
        key = request.state if request.state in self.script else request.contract_name
        entries = self.script.get(key)
        if not entries:
            raise BrainError(f"ScriptedBrain has no script for state {request.state!r} or "
                             f"contract {request.contract_name!r}; add one")
        index = self._played.get(key, 0)
        self._played[key] = index + 1
        entry = entries[min(index, len(entries) - 1)]
        if callable(entry) and not isinstance(entry, type):
            entry = entry(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if entry is HANG:
            await asyncio.Event().wait()
        if isinstance(entry, BaseException):
            raise entry
        return entry

    def requests_for(self, key: str) -> list[BrainRequest]:
        """The requests of one state or contract name."""
        return [r for r in self.requests if key in (r.state, r.contract_name)]


class _Capture:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


@contextmanager
def capture_events(orchestrator: SinkHost) -> Iterator[_Capture]:
    """Collect every event the orchestrator emits inside the block (``.events``, ``.kinds()``)."""
    capture = _Capture()
    orchestrator.add_sink(capture)
    try:
        yield capture
    finally:
        orchestrator.remove_sink(capture)


def demo_orchestrator(graph: Graph | str | Path | None = None, **overrides: Any) -> Orchestrator:
    """An orchestrator over the bundled demo: the offline rules brain and the demo tools
    (unless ``brain=`` or ``tools=`` is given), in-process memory, no session store, no
    MCP server: nothing to start, nothing written to disk.

    ``graph`` and the keyword arguments are :class:`~hermes_fsm.engine.orchestrator.
    Orchestrator`'s. For an orchestrator as a configuration says, see
    :func:`hermes_fsm.config.build_orchestrator`.

    >>> import asyncio
    >>> result = asyncio.run(demo_orchestrator().run_turn("s1", "How many A1001 are left?"))
    >>> result.status, result.path[0] == result.path[-1] == "IDLE"
    ('completed', True)
    """
    if "brain" not in overrides:
        overrides["brain"] = RulesBrain()
    if "tools" not in overrides:
        overrides["tools"] = build_demo_registry()
    return Orchestrator(graph, **overrides)


ScriptEntry = Any | Callable[[BrainRequest], Any]

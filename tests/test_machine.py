"""The graph machine: a table of transitions fired per session, and the loggers left alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import Any

import pytest

from hermes_fsm.errors import HermesError
from hermes_fsm.graph.machine import GraphMachine
from tests.support import graph_with


class Turn(SimpleNamespace):
    """What the machine reads and calls on a turn."""

    def __init__(self, output_state: str | None = None, **output: Any) -> None:
        super().__init__(output_state=output_state, output=output, taken={}, seen=[])

    def on_transition(self, source: str, dest: str, trigger: str, key: Any) -> None:
        self.seen.append((source, dest, trigger))
        self.taken[key] = self.taken.get(key, 0) + 1


def test_done_fires_only_after_a_validated_output_of_the_state() -> None:
    machine = GraphMachine(graph_with())
    session = SimpleNamespace(state="INTENT")

    assert machine.fire("done", session, Turn(output_state=None)) is False
    assert machine.fire("done", session, Turn(output_state="PLANNING")) is False
    assert session.state == "INTENT"
    turn = Turn(output_state="INTENT")
    assert machine.fire("done", session, turn) is True
    assert turn.seen == [("INTENT", "RESPONSE", "done")]
    assert session.state == "RESPONSE"


def test_the_first_transition_whose_conditions_and_limit_pass_is_taken() -> None:
    machine = GraphMachine(graph_with())  # RESULT -> PLANNING if needs_more_tools, at most 4
    session = SimpleNamespace(state="INTENT")
    assert machine.fire("done", session, Turn("INTENT", needs_tools=True))
    assert session.state == "PLANNING"

    turn = Turn("RESULT", needs_more_tools=True)
    dests = []
    for _ in range(6):
        session.state = "RESULT"
        assert machine.fire("done", session, turn)
        dests.append(session.state)
    assert dests == ["PLANNING"] * 4 + ["RESPONSE"] * 2
    assert turn.taken[("RESULT", "PLANNING")] == 4


def test_a_trigger_without_a_transition_from_the_state_raises() -> None:
    machine = GraphMachine(graph_with())
    session = SimpleNamespace(state="IDLE")

    with pytest.raises(HermesError, match="can't fire 'done' from state 'IDLE'"):
        machine.fire("done", session, Turn(output_state="IDLE"))
    assert session.state == "IDLE"


def test_importing_and_running_changes_no_logger_the_application_configured() -> None:
    """The application's logging setup is its own: nothing in the package (at import or
    during a turn) changes a logger's level, handlers, propagation or enabled state. And
    nothing imports ``transitions`` (only a benchmark's peer now)."""
    script = textwrap.dedent("""
        import asyncio, importlib, logging, pkgutil
        names = ["", "transitions", "hermes_fsm", "mcp", "httpx", "uvicorn", "asyncio"]
        for name in names:
            logging.getLogger(name).setLevel(logging.DEBUG)
        def snapshot():
            out = {}
            for name in names:
                log = logging.getLogger(name)
                out[name] = (log.level, list(log.handlers), log.propagate, log.disabled)
            return out, logging.root.manager.disable
        before = snapshot()
        import hermes_fsm
        for info in pkgutil.walk_packages(hermes_fsm.__path__, "hermes_fsm."):
            try:
                importlib.import_module(info.name)
            except ImportError:  # an optional extra that is not installed
                pass
        from hermes_fsm.testing import demo_orchestrator
        result = asyncio.run(demo_orchestrator().run_turn("s1", "How many A1001 are left?"))
        assert result.status == "completed", result.status
        after = snapshot()
        assert after == before, (before, after)
        import sys
        assert "transitions" not in sys.modules, "transitions is not a dependency any more"
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")

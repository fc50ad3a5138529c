"""The seams between layers are protocols, and an orchestrator is each one.

The assignments are what mypy checks (the tests type-check: a member renamed or retyped
on ``Orchestrator`` fails there); at run time each protocol's members must be there.
"""

from __future__ import annotations

from typing import Any, Protocol

import pytest

from hermes_fsm import Orchestrator
from hermes_fsm.cli.view import Recordable
from hermes_fsm.events.recording import RecordingSource
from hermes_fsm.events.sinks import SinkHost
from hermes_fsm.replay.fakes import ReplayExecutor
from hermes_fsm.server.app import ServedOrchestrator
from hermes_fsm.server.health import ReadinessSource
from hermes_fsm.server.hub import EventLogs, TurnRunner
from hermes_fsm.testing import demo_orchestrator
from hermes_fsm.tools.executor import ToolExecutor, ToolRunner

SEAMS: list[type[Any]] = [RecordingSource, SinkHost, ReadinessSource, EventLogs, TurnRunner,
                          ServedOrchestrator, Recordable]


def _members(protocol: type[Any]) -> set[str]:
    return {name for cls in protocol.__mro__ if cls not in (object, Protocol)
            and getattr(cls, "_is_protocol", False)
            for name in (*vars(cls), *getattr(cls, "__annotations__", {}))
            if not name.startswith("_")}


def test_an_orchestrator_is_each_seam_the_layers_above_take() -> None:
    orchestrator = demo_orchestrator()
    recording: RecordingSource = orchestrator
    sinks: SinkHost = orchestrator
    readiness: ReadinessSource = orchestrator
    logs: EventLogs = orchestrator
    runner: TurnRunner = orchestrator
    served: ServedOrchestrator = orchestrator
    recordable: Recordable = orchestrator
    assert all(seam is orchestrator for seam in (recording, sinks, readiness, logs, runner,
                                                 served, recordable))


@pytest.mark.parametrize("protocol", SEAMS, ids=lambda p: p.__name__)
def test_an_orchestrator_has_every_member_of(protocol: type[Any]) -> None:
    members = _members(protocol)
    assert members  # a protocol that names nothing checks nothing
    assert [m for m in sorted(members) if not hasattr(Orchestrator, m)
            and not hasattr(demo_orchestrator(), m)] == []


def test_both_executors_run_tools_for_the_engine() -> None:
    tools = demo_orchestrator().services.tools
    executors: list[ToolRunner] = [ToolExecutor(tools), ReplayExecutor()]
    assert all(callable(e.execute) for e in executors)

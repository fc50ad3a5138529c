"""Shared fixtures: deterministic orchestrators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hermes_fsm import Orchestrator
from hermes_fsm.graph.model import Graph
from hermes_fsm.sources import FixedClock, SequentialIds
from hermes_fsm.testing import demo_orchestrator
from tests.support import graph_with

# a module that fails on import on purpose (the graph loader must report it)
collect_ignore = ["graph_handlers_broken.py"]


@pytest.fixture
def make_orchestrator() -> Callable[..., Orchestrator]:
    """Build an orchestrator with a fixed clock and sequential ids (byte-stable events)."""

    def make(graph: Graph | None = None, **kwargs: Any) -> Orchestrator:
        kwargs.setdefault("clock", FixedClock())
        kwargs.setdefault("ids", SequentialIds())
        return demo_orchestrator(graph if graph is not None else graph_with(), **kwargs)

    return make


@pytest.fixture(autouse=True)
def _memory_data_dir(tmp_path_factory: pytest.TempPathFactory,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedded memory stores (Qdrant Edge, SQLite) go to a temp dir, never ~/.local; and
    the configuration's embedder is the hashing one (no model to load: tests stay fast;
    the tests of USE name it)."""
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path_factory.mktemp("hermes-data")))
    monkeypatch.setenv("HERMES_EMBEDDER", "hashing")

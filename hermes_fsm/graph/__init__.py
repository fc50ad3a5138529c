"""State graphs: the model (:class:`Graph`, :class:`StateSpec`), the file loader, and the
machine that fires their transitions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_fsm._internal.lazy import lazy_face

if TYPE_CHECKING:  # imported on first use (hermes_fsm._internal.lazy); typed here
    from hermes_fsm.graph.loader import default_graph_path, load_graph, parse_graph
    from hermes_fsm.graph.model import Graph, StateSpec

__all__ = ["Graph", "StateSpec", "default_graph_path", "load_graph", "parse_graph"]

__getattr__, __dir__ = lazy_face(__name__, {
    "Graph": "hermes_fsm.graph.model",
    "StateSpec": "hermes_fsm.graph.model",
    "default_graph_path": "hermes_fsm.graph.loader",
    "load_graph": "hermes_fsm.graph.loader",
    "parse_graph": "hermes_fsm.graph.loader",
})

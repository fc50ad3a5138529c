"""State graphs: the model (:class:`Graph`, :class:`StateSpec`), the file loader, and the
machine that fires their transitions."""

from __future__ import annotations

from hermes_fsm.graph.loader import default_graph_path, load_graph, parse_graph
from hermes_fsm.graph.model import Graph, StateSpec

__all__ = ["Graph", "StateSpec", "default_graph_path", "load_graph", "parse_graph"]

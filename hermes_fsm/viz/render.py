"""A graph in any of the view's text formats (what ``hermes-fsm graph`` and the server's
``GET /graph`` answer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hermes_fsm.graph.model import Graph
    from hermes_fsm.viz.overlay import Overlay

__all__ = ["GRAPH_FORMATS", "render_graph"]

GRAPH_FORMATS = ("mermaid", "dot", "svg", "html")


def render_graph(graph: Graph, fmt: str, overlay: Overlay | None = None) -> str:
    """The graph in one of :data:`GRAPH_FORMATS` (``mermaid`` for anything else is an error);
    with a recording's ``overlay``, the compensation steps that ran are drawn in every
    format but ``html`` (whose page is ``hermes-fsm view``'s).

    Raises:
        ValueError: ``fmt`` is not one of :data:`GRAPH_FORMATS`.
    """
    # the renderers are imported for the format asked for: `hermes-fsm --help` lists
    # GRAPH_FORMATS without importing any of them (tests/test_cli_imports.py)
    from hermes_fsm.viz.diagram import to_dot, to_mermaid
    from hermes_fsm.viz.svg import to_svg
    from hermes_fsm.viz.view import render_graph_html

    if fmt == "svg":
        return to_svg(graph, overlay)
    if fmt == "html":
        return render_graph_html(graph)
    if fmt == "mermaid":
        return to_mermaid(graph, overlay)
    if fmt == "dot":
        return to_dot(graph, overlay)
    raise ValueError(f"unknown graph format {fmt!r}; choose one of {', '.join(GRAPH_FORMATS)}")

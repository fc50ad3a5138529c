"""Diagrams of a graph as text: Mermaid and Graphviz DOT. Pure functions of the graph.

Every diagram shows the declared transitions (``start``/``done``, with their conditions
and limits), the engine's ``retry`` edges (dashed, with the attempt bound) and the
failure routes (``fail``, red), and each state's contract. The ``abort`` edges (any
state → initial, when the turn budget runs out) are summarised in one note rather than
drawn from every state.

Given a recording's :class:`~hermes_fsm.viz.overlay.Overlay`, the compensation steps that
ran (:mod:`hermes_fsm.tools.compensation`: a write's ``status`` query, a ``compensate``
undo) are drawn too, each kind its own purple self-loop on its state, labelled with its
tools and how often it ran — as the SVG and HTML views draw them
(``hermes-fsm graph --recording FILE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hermes_fsm.graph.model import Graph, TransitionSpec

__all__ = ["COMPENSATION_KINDS", "Edge", "compensation_edges", "edges", "to_dot", "to_mermaid"]

COMPENSATION_KINDS = ("status", "compensate")
"""Edge kinds of compensation steps (drawn only from a recording's overlay)."""

_PURPLE = "#6a1b9a"


@dataclass(frozen=True, slots=True)
class Edge:
    """One drawn edge: ``kind`` is ``start``, ``done``, ``retry`` or ``fail``."""

    source: str
    dest: str
    kind: str
    label: str


def _label(t: TransitionSpec) -> str:
    parts = [t.trigger]
    conds = [c.text for c in t.conditions] + [f"not {c.text}" for c in t.unless]
    if conds:
        parts.append(f"[{' and '.join(conds)}]")
    if t.limit is not None:
        parts.append(f"(max {t.limit}/turn)")
    return " ".join(parts)


def edges(graph: Graph) -> list[Edge]:
    """Every edge to draw, in a stable order: declared, then retries, then failure routes."""
    out = [Edge(t.source, t.dest, t.trigger, _label(t)) for t in graph.transitions]
    for s in graph.states.values():
        if s.working and s.retry.max_attempts > 1:
            label = f"retry (max {s.retry.max_attempts} attempts)"
            out.append(Edge(s.name, s.name, "retry", label))
    for name, route in graph.failure_routes():
        out.append(Edge(name, route, "fail", "fail"))
    return out


def compensation_edges(graph: Graph, overlay: Any = None, *, counted: bool = False
                       ) -> list[Edge]:
    """A recording's compensation steps, one self-loop per state and kind (``status``, a
    write's status query; ``compensate``, an undo), labelled with their tools (and, with
    ``counted``, how many times each ran); none without an ``overlay``."""
    if overlay is None:
        return []
    out = []
    for (state, kind), tools in sorted(overlay.steps.items()):
        if state not in graph.states:
            continue
        label = f"{kind}: {', '.join(tools)}"
        if counted:
            label += f" ×{overlay.edge_count(state, state, kind)}"
        out.append(Edge(state, state, kind, label))
    return out


def _state_text(graph: Graph, name: str, newline: str) -> str:
    spec = graph.states[name]
    lines = [name]
    if spec.contract is not None:
        lines.append(spec.contract.ref())
    if spec.timeout_s is not None:
        lines.append(f"timeout {spec.timeout_s:g}s")
    return newline.join(lines)


def _mermaid_ids(graph: Graph) -> dict[str, str]:
    """Ids that are valid Mermaid and distinct however states are named (label shows the name)."""
    ids: dict[str, str] = {}
    used: set[str] = set()
    for name in graph.states:
        base = "s_" + "".join(ch if ch.isalnum() else "_" for ch in name)
        candidate, n = base, 1
        while candidate in used:  # NEEDS-INFO and NEEDS_INFO must stay two nodes
            n += 1
            candidate = f"{base}_{n}"
        used.add(candidate)
        ids[name] = candidate
    return ids


def to_mermaid(graph: Graph, overlay: Any = None) -> str:
    """The graph as a Mermaid flowchart (renders on GitHub, in docs, in the HTML view);
    with a recording's ``overlay``, its compensation steps too (see the module docs)."""
    lines = ["flowchart TD"]
    ids = _mermaid_ids(graph)
    for name in graph.states:
        text = _state_text(graph, name, "<br/>").replace('"', "'")
        shape = f'(["{text}"])' if name == graph.initial else f'["{text}"]'
        lines.append(f"    {ids[name]}{shape}")
    styles = []
    drawn = edges(graph) + compensation_edges(graph, overlay, counted=True)
    for i, e in enumerate(drawn):
        label = e.label.replace('"', "'")
        arrow = ("-.->" if e.kind in ("retry", *COMPENSATION_KINDS)
                 else "==>" if e.kind == "fail" else "-->")
        lines.append(f'    {ids[e.source]} {arrow}|"{label}"| {ids[e.dest]}')
        if e.kind == "fail":
            styles.append(f"    linkStyle {i} stroke:#c62828,color:#c62828")
        elif e.kind == "retry":
            styles.append(f"    linkStyle {i} stroke:#ef6c00,color:#ef6c00")
        elif e.kind in COMPENSATION_KINDS:
            styles.append(f"    linkStyle {i} stroke:{_PURPLE},color:{_PURPLE}")
    lines.extend(styles)
    initial = graph.initial.replace('"', "'")
    # "budget" cannot clash with a state: state ids all start with s_
    lines.append(f'    budget>"turn budget {graph.budget_s:g}s: abort from any state → {initial}"]')
    lines.append("    style budget fill:#fff8e1,stroke:#bbb")
    return "\n".join(lines) + "\n"


def _dot_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def to_dot(graph: Graph, overlay: Any = None) -> str:
    """The graph as Graphviz DOT (``dot -Tsvg`` draws it); with a recording's
    ``overlay``, its compensation steps too (see the module docs)."""
    lines = [
        f"digraph {_dot_quote(graph.name)} {{",
        "    rankdir=TB;",
        '    node [shape=box, style="rounded", fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    for name in graph.states:
        shape = ", shape=doublecircle" if name == graph.initial else ""
        label = _dot_quote(_state_text(graph, name, "\n"))
        lines.append(f"    {_dot_quote(name)} [label={label}{shape}];")
    for e in edges(graph) + compensation_edges(graph, overlay, counted=True):
        attrs = [f"label={_dot_quote(e.label)}"]
        if e.kind == "retry":
            attrs.append('style=dashed, color="#ef6c00", fontcolor="#ef6c00"')
        elif e.kind in COMPENSATION_KINDS:
            attrs.append(f'style=dashed, color="{_PURPLE}", fontcolor="{_PURPLE}"')
        elif e.kind == "fail":
            attrs.append('style=bold, color="#c62828", fontcolor="#c62828"')
        lines.append(f"    {_dot_quote(e.source)} -> {_dot_quote(e.dest)} [{', '.join(attrs)}];")
    note = f"turn budget {graph.budget_s:g}s: abort from any state -> {graph.initial}"
    budget_id = _dot_quote("hermes:budget")  # no clash with a state named "budget"
    lines.append(f"    {budget_id} [shape=note, label={_dot_quote(note)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"

"""Diagrams of a graph as text: Mermaid and Graphviz DOT. Pure functions of the graph.

Every diagram shows the declared transitions (``start``/``done``, with their conditions
and limits), the engine's ``retry`` edges (dashed, with the attempt bound) and the
failure routes (``fail``, red), and each state's contract. The ``abort`` edges (any
state → initial, when the turn budget runs out) are summarised in one note rather than
drawn from every state.
"""

from __future__ import annotations

from dataclasses import dataclass

from hermes_fsm.graph.model import Graph, TransitionSpec

__all__ = ["Edge", "edges", "to_dot", "to_mermaid"]


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


def to_mermaid(graph: Graph) -> str:
    """The graph as a Mermaid flowchart (renders on GitHub, in docs, in the HTML view)."""
    lines = ["flowchart TD"]
    ids = _mermaid_ids(graph)
    for name in graph.states:
        text = _state_text(graph, name, "<br/>").replace('"', "'")
        shape = f'(["{text}"])' if name == graph.initial else f'["{text}"]'
        lines.append(f"    {ids[name]}{shape}")
    styles = []
    for i, e in enumerate(edges(graph)):
        label = e.label.replace('"', "'")
        arrow = "-.->" if e.kind == "retry" else "==>" if e.kind == "fail" else "-->"
        lines.append(f'    {ids[e.source]} {arrow}|"{label}"| {ids[e.dest]}')
        if e.kind == "fail":
            styles.append(f"    linkStyle {i} stroke:#c62828,color:#c62828")
        elif e.kind == "retry":
            styles.append(f"    linkStyle {i} stroke:#ef6c00,color:#ef6c00")
    lines.extend(styles)
    initial = graph.initial.replace('"', "'")
    # "budget" cannot clash with a state: state ids all start with s_
    lines.append(f'    budget>"turn budget {graph.budget_s:g}s: abort from any state → {initial}"]')
    lines.append("    style budget fill:#fff8e1,stroke:#bbb")
    return "\n".join(lines) + "\n"


def _dot_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def to_dot(graph: Graph) -> str:
    """The graph as Graphviz DOT (``dot -Tsvg`` draws it)."""
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
    for e in edges(graph):
        attrs = [f"label={_dot_quote(e.label)}"]
        if e.kind == "retry":
            attrs.append('style=dashed, color="#ef6c00", fontcolor="#ef6c00"')
        elif e.kind == "fail":
            attrs.append('style=bold, color="#c62828", fontcolor="#c62828"')
        lines.append(f"    {_dot_quote(e.source)} -> {_dot_quote(e.dest)} [{', '.join(attrs)}];")
    note = f"turn budget {graph.budget_s:g}s: abort from any state -> {graph.initial}"
    budget_id = _dot_quote("hermes:budget")  # no clash with a state named "budget"
    lines.append(f"    {budget_id} [shape=note, label={_dot_quote(note)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"

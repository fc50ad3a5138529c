"""The graph as a standalone SVG picture, drawn in pure Python (no Graphviz).

A pure function of the graph (and, for the recording view, an :class:`Overlay`):
the same graph always gives the same bytes, so the picture is snapshot-tested like the
Mermaid and DOT text. Boxes show each state's name, contract and timeout; the initial
state is a pill. Edges come from :func:`hermes_fsm.viz.diagram.edges`, so every format draws
the same ones: ``start``/``done`` solid grey, ``retry`` dashed orange self-loops, ``fail``
bold red. The turn budget (the ``abort`` route from any state) is a note under the graph.

With an overlay, edges that ran are thickened and labelled ``×N``, edges that did not run
are faded, each compensation step that ran (a write's ``status`` query, a ``compensate``
undo; :mod:`hermes_fsm.tools.compensation`) is a purple self-loop of its own on the
state it ran in, states are shaded by the time spent in them and list their visits, retries,
violations, timeouts, errors, failure routes and aborts.

>>> from hermes_fsm.graph.loader import default_graph_path, load_graph
>>> svg = to_svg(load_graph(default_graph_path()))
>>> svg.startswith('<?xml version="1.0" encoding="UTF-8"?>'), 'data-state="PLANNING"' in svg
(True, True)
"""

from __future__ import annotations

import html
import math
import re

from hermes_fsm.graph.model import Graph
from hermes_fsm.viz.diagram import Edge, compensation_edges, edges
from hermes_fsm.viz.layout import (
    LABEL_LINE,
    LABEL_SIZE,
    Layout,
    Placed,
    Route,
    layout_graph,
    num,
    text_width,
)
from hermes_fsm.viz.overlay import Overlay

__all__ = ["EDGE_STYLES", "FONT", "edge_label_lines", "escape", "to_svg"]

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
SVG_NS = "http://www.w3.org/2000/svg"

EDGE_STYLES: dict[str, dict[str, str]] = {
    "start": {"stroke": "#455a64", "stroke-width": "1.4"},
    "done": {"stroke": "#455a64", "stroke-width": "1.4"},
    "retry": {"stroke": "#ef6c00", "stroke-width": "1.4", "stroke-dasharray": "6 4"},
    "fail": {"stroke": "#c62828", "stroke-width": "2.4"},
    # compensation steps of a recording (tools/compensation.py), drawn only when they ran
    "status": {"stroke": "#6a1b9a", "stroke-width": "1.4", "stroke-dasharray": "2 3"},
    "compensate": {"stroke": "#6a1b9a", "stroke-width": "1.8", "stroke-dasharray": "8 3"},
    "abort": {"stroke": "#6a1b9a", "stroke-width": "1.6", "stroke-dasharray": "2 3"},
}
"""How each edge kind is stroked (the same colours as the Mermaid and DOT diagrams)."""

_MARKERS = {"done": "#455a64", "retry": "#ef6c00", "fail": "#c62828", "abort": "#6a1b9a"}
_NAME_SIZE, _INFO_SIZE = 13.0, 11.0
_TITLE_H = 34.0
_MARGIN = 16.0
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def escape(text: str) -> str:
    """Text safe inside XML/HTML content and double-quoted attributes."""
    return html.escape(_CONTROL.sub("\ufffd", text), quote=True)


def edge_label_lines(label: str, width: int = 30) -> list[str]:
    """An edge label broken into lines: before each ``[conditions]`` and ``(limit)``, then
    at spaces so no line is much longer than ``width`` characters."""
    parts = re.split(r" (?=[\[(])", label)
    lines: list[str] = []
    for part in parts:
        line = ""
        # a long dotted name (a handler's path) breaks after its dots
        words = [w for word in part.split(" ") for w in (
            re.findall(r"[^.]+\.?|\.", word) if len(word) > width else [word])]
        for word in words:
            glue = "" if line.endswith(".") else " "
            if line and len(line) + len(glue) + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line}{glue}{word}" if line else word
        lines.append(line)
    return lines


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _ms(value: float) -> str:
    return f"{value:.1f} ms" if value < 1000 else f"{value / 1000:.2f} s"


def _state_lines(graph: Graph, name: str, overlay: Overlay | None) -> list[tuple[str, str]]:
    """``(text, role)`` per line of a state's box; role picks the font and colour."""
    spec = graph.states[name]
    lines = [(name, "name")]
    if spec.contract is not None:
        lines.append((spec.contract.ref(), "contract"))
    if spec.timeout_s is not None:
        lines.append((f"timeout {spec.timeout_s:g}s", "info"))
    if overlay is not None:
        visits = overlay.visits.get(name, 0)
        if visits or name in overlay.time_ms:
            lines.append((f"{_plural(visits, 'visit')} · {_ms(overlay.time_ms.get(name, 0.0))}",
                          "stats"))
        problems = [_plural(n, word) for n, word in (
            (overlay.retries.get(name, 0), "retry"),
            (overlay.violations.get(name, 0), "violation"),
            (overlay.timeouts.get(name, 0), "timeout"),
            (overlay.errors.get(name, 0), "error"),
            (overlay.routes.get(name, 0), "failure route"),
            (overlay.aborts.get(name, 0), "abort"),
        ) if n]
        if problems:
            lines.append((" · ".join(problems).replace("1 retrys", "1 retry")
                          .replace("retrys", "retries"), "problems"))
    return lines


_ROLE = {  # font size, weight, colour
    "name": (_NAME_SIZE, "bold", "#263238"),
    "contract": (_INFO_SIZE, "normal", "#37474f"),
    "info": (_INFO_SIZE, "normal", "#607d8b"),
    "stats": (_INFO_SIZE, "bold", "#0d47a1"),
    "problems": (_INFO_SIZE, "bold", "#c62828"),
}


def _box_size(lines: list[tuple[str, str]]) -> tuple[float, float]:
    width = max(text_width(text, _ROLE[role][0], _ROLE[role][1] == "bold")
                for text, role in lines)
    height = 12.0 + sum(_ROLE[role][0] + 4.0 for _, role in lines) + 6.0
    return max(120.0, width + 28.0), height


def _mix(share: float) -> str:
    """White shaded towards blue by ``share`` in [0, 1]."""
    low, high = (255, 255, 255), (144, 202, 249)
    rgb = [round(a + (b - a) * max(0.0, min(1.0, share))) for a, b in zip(low, high, strict=True)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def _attrs(values: dict[str, str]) -> str:
    return " ".join(f'{key}="{escape(value)}"' for key, value in values.items())


def _label(placed: Placed, color: str, css: str) -> str:
    first = placed.y - (len(placed.lines) - 1) * LABEL_LINE / 2 + LABEL_SIZE * 0.35
    spans = "".join(f'<tspan x="{num(placed.x)}" y="{num(first + i * LABEL_LINE)}">{escape(line)}'
                    "</tspan>" for i, line in enumerate(placed.lines))
    return (f'<text class="{css}" text-anchor="{placed.anchor}" font-size="{num(LABEL_SIZE)}" '
            f'fill="{color}" stroke="#ffffff" stroke-width="4" stroke-linejoin="round" '
            f'paint-order="stroke">{spans}</text>')


def _edge(route: Route, overlay: Overlay | None) -> tuple[str, str]:
    e: Edge = route.edge
    style = dict(EDGE_STYLES[e.kind])
    marker = {"start": "done", "status": "done", "compensate": "fail"}.get(e.kind, e.kind)
    count = overlay.edge_count(e.source, e.dest, e.kind) if overlay is not None else None
    group = {"class": f"edge edge-{e.kind}", "data-source": e.source, "data-dest": e.dest,
             "data-kind": e.kind}
    tip = f"{e.source} → {e.dest}: {e.label}"
    if count is not None:
        group["data-count"] = str(count)
        tip += f" — ran {_plural(count, 'time')}"
        if count:
            width = float(style["stroke-width"]) + min(4.5, 1.4 * math.log2(1 + count))
            style["stroke-width"] = num(width)
            group["class"] += " ran"
        else:
            group["opacity"] = "0.35"
            group["class"] += " idle"
    path = (f'<g {_attrs(group)}><title>{escape(tip)}</title><path d="{route.path}" fill="none" '
            f'{_attrs(style)} marker-end="url(#hermes-arrow-{marker})"/></g>')
    label = ""
    if route.label is not None:
        css = "edge-label" + (" idle" if count == 0 else "")
        text = _label(route.label, style["stroke"], css)
        label = f'<g opacity="0.45">{text}</g>' if count == 0 else text
    return path, label


def _state(graph: Graph, layout: Layout, name: str, overlay: Overlay | None,
           lines: list[tuple[str, str]]) -> str:
    box = layout.boxes[name]
    spec = graph.states[name]
    initial = name == graph.initial
    fill, stroke, width = ("#eceff1" if initial else "#ffffff"), "#546e7a", "1.4"
    group = {"class": "state" + (" initial" if initial else ""), "data-state": name}
    if overlay is not None:
        most = max(overlay.time_ms.values(), default=0.0) or 1.0
        visited = overlay.visits.get(name, 0) > 0 or name in overlay.time_ms
        if visited:
            fill = _mix(overlay.time_ms.get(name, 0.0) / most)
        else:
            group["opacity"] = "0.55"
            group["class"] += " unvisited"
        if overlay.violations.get(name, 0) or overlay.routes.get(name, 0):
            stroke, width = "#c62828", "2.4"
    if initial:
        width = "2.2"
    tip = [name] + ([spec.description] if spec.description else [])
    if spec.contract is not None:
        tip.append(f"contract {spec.contract.ref()}")
    if spec.handler_path:
        tip.append(f"handler {spec.handler_path}")
    if spec.retry.max_attempts > 1:
        tip.append(f"up to {spec.retry.max_attempts} attempts")
    if spec.on_failure:
        tip.append(f"on failure → {spec.on_failure}")
    radius = min(box.h / 2, 22.0) if initial else 8.0
    parts = [f'<g {_attrs(group)}><title>{escape(chr(10).join(tip))}</title>',
             f'<rect x="{num(box.x)}" y="{num(box.y)}" width="{num(box.w)}" height="{num(box.h)}" '
             f'rx="{num(radius)}" fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>']
    y = box.y + 12.0
    for text, role in lines:
        size, weight, color = _ROLE[role]
        y += size + 4.0
        parts.append(f'<text x="{num(box.cx)}" y="{num(y - 3.0)}" text-anchor="middle" '
                     f'font-size="{num(size)}" font-weight="{weight}" fill="{color}" '
                     f'class="state-{role}">{escape(text)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _note(graph: Graph, overlay: Overlay | None, x: float, y: float) -> tuple[str, float]:
    """The budget note and the legend, from ``(x, y)``; returns the SVG and its bottom."""
    note = f"turn budget {graph.budget_s:g}s: abort from any state → {graph.initial}"
    if overlay is not None and overlay.aborts:
        aborted = ", ".join(f"{name} ×{n}" for name, n in sorted(overlay.aborts.items()))
        note += f" (aborted: {aborted})"
    width = text_width(note, _INFO_SIZE) + 24.0
    out = [f'<g class="note"><path d="M{num(x)},{num(y)} h{num(width - 10)} l10,10 v16 '
           f'h{num(-width)} z" fill="#fff8e1" stroke="#bdbdbd"/>'
           f'<text x="{num(x + 10)}" y="{num(y + 17)}" font-size="{num(_INFO_SIZE)}" '
           f'fill="#5d4037">{escape(note)}</text></g>']
    lx = x + width + 24.0
    out.append('<g class="legend">')
    for kind, text in (("done", "transition"), ("retry", "retry"), ("fail", "failure route")):
        style = _attrs(EDGE_STYLES[kind])
        out.append(f'<path d="M{num(lx)},{num(y + 13)} h28" fill="none" {style} '
                   f'marker-end="url(#hermes-arrow-{kind})"/>'
                   f'<text x="{num(lx + 34)}" y="{num(y + 17)}" font-size="{num(_INFO_SIZE)}" '
                   f'fill="#455a64">{text}</text>')
        lx += 34.0 + text_width(text, _INFO_SIZE) + 22.0
    out.append("</g>")
    return "".join(out), y + 26.0


def _abort_edges(graph: Graph, overlay: Overlay | None) -> list[Edge]:
    """The ``abort`` edges that ran (the turn budget ran out in that state), drawn as edges
    of their own; the ones that did not run stay summarised in the note."""
    if overlay is None:
        return []
    return [Edge(source, dest, "abort", f"abort (turn budget {graph.budget_s:g}s)")
            for (source, dest, kind) in sorted(overlay.edges)
            if kind == "abort" and source in graph.states and dest in graph.states]


def _markers() -> str:
    parts = ["<defs>"]
    for kind, color in _MARKERS.items():
        parts.append(f'<marker id="hermes-arrow-{kind}" viewBox="0 0 10 8" refX="10" refY="4" '
                     'markerWidth="10" markerHeight="8" markerUnits="userSpaceOnUse" '
                     f'orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="{color}"/></marker>')
    parts.append("</defs>")
    return "".join(parts)


def _compensation_edges(graph: Graph, overlay: Overlay | None) -> list[Edge]:
    """A recording's compensation steps, one self-loop per state and kind: ``status`` (a
    write's status query) and ``compensate`` (an undo), labelled with their tools."""
    return compensation_edges(graph, overlay)


def to_svg(graph: Graph, overlay: Overlay | None = None, *, standalone: bool = True) -> str:
    """The graph as SVG text.

    Args:
        graph: the graph to draw.
        overlay: counts and times from a recording to lay over it (see
            :func:`hermes_fsm.viz.overlay.overlay_from_events`).
        standalone: a complete SVG file (XML declaration, namespace); ``False`` for an
            ``<svg>`` element to inline in an HTML page.
    """
    drawn = edges(graph) + _compensation_edges(graph, overlay) + _abort_edges(graph, overlay)
    lines = {name: _state_lines(graph, name, overlay) for name in graph.states}
    labels: list[list[str]] = []
    for e in drawn:
        lines_of_label = edge_label_lines(e.label)
        if overlay is not None and overlay.edge_count(e.source, e.dest, e.kind):
            lines_of_label.append(f"×{overlay.edge_count(e.source, e.dest, e.kind)}")
        labels.append(lines_of_label)
    sizes = {name: _box_size(lines[name]) for name in graph.states}
    layout = layout_graph(graph, drawn, sizes, labels, top=_TITLE_H)
    paths: list[str] = []
    texts: list[str] = []
    for route in layout.routes:
        path, label = _edge(route, overlay)
        paths.append(path)
        texts.append(label)
    states = [_state(graph, layout, name, overlay, lines[name]) for name in graph.states]
    left = min(layout.min_x, layout.boxes[graph.initial].x) - _MARGIN
    note, bottom = _note(graph, overlay, left + _MARGIN, layout.bottom + 14.0)
    right = max(layout.max_x + _MARGIN, left + _MARGIN + 520.0)
    width, height = right - left, bottom + _MARGIN
    title = f"{graph.name} {graph.version}"
    head = ['<?xml version="1.0" encoding="UTF-8"?>\n'] if standalone else []
    ns = f' xmlns="{SVG_NS}"' if standalone else ""
    head.append(f'<svg{ns} class="hermes-graph" viewBox="{num(left)} 0 {num(width)} {num(height)}" '
                f'width="{num(width)}" height="{num(height)}" font-family="{escape(FONT)}">')
    body = [
        f"<title>{escape(title)}</title>",
        _markers(),
        f'<rect class="background" x="{num(left)}" y="0" width="{num(width)}" '
        f'height="{num(height)}" fill="#ffffff"/>',
        f'<text class="graph-title" x="{num(left + _MARGIN)}" y="22" font-size="14" '
        f'font-weight="bold" fill="#263238">{escape(title)}</text>',
        '<g class="edges">', *paths, "</g>",
        '<g class="states">', *states, "</g>",
        '<g class="edge-labels">', *[t for t in texts if t], "</g>",
        note,
        "</svg>",
    ]
    return "".join(head) + "\n" + "\n".join(body) + "\n"

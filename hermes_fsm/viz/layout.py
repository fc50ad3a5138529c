"""A layered layout of a state graph: where each box goes and how each edge is routed.

Pure geometry, no drawing (see :mod:`hermes_fsm.viz.svg`). The initial state is on top;
every other state sits in the rank of its shortest distance from the initial state along
the declared transitions (states reached only by failure routes come after the state
they fail from). Within a rank, states are ordered by the mean position of their
predecessors in the rank above, ties in file order, so the same graph always gets the
same picture.

Edges are routed by how their ends sit:

- ``loop``: a state to itself (retries), an arc on the outer side of the box;
- ``down``: to the next rank, a curve from the bottom of one box to the top of the other;
- ``side``: to a neighbour in the same rank, a straight line between the two boxes;
- ``lane``: anything else (back edges, long jumps), out of the bottom of the source, along
  a track between ranks to a vertical lane outside all boxes, along it, and along a
  track into the top of the destination. Each lane edge has its own lane and tracks, so
  no two overlap, and lanes are spaced by their labels, so no label crosses a lane.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from hermes_fsm.graph.model import Graph
from hermes_fsm.viz.diagram import Edge

__all__ = ["Box", "Layout", "Placed", "Route", "layout_graph", "num", "rank_states", "text_width"]

LABEL_SIZE = 11.0
LABEL_LINE = 13.0
_BOX_GAP = 72.0
_TRACK = 9.0
_LANE_GAP = 14.0


def text_width(text: str, size: float, bold: bool = False) -> float:
    """An estimate of the width of ``text`` in a sans-serif font of ``size`` px."""
    units = 0.0
    for ch in text:
        if ord(ch) >= 0x2E80:
            units += 1.0
        elif ch in "il.,:;|!'[]()ftrj ":
            units += 0.34
        elif ch.isupper() or ch in "mwMW@%_":
            units += 0.72
        else:
            units += 0.56
    return units * size * (1.08 if bold else 1.0)


@dataclass
class Box:
    """A state's box: top-left corner, size, rank, and the side its self-loops go."""

    name: str
    rank: int
    x: float
    y: float
    w: float
    h: float
    loop_side: str = "right"

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


@dataclass(frozen=True)
class Placed:
    """A label placed at ``(x, y)`` (its anchor point; ``y`` is the middle of the block)."""

    lines: tuple[str, ...]
    x: float
    y: float
    anchor: str  # "start", "middle" or "end"
    w: float
    h: float

    def rect(self) -> tuple[float, float, float, float]:
        left = self.x - (self.w / 2 if self.anchor == "middle" else
                         self.w if self.anchor == "end" else 0.0)
        return left, self.y - self.h / 2, left + self.w, self.y + self.h / 2


@dataclass
class Route:
    """How one edge is drawn: its ``route`` kind, its path data, and its label."""

    edge: Edge
    index: int
    route: str
    path: str = ""
    label: Placed | None = None


@dataclass
class Layout:
    """Boxes by state, routes in edge order, and the extent of the drawing."""

    boxes: dict[str, Box]
    routes: list[Route]
    min_x: float = 0.0
    max_x: float = 0.0
    bottom: float = 0.0
    ports: dict[tuple[str, int], float] = field(default_factory=dict)


def rank_states(graph: Graph) -> dict[str, int]:
    """Each state's rank: its shortest distance from the initial state along declared
    transitions (then failure routes, for states only they reach)."""
    out: dict[str, list[str]] = {name: [] for name in graph.states}
    for t in graph.transitions:
        out[t.source].append(t.dest)
    rank = {graph.initial: 0}

    def spread(frontier: list[str]) -> None:
        while frontier:
            nxt: list[str] = []
            for name in frontier:
                for dest in out[name]:
                    if dest not in rank:
                        rank[dest] = rank[name] + 1
                        nxt.append(dest)
            frontier = nxt

    spread([graph.initial])
    while len(rank) < len(graph.states):
        fresh = [(route, rank[name] + 1) for name, route in graph.failure_routes()
                 if name in rank and route not in rank]
        if not fresh:
            deepest = max(rank.values()) + 1
            rank.update({n: deepest for n in graph.states if n not in rank})
            break
        route, level = min(fresh, key=lambda item: item[1])
        rank[route] = level
        spread([route])
    return rank


def _rows(graph: Graph, rank: Mapping[str, int]) -> list[list[str]]:
    order = {name: i for i, name in enumerate(graph.states)}
    rows: list[list[str]] = [[] for _ in range(max(rank.values()) + 1)]
    for name in graph.states:
        rows[rank[name]].append(name)
    for r in range(1, len(rows)):
        above = {name: i for i, name in enumerate(rows[r - 1])}
        keys: dict[str, tuple[float, int]] = {}
        for name in rows[r]:
            preds = [above[t.source] for t in graph.transitions
                     if t.dest == name and t.source in above]
            keys[name] = (sum(preds) / len(preds) if preds else math.inf, order[name])
        rows[r].sort(key=keys.__getitem__)
    return rows


def _label_size(lines: Sequence[str]) -> tuple[float, float]:
    width = max((text_width(line, LABEL_SIZE) for line in lines), default=0.0)
    return width + 6.0, LABEL_LINE * len(lines) + 2.0


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _rounded(points: Sequence[tuple[float, float]], radius: float = 6.0) -> str:
    """An orthogonal polyline as path data, its corners rounded."""
    parts = [f"M{num(points[0][0])},{num(points[0][1])}"]
    for i in range(1, len(points) - 1):
        (px, py), (cx, cy), (nx, ny) = points[i - 1], points[i], points[i + 1]
        before, after = math.hypot(cx - px, cy - py), math.hypot(nx - cx, ny - cy)
        r = min(radius, before / 2, after / 2)
        if r <= 0:
            continue
        ax, ay = cx - (cx - px) / before * r, cy - (cy - py) / before * r
        bx, by = cx + (nx - cx) / after * r, cy + (ny - cy) / after * r
        parts.append(f"L{num(ax)},{num(ay)} Q{num(cx)},{num(cy)} {num(bx)},{num(by)}")
    parts.append(f"L{num(points[-1][0])},{num(points[-1][1])}")
    return " ".join(parts)


def num(value: float) -> str:
    """A coordinate as short, stable text: one decimal at most, no trailing zeros."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def layout_graph(
    graph: Graph,
    edges: Sequence[Edge],
    sizes: Mapping[str, tuple[float, float]],
    labels: Sequence[Sequence[str]],
    top: float = 0.0,
) -> Layout:
    """Place the boxes (of ``sizes[state] = (w, h)``) and route ``edges`` (labelled with
    ``labels[i]``, one string per line), the first rank starting below ``top``."""
    rank = rank_states(graph)
    rows = _rows(graph, rank)
    col = {name: i for row in rows for i, name in enumerate(row)}
    routes: list[Route] = []
    for i, e in enumerate(edges):
        if e.source == e.dest:
            kind = "loop"
        elif rank[e.dest] == rank[e.source] + 1:
            kind = "down"
        elif rank[e.dest] == rank[e.source] and abs(col[e.dest] - col[e.source]) == 1:
            kind = "side"
        else:
            kind = "lane"
        routes.append(Route(e, i, kind))
    label_size = [_label_size(lines) for lines in labels]
    boxes = _place_rows(rows, rank, sizes, routes, label_size, top)
    layout = Layout(boxes, routes)
    placed: list[Placed] = []
    _route_loops(layout, labels, label_size, placed)
    _route_lanes(layout, rows, labels, label_size, placed)
    _route_sides(layout, labels, label_size, placed)
    _route_downs(layout, labels, label_size, placed)
    _separate_labels(layout)
    return layout


def _separate_labels(layout: Layout, step: float = 6.0, reach: int = 12) -> None:
    """Move each label that overlaps an earlier one (or a box) to the nearest free spot
    around it (up or down along its edge first, then sideways), so no two condition labels
    are drawn over each other; one with no free spot near stays where it was."""
    boxes = [(b.x, b.y, b.x + b.w, b.y + b.h) for b in layout.boxes.values()]
    kept: list[tuple[float, float, float, float]] = []
    for route in layout.routes:
        label = route.label
        if label is None:
            continue
        shifts = sorted(((dx, k * step) for k in range(-reach, reach + 1)
                         for dx in (0.0, label.w / 2 + 4.0, -label.w / 2 - 4.0)),
                        key=lambda d: (abs(d[0]) > 0, abs(d[1]), d[1] < 0, d[0] < 0))
        for dx, dy in shifts:
            moved = replace(label, x=label.x + dx, y=label.y + dy)
            rect = moved.rect()
            if not any(_overlaps(rect, other) for other in (*kept, *boxes)):
                route.label = label = moved
                break
        kept.append(label.rect())


def _place_rows(
    rows: list[list[str]], rank: Mapping[str, int], sizes: Mapping[str, tuple[float, float]],
    routes: list[Route], label_size: list[tuple[float, float]], top: float,
) -> dict[str, Box]:
    loops: dict[str, list[int]] = {}
    for r in routes:
        if r.route == "loop":
            loops.setdefault(r.edge.source, []).append(r.index)
    lanes_out = [0] * len(rows)
    lanes_in = [0] * len(rows)
    for r in routes:
        if r.route == "lane":
            lanes_out[rank[r.edge.source]] += 1
            lanes_in[rank[r.edge.dest]] += 1
    down_lines = [0] * len(rows)
    for r in routes:
        if r.route == "down":
            lines = round((label_size[r.index][1] - 2.0) / LABEL_LINE)
            down_lines[rank[r.edge.dest]] = max(down_lines[rank[r.edge.dest]], lines)
    boxes: dict[str, Box] = {}
    y = top + 16.0 + _TRACK * lanes_in[0]
    for level, row in enumerate(rows):
        if level > 0:
            middle = max(40.0, LABEL_LINE * down_lines[level] + 26.0)
            y += 14.0 + _TRACK * lanes_out[level - 1] + middle + _TRACK * lanes_in[level] + 8.0
        gaps = []
        for i in range(len(row) - 1):
            between = [label_size[x.index][0] for x in routes if x.route == "side"
                       and {x.edge.source, x.edge.dest} == {row[i], row[i + 1]}]
            gap = max(_BOX_GAP, max(between, default=0.0) + 30.0)
            if i > 0 or len(row) == 1:  # row[i] is not first, so its loops go right
                gap += _loop_extent(loops.get(row[i], []), label_size)
            gaps.append(gap)
        width = sum(sizes[n][0] for n in row) + sum(gaps)
        x = -width / 2
        for i, name in enumerate(row):
            w, h = sizes[name]
            side = "left" if i == 0 and len(row) > 1 else "right"
            boxes[name] = Box(name, level, x, y, w, h, side)
            x += w + (gaps[i] if i < len(gaps) else 0.0)
        y += max(sizes[n][1] for n in row)
    return boxes


def _loop_extent(indexes: list[int], label_size: list[tuple[float, float]]) -> float:
    if not indexes:
        return 0.0
    return 30.0 + 12.0 * (len(indexes) - 1) + max(label_size[i][0] for i in indexes) + 8.0


def _route_loops(layout: Layout, labels: Sequence[Sequence[str]],
                 label_size: list[tuple[float, float]], placed: list[Placed]) -> None:
    by_box: dict[str, list[Route]] = {}
    for r in layout.routes:
        if r.route == "loop":
            by_box.setdefault(r.edge.source, []).append(r)
    for name, routes in by_box.items():
        box = layout.boxes[name]
        sign = 1.0 if box.loop_side == "right" else -1.0
        side_x = box.x + box.w if sign > 0 else box.x
        heights = [label_size[r.index][1] for r in routes]
        label_y = box.cy - (sum(heights) - heights[0]) / 2
        for j, r in enumerate(routes):
            ext, dy = sign * (28.0 + 12.0 * j), 8.0 + 3.0 * j
            far = num(side_x + ext)
            r.path = (f"M{num(side_x)},{num(box.cy - dy)} C{far},{num(box.cy - dy - 16)}"
                      f" {far},{num(box.cy + dy + 16)} {num(side_x)},{num(box.cy + dy)}")
            w, h = label_size[r.index]
            r.label = Placed(tuple(labels[r.index]), side_x + ext * 1.0 + sign * 6.0, label_y,
                             "start" if sign > 0 else "end", w, h)
            label_y += h
            placed.append(r.label)


def _extents(layout: Layout) -> tuple[float, float]:
    left = min(b.x for b in layout.boxes.values())
    right = max(b.x + b.w for b in layout.boxes.values())
    for r in layout.routes:
        if r.label is not None:
            x0, _, x1, _ = r.label.rect()
            left, right = min(left, x0), max(right, x1)
    return left, right


def _route_lanes(layout: Layout, rows: list[list[str]], labels: Sequence[Sequence[str]],
                 label_size: list[tuple[float, float]], placed: list[Placed]) -> None:
    boxes = layout.boxes
    left, right = _extents(layout)
    lanes = [r for r in layout.routes if r.route == "lane"]
    lanes.sort(key=lambda r: (abs(boxes[r.edge.source].rank - boxes[r.edge.dest].rank), r.index))
    lane_x: dict[int, float] = {}
    edge_x = {"left": left - 22.0, "right": right + 22.0}
    side_of: dict[int, str] = {}
    for r in lanes:
        # the side nearer the destination (then the source): the shorter way round
        lean = 2 * boxes[r.edge.dest].cx + boxes[r.edge.source].cx - 1.5 * (left + right)
        side = "right" if lean >= -0.5 else "left"
        side_of[r.index] = side
        sign = 1.0 if side == "right" else -1.0
        lane_x[r.index] = edge_x[side]
        edge_x[side] += sign * (label_size[r.index][0] + _LANE_GAP)
    order = {r.index: k for k, r in enumerate(lanes)}
    # tracks: the inner lanes keep nearest their rows, so outer lanes cross nothing
    exits: dict[str, list[Route]] = {}
    entries: dict[str, list[Route]] = {}
    for r in lanes:
        exits.setdefault(r.edge.source, []).append(r)
        entries.setdefault(r.edge.dest, []).append(r)
    row_bottom = [max(boxes[n].y + boxes[n].h for n in row) for row in rows]
    row_top = [min(boxes[n].y for n in row) for row in rows]
    exit_k = _tracks(lanes, lambda r: boxes[r.edge.source].rank)
    entry_k = _tracks(lanes, lambda r: boxes[r.edge.dest].rank)
    ports = layout.ports = _ports(layout, side_of, order)
    for r in lanes:
        src, dst = boxes[r.edge.source], boxes[r.edge.dest]
        x = lane_x[r.index]
        y1 = row_bottom[src.rank] + 14.0 + _TRACK * exit_k[r.index]
        y2 = row_top[dst.rank] - 14.0 - _TRACK * entry_k[r.index]
        sx, dx = ports[("out", r.index)], ports[("in", r.index)]
        r.path = _rounded([(sx, src.y + src.h), (sx, y1), (x, y1), (x, y2), (dx, y2),
                           (dx, dst.y)])
        w, h = label_size[r.index]
        sign = 1.0 if side_of[r.index] == "right" else -1.0
        r.label = Placed(tuple(labels[r.index]), x + sign * 5.0, (y1 + y2) / 2,
                         "start" if sign > 0 else "end", w, h)
        placed.append(r.label)
    layout.min_x = min(left, edge_x["left"]) - 12.0
    layout.max_x = max(right, edge_x["right"]) + 12.0
    layout.bottom = max(row_bottom) + 14.0 + _TRACK * max(
        (exit_k[r.index] + 1 for r in lanes if boxes[r.edge.source].rank == len(rows) - 1),
        default=0)


def _tracks(lanes: list[Route], row_of: Callable[[Route], int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    out: dict[int, int] = {}
    for r in lanes:  # already inner lanes first
        row = row_of(r)
        out[r.index] = counts.get(row, 0)
        counts[row] = out[r.index] + 1
    return out


def _ports(layout: Layout, side_of: Mapping[int, str],
           order: Mapping[int, int]) -> dict[tuple[str, int], float]:
    """x of each edge's end on the bottom (``out``) or top (``in``) of its box."""
    sides: dict[tuple[str, str], list[tuple[tuple[float, float, int], str, int]]] = {}
    for r in layout.routes:
        if r.route not in ("down", "lane"):
            continue
        for end, name, other in (("out", r.edge.source, r.edge.dest),
                                 ("in", r.edge.dest, r.edge.source)):
            if r.route == "down":
                key = (1.0, layout.boxes[other].cx, r.index)
            elif side_of[r.index] == "right":
                key = (2.0, -float(order[r.index]), r.index)
            else:
                key = (0.0, float(order[r.index]), r.index)
            sides.setdefault((end, name), []).append((key, end, r.index))
    ports: dict[tuple[str, int], float] = {}
    for (_, name), items in sides.items():
        box = layout.boxes[name]
        items.sort()
        for k, (_, end, index) in enumerate(items):
            ports[(end, index)] = box.x + box.w * (k + 1) / (len(items) + 1)
    return ports


def _free_spot(candidates: Sequence[Placed], placed: list[Placed]) -> Placed:
    for spot in candidates:
        if not any(_overlaps(spot.rect(), other.rect()) for other in placed):
            return spot
    return candidates[0]


def _route_sides(layout: Layout, labels: Sequence[Sequence[str]],
                 label_size: list[tuple[float, float]], placed: list[Placed]) -> None:
    pairs: dict[frozenset[str], list[Route]] = {}
    for r in layout.routes:
        if r.route == "side":
            pairs.setdefault(frozenset((r.edge.source, r.edge.dest)), []).append(r)
    for routes in pairs.values():
        for j, r in enumerate(routes):
            src, dst = layout.boxes[r.edge.source], layout.boxes[r.edge.dest]
            y = (max(src.y, dst.y) + min(src.y + src.h, dst.y + dst.h)) / 2
            y += (j - (len(routes) - 1) / 2) * 16.0
            x1, x2 = (src.x + src.w, dst.x) if src.x < dst.x else (src.x, dst.x + dst.w)
            r.path = f"M{num(x1)},{num(y)} L{num(x2)},{num(y)}"
            w, h = label_size[r.index]
            spots = [Placed(tuple(labels[r.index]), (x1 + x2) / 2, y + dy, "middle", w, h)
                     for dy in (-h / 2 - 2, h / 2 + 2)]
            r.label = _free_spot(spots, placed)
            placed.append(r.label)


def _route_downs(layout: Layout, labels: Sequence[Sequence[str]],
                 label_size: list[tuple[float, float]], placed: list[Placed]) -> None:
    downs = [r for r in layout.routes if r.route == "down"]
    ports = layout.ports
    for r in downs:
        src, dst = layout.boxes[r.edge.source], layout.boxes[r.edge.dest]
        x1, y1 = ports[("out", r.index)], src.y + src.h
        x2, y2 = ports[("in", r.index)], dst.y
        bend = (y2 - y1) / 2
        r.path = (f"M{num(x1)},{num(y1)} C{num(x1)},{num(y1 + bend)} {num(x2)},{num(y2 - bend)}"
                  f" {num(x2)},{num(y2)}")
        w, h = label_size[r.index]
        spots = []
        for t in (0.5, 0.38, 0.62, 0.28, 0.72):
            u = 1 - t  # point on the cubic curve at t
            x = u**3 * x1 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t**3 * x2
            y = u**3 * y1 + 3 * u * u * t * (y1 + bend) + 3 * u * t * t * (y2 - bend) + t**3 * y2
            spots.append(Placed(tuple(labels[r.index]), x, y, "middle", w, h))
        r.label = _free_spot(spots, placed)
        placed.append(r.label)

"""The SVG drawing: snapshot of the bundled graph, and what every drawing must show.

Regenerate the snapshot after an intended change with::

    HERMES_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_svg.py

and review the diff (open ``tests/snapshots/agent_turn.svg`` in a browser).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hermes_fsm.graph.loader import default_graph_path, load_graph, parse_graph
from hermes_fsm.graph.model import Graph
from hermes_fsm.viz.diagram import edges
from hermes_fsm.viz.layout import rank_states
from hermes_fsm.viz.overlay import Overlay
from hermes_fsm.viz.svg import to_svg

SNAPSHOTS = Path(__file__).parent / "snapshots"
SUPPORT_GRAPH = Path(__file__).parent / "graphs" / "good" / "support_turn.yaml"
NS = {"svg": "http://www.w3.org/2000/svg"}
RED, ORANGE = "#c62828", "#ef6c00"


@pytest.fixture(scope="module")
def bundled() -> Graph:
    return load_graph(default_graph_path())


@pytest.fixture(scope="module")
def tree(bundled: Graph) -> ET.Element:
    return ET.fromstring(to_svg(bundled).encode("utf-8"))


def _edge_groups(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iterfind(".//svg:g", NS) if "edge" in g.get("class", "").split()]


def _edge_path(group: ET.Element) -> ET.Element:
    path = group.find("svg:path", NS)
    assert path is not None
    return path


def test_svg_of_the_bundled_graph_matches_its_snapshot(bundled: Graph) -> None:
    path = SNAPSHOTS / "agent_turn.svg"
    actual = to_svg(bundled)
    if os.environ.get("HERMES_UPDATE_SNAPSHOTS") == "1":
        path.write_text(actual, encoding="utf-8", newline="\n")
        return
    how = (f"{path} does not match the SVG of the bundled graph; if the change is intended, "
           "regenerate it with `HERMES_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_svg.py`")
    assert path.exists(), how
    assert actual == path.read_text(encoding="utf-8"), how


def test_svg_is_a_pure_function_of_the_graph(bundled: Graph) -> None:
    assert to_svg(load_graph(default_graph_path())) == to_svg(bundled)


@pytest.mark.parametrize("path", [default_graph_path(), SUPPORT_GRAPH], ids=["bundled", "user"])
def test_svg_is_well_formed_xml_in_the_svg_namespace(path: Path) -> None:
    root = ET.fromstring(to_svg(load_graph(path)).encode("utf-8"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"


def test_every_state_is_drawn_with_its_contract_and_timeout(
    bundled: Graph, tree: ET.Element
) -> None:
    drawn = {g.get("data-state"): g for g in tree.iterfind(".//svg:g[@data-state]", NS)}
    assert set(drawn) == set(bundled.states)
    for name, spec in bundled.states.items():
        texts = [t.text for t in drawn[name].iterfind("svg:text", NS)]
        assert texts[0] == name
        if spec.contract is not None:
            assert spec.contract.ref() in texts
        if spec.timeout_s is not None:
            assert f"timeout {spec.timeout_s:g}s" in texts


def test_every_edge_of_the_diagram_is_drawn_once(bundled: Graph, tree: ET.Element) -> None:
    drawn = sorted((g.get("data-source"), g.get("data-dest"), g.get("data-kind"))
                   for g in _edge_groups(tree))
    assert drawn == sorted((e.source, e.dest, e.kind) for e in edges(bundled))


def test_retry_edges_are_dashed_orange_self_loops(bundled: Graph, tree: ET.Element) -> None:
    retries = [g for g in _edge_groups(tree) if g.get("data-kind") == "retry"]
    assert sorted(g.get("data-source", "") for g in retries) == sorted(bundled.retrying_states())
    for group in retries:
        path = _edge_path(group)
        assert group.get("data-source") == group.get("data-dest")
        assert path.get("stroke-dasharray")
        assert path.get("stroke") == ORANGE


def test_failure_edges_are_bold_red_and_nothing_else_is_red(tree: ET.Element) -> None:
    for group in _edge_groups(tree):
        path = _edge_path(group)
        is_fail = group.get("data-kind") == "fail"
        assert (path.get("stroke") == RED) == is_fail
        if is_fail:
            assert float(path.get("stroke-width", "0")) >= 2
            assert not path.get("stroke-dasharray")


def test_only_retry_edges_are_dashed(tree: ET.Element) -> None:
    for group in _edge_groups(tree):
        dashed = bool(_edge_path(group).get("stroke-dasharray"))
        assert dashed == (group.get("data-kind") == "retry")


def test_every_edge_has_an_arrowhead_and_its_label(bundled: Graph, tree: ET.Element) -> None:
    labels = " ".join(" ".join(t.itertext()) for t in tree.iterfind(".//svg:text", NS))
    for group in _edge_groups(tree):
        assert _edge_path(group).get("marker-end", "").startswith("url(#hermes-arrow-")
    assert "[output.needs_more_tools]" in labels
    assert "(max 4/turn)" in labels


def test_the_budget_and_abort_route_are_noted(tree: ET.Element) -> None:
    note = tree.find(".//svg:g[@class='note']", NS)
    assert note is not None
    assert "turn budget 30s: abort from any state → IDLE" in "".join(note.itertext())


def test_the_initial_state_is_on_top_and_ranks_follow_distance(
    bundled: Graph, tree: ET.Element
) -> None:
    ranks = rank_states(bundled)
    assert ranks == {"IDLE": 0, "INTENT": 1, "PLANNING": 2, "RESPONSE": 2, "APPROVED": 2,
                     "EXECUTION": 3, "MEMORY_COMMIT": 3, "CLARIFY": 3, "APPROVAL": 3,
                     "RESULT": 4}
    top = {g.get("data-state"): float(g.find("svg:rect", NS).get("y", ""))  # type: ignore[union-attr]
           for g in tree.iterfind(".//svg:g[@data-state]", NS)}
    for a, b in [("IDLE", "INTENT"), ("INTENT", "PLANNING"), ("PLANNING", "EXECUTION"),
                 ("EXECUTION", "RESULT")]:
        assert top[a] < top[b]
    assert top["PLANNING"] == top["RESPONSE"]


def test_no_two_state_boxes_overlap(tree: ET.Element) -> None:
    rects = []
    for g in tree.iterfind(".//svg:g[@data-state]", NS):
        r = g.find("svg:rect", NS)
        assert r is not None
        x, y = float(r.get("x", 0)), float(r.get("y", 0))
        rects.append((x, y, x + float(r.get("width", 0)), y + float(r.get("height", 0))))
    for i, a in enumerate(rects):
        for b in rects[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])


def test_state_names_are_escaped() -> None:
    text = """\
name: 'a <b> & "c"'
initial: IDLE
states:
  IDLE: {}
  '<ASK> & "WHY"':
    contract: response@1
    retry: {max_attempts: 2}
    on_failure: IDLE
transitions:
  - {trigger: start, source: IDLE, dest: '<ASK> & "WHY"'}
  - {source: '<ASK> & "WHY"', dest: IDLE}
"""
    svg = to_svg(parse_graph(text, "escaping.yaml"))
    root = ET.fromstring(svg.encode("utf-8"))
    assert root.find(".//svg:g[@data-state='<ASK> & \"WHY\"']", NS) is not None
    assert "<ASK>" not in svg


def test_an_overlay_thickens_edges_that_ran_and_fades_the_others(bundled: Graph) -> None:
    overlay = Overlay(edges={("IDLE", "INTENT", "start"): 3, ("INTENT", "INTENT", "retry"): 1},
                      visits={"INTENT": 4}, time_ms={"INTENT": 12.5})
    root = ET.fromstring(to_svg(bundled, overlay).encode("utf-8"))
    groups = {(g.get("data-source"), g.get("data-dest"), g.get("data-kind")): g
              for g in _edge_groups(root)}
    start = groups[("IDLE", "INTENT", "start")]
    assert start.get("data-count") == "3"
    assert float(_edge_path(start).get("stroke-width", "0")) > 1.4
    assert groups[("INTENT", "PLANNING", "done")].get("opacity") == "0.35"
    texts = " ".join(" ".join(t.itertext()) for t in root.iterfind(".//svg:text", NS))
    assert "×3" in texts
    assert "4 visits · 12.5 ms" in texts


def test_an_svg_to_inline_in_html_has_no_namespace_url(bundled: Graph) -> None:
    inline = to_svg(bundled, standalone=False)
    assert inline.startswith("<svg ")
    assert "http" not in inline

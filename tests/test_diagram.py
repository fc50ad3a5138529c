"""Diagrams: Mermaid and DOT text of a graph, snapshot-tested and checked for what they show.

The snapshots under ``tests/snapshots/`` are the reviewed diagrams of the bundled graph.
After an intended change, regenerate them with::

    HERMES_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_diagram.py

and review the diff like any other change.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hermes_fsm.graph.loader import default_graph_path, load_graph, parse_graph
from hermes_fsm.graph.model import Graph
from hermes_fsm.viz.diagram import to_dot, to_mermaid

SNAPSHOTS = Path(__file__).parent / "snapshots"
SUPPORT_GRAPH = Path(__file__).parent / "graphs" / "good" / "support_turn.yaml"
UPDATE_VAR = "HERMES_UPDATE_SNAPSHOTS"

RED = "#c62828"

# Every line of a Mermaid diagram has one of these shapes; a label with a stray quote or
# an unknown arrow makes a line match none of them.
_MERMAID_LINE = re.compile(
    r"flowchart TD"
    r'|    s_\w+(\(\["[^"]*"\]\)|\["[^"]*"\])'                 # node: stadium or box
    r'|    s_\w+ (-->|-\.->|==>)\|"[^"]*"\| s_\w+'             # edge with a quoted label
    r"|    linkStyle \d+ stroke:#[0-9a-f]{6},color:#[0-9a-f]{6}"
    r'|    budget>"[^"]*"\]'                                   # the abort note
    r"|    style budget fill:#[0-9a-f]{6},stroke:#[0-9a-f]{3}"
)
_MERMAID_EDGE = re.compile(r'    (s_\w+) (-->|-\.->|==>)\|"([^"]*)"\| (s_\w+)')
_DOT_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


@pytest.fixture(scope="module")
def bundled() -> Graph:
    return load_graph(default_graph_path())


@pytest.fixture(scope="module")
def mermaid(bundled: Graph) -> str:
    return to_mermaid(bundled)


@pytest.fixture(scope="module")
def dot(bundled: Graph) -> str:
    return to_dot(bundled)


def _assert_matches_snapshot(name: str, actual: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get(UPDATE_VAR) == "1":
        path.write_text(actual, encoding="utf-8", newline="\n")
        return
    how = (f"{path} does not match the diagram of the bundled graph. If the change is "
           f"intended, regenerate the snapshots with `{UPDATE_VAR}=1 .venv/bin/pytest "
           "tests/test_diagram.py` and review the diff.")
    assert path.exists(), how
    assert actual == path.read_text(encoding="utf-8"), how


def _mermaid_edges(text: str) -> list[tuple[str, str, str, str]]:
    """``(source id, arrow, label, dest id)`` of every edge line, in drawing order."""
    out = []
    for line in text.splitlines():
        match = _MERMAID_EDGE.fullmatch(line)
        if match:
            source, arrow, label, dest = match.groups()
            out.append((source, arrow, label, dest))
    return out


def _mermaid_id(name: str) -> str:
    return "s_" + name


def _dot_edge_line(text: str, source: str, dest: str, label: str) -> str:
    prefix = f'    "{source}" -> "{dest}" [label="{label}"'
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, f"expected one DOT edge {source} -> {dest} labelled {label!r}"
    return lines[0]


def _dot_node_line(text: str, name: str) -> str:
    lines = [line for line in text.splitlines() if line.startswith(f'    "{name}" [label=')]
    assert len(lines) == 1, f"expected one DOT node {name}"
    return lines[0]


def _mermaid_node_line(text: str, name: str) -> str:
    node = _mermaid_id(name)
    lines = [line for line in text.splitlines()
             if line.startswith(f"    {node}[") or line.startswith(f"    {node}(")]
    assert len(lines) == 1, f"expected one Mermaid node {node}"
    return lines[0]


# --- snapshots ----------------------------------------------------------------------------


def test_mermaid_of_the_bundled_graph_matches_its_snapshot(mermaid: str) -> None:
    _assert_matches_snapshot("agent_turn.mmd", mermaid)


def test_dot_of_the_bundled_graph_matches_its_snapshot(dot: str) -> None:
    _assert_matches_snapshot("agent_turn.dot", dot)


def test_diagrams_are_pure_functions_of_the_graph(bundled: Graph) -> None:
    again = load_graph(default_graph_path())
    assert to_mermaid(again) == to_mermaid(bundled)
    assert to_dot(again) == to_dot(bundled)


# --- retry edges --------------------------------------------------------------------------


def test_every_retrying_state_has_a_dashed_retry_edge_in_mermaid(
    bundled: Graph, mermaid: str
) -> None:
    edges = _mermaid_edges(mermaid)
    for name in bundled.retrying_states():
        label = f"retry (max {bundled.states[name].retry.max_attempts} attempts)"
        node = _mermaid_id(name)
        assert (node, "-.->", label, node) in edges, name


def test_every_retrying_state_has_a_dashed_retry_edge_in_dot(bundled: Graph, dot: str) -> None:
    for name in bundled.retrying_states():
        label = f"retry (max {bundled.states[name].retry.max_attempts} attempts)"
        assert "style=dashed" in _dot_edge_line(dot, name, name, label)


def test_a_state_attempted_once_has_no_retry_edge(bundled: Graph, mermaid: str, dot: str) -> None:
    assert bundled.states["RESULT"].retry.max_attempts == 1
    assert not [e for e in _mermaid_edges(mermaid) if e[0] == e[3] == "s_RESULT"]
    assert '"RESULT" -> "RESULT"' not in dot


def test_only_retry_edges_are_dashed_in_mermaid(mermaid: str) -> None:
    for _, arrow, label, _ in _mermaid_edges(mermaid):
        assert (arrow == "-.->") == label.startswith("retry"), label


# --- failure routes -----------------------------------------------------------------------


def test_every_failure_route_is_drawn_in_mermaid(bundled: Graph, mermaid: str) -> None:
    edges = _mermaid_edges(mermaid)
    assert len(bundled.failure_routes()) == 9
    for state, route in bundled.failure_routes():
        assert (_mermaid_id(state), "==>", "fail", _mermaid_id(route)) in edges, state


def test_every_failure_route_is_red_in_dot(bundled: Graph, dot: str) -> None:
    for state, route in bundled.failure_routes():
        line = _dot_edge_line(dot, state, route, "fail")
        assert f'color="{RED}"' in line
        assert f'fontcolor="{RED}"' in line


def test_failure_edges_are_red_in_mermaid_and_nothing_else_is(mermaid: str) -> None:
    styles = dict(re.findall(r"linkStyle (\d+) (\S+)", mermaid))
    for index, (_, arrow, label, _) in enumerate(_mermaid_edges(mermaid)):
        is_red = f"stroke:{RED}" in styles.get(str(index), "")
        assert is_red == (label == "fail"), f"edge {index} ({label}) {arrow}"


def test_retry_edges_are_not_styled_like_failures_in_dot(dot: str) -> None:
    for line in dot.splitlines():
        if 'label="retry' in line:
            assert RED not in line


# --- declared transitions, contracts, the initial state and the budget --------------------


def test_every_declared_transition_is_drawn_with_its_conditions(
    bundled: Graph, mermaid: str, dot: str
) -> None:
    edges = _mermaid_edges(mermaid)
    assert (_mermaid_id("RESULT"), "-->", "done [output.needs_more_tools] (max 4/turn)",
            _mermaid_id("PLANNING")) in edges
    for t in bundled.transitions:
        drawn = [e for e in edges if e[0] == _mermaid_id(t.source) and e[3] == _mermaid_id(t.dest)
                 and e[2].startswith(t.trigger)]
        assert drawn, f"{t.source} -> {t.dest}"
        assert f'"{t.source}" -> "{t.dest}" [label="{t.trigger}' in dot


def test_unless_conditions_and_callable_conditions_are_labelled() -> None:
    text = to_mermaid(load_graph(SUPPORT_GRAPH))
    assert '|"done [not output.ready] (max 2/turn)"| s_CLARIFY' in text
    assert '|"done [output.ready and tests.graph_handlers.is_urgent]"| s_APPROVAL' in text


@pytest.mark.parametrize("state", ["INTENT", "PLANNING", "EXECUTION", "RESULT", "RESPONSE",
                                   "MEMORY_COMMIT"])
def test_every_state_shows_its_contract_ref(
    bundled: Graph, mermaid: str, dot: str, state: str
) -> None:
    contract = bundled.states[state].contract
    assert contract is not None
    assert contract.ref() in _mermaid_node_line(mermaid, state)
    assert contract.ref() in _dot_node_line(dot, state)


def test_state_timeouts_are_shown(mermaid: str, dot: str) -> None:
    assert "INTENT<br/>intent@2.0.0<br/>timeout 10s" in _mermaid_node_line(mermaid, "INTENT")
    assert r"INTENT\nintent@2.0.0\ntimeout 10s" in _dot_node_line(dot, "INTENT")


def test_the_initial_state_is_drawn_differently(mermaid: str, dot: str) -> None:
    assert _mermaid_node_line(mermaid, "IDLE") == '    s_IDLE(["IDLE"])'
    assert "shape=doublecircle" in _dot_node_line(dot, "IDLE")
    assert "doublecircle" not in _dot_node_line(dot, "INTENT")


def test_the_abort_route_and_budget_are_summarised_in_a_note(mermaid: str, dot: str) -> None:
    assert 'budget>"turn budget 30s: abort from any state → IDLE"]' in mermaid
    note = '"hermes:budget" [shape=note, label="turn budget 30s: abort from any state -> IDLE"]'
    assert note in dot


# --- well-formed output -------------------------------------------------------------------


@pytest.mark.parametrize("path", [default_graph_path(), SUPPORT_GRAPH], ids=["bundled", "user"])
def test_every_mermaid_line_is_well_formed(path: Path) -> None:
    for line in to_mermaid(load_graph(path)).splitlines():
        assert _MERMAID_LINE.fullmatch(line), line


@pytest.mark.parametrize("path", [default_graph_path(), SUPPORT_GRAPH], ids=["bundled", "user"])
def test_every_dot_line_has_balanced_quotes(path: Path) -> None:
    for line in to_dot(load_graph(path)).splitlines():
        assert '"' not in _DOT_STRING.sub("", line), line


def test_dot_is_accepted_by_graphviz(dot: str, tmp_path: Path) -> None:
    dot_binary = shutil.which("dot")
    if dot_binary is None:
        pytest.skip("graphviz is not installed (no `dot` on PATH); cannot render the DOT output")
    source = tmp_path / "agent_turn.dot"
    source.write_text(dot, encoding="utf-8")
    done = subprocess.run([dot_binary, "-Tsvg", str(source)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout


# --- escaping -----------------------------------------------------------------------------

QUOTED_STATE_GRAPH = """\
name: 'say "hi"'
initial: IDLE
states:
  IDLE: {}
  'ASK "WHY"':
    contract: response@1
    retry: {max_attempts: 2}
    on_failure: IDLE
transitions:
  - {trigger: start, source: IDLE, dest: 'ASK "WHY"'}
  - {source: 'ASK "WHY"', dest: IDLE}
"""


@pytest.fixture(scope="module")
def quoted() -> Graph:
    return parse_graph(QUOTED_STATE_GRAPH, "quoted.yaml")


def test_dot_escapes_quotes_in_state_names(quoted: Graph) -> None:
    text = to_dot(quoted)
    assert r'"ASK \"WHY\"" [label="ASK \"WHY\"\nresponse@1.0.0"]' in text
    assert r'"IDLE" -> "ASK \"WHY\"" [label="start"]' in text
    for line in text.splitlines():
        assert '"' not in _DOT_STRING.sub("", line), line


def test_dot_escapes_quotes_in_the_graph_name(quoted: Graph) -> None:
    assert to_dot(quoted).startswith(r'digraph "say \"hi\"" {')


def test_mermaid_keeps_quotes_in_state_names_from_breaking_labels(quoted: Graph) -> None:
    text = to_mermaid(quoted)
    assert "ASK 'WHY'" in text or "ASK #quot;WHY#quot;" in text
    for line in text.splitlines():
        assert _MERMAID_LINE.fullmatch(line), line


def test_mermaid_escapes_quotes_in_the_initial_state_name() -> None:
    text = """\
name: quoted_initial
initial: 'WAIT "HERE"'
states:
  'WAIT "HERE"': {}
  ASK: {contract: response@1, on_failure: 'WAIT "HERE"'}
transitions:
  - {trigger: start, source: 'WAIT "HERE"', dest: ASK}
  - {source: ASK, dest: 'WAIT "HERE"'}
"""
    graph = parse_graph(text, "quoted-initial.yaml")
    for line in to_mermaid(graph).splitlines():
        assert _MERMAID_LINE.fullmatch(line), line


def test_mermaid_gives_distinct_states_distinct_ids() -> None:
    text = """\
name: similar
initial: IDLE
states:
  IDLE: {}
  NEEDS-INFO: {contract: response@1, on_failure: IDLE}
  NEEDS_INFO: {contract: response@1, on_failure: IDLE}
transitions:
  - {trigger: start, source: IDLE, dest: NEEDS-INFO}
  - {source: NEEDS-INFO, dest: NEEDS_INFO}
  - {source: NEEDS_INFO, dest: IDLE}
"""
    nodes = [line.split("[")[0].split("(")[0].strip()
             for line in to_mermaid(parse_graph(text, "similar.yaml")).splitlines()
             if re.match(r"    s_\w+[\[(]", line)]
    assert len(nodes) == len(set(nodes)) == 3


def test_dot_budget_note_is_not_a_state_named_budget() -> None:
    text = """\
name: budgeting
initial: IDLE
states:
  IDLE: {}
  budget: {contract: response@1, on_failure: IDLE}
transitions:
  - {trigger: start, source: IDLE, dest: budget}
  - {source: budget, dest: IDLE}
"""
    lines = to_dot(parse_graph(text, "budgeting.yaml")).splitlines()
    declared = [line.strip().split(" [")[0].strip('"') for line in lines
                if re.match(r'    ("[^"]*"|\w+) \[', line)]
    assert len(declared) == len(set(declared)), declared

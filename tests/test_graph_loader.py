"""The graph loader: every mistake in a graph file is a GraphError naming file and line.

Each file under ``tests/graphs/bad/`` holds exactly one mistake, described in its first
line. The table below says on which line the loader must report it and what the
message must say. ``tests/graphs/good/`` holds graphs that must load.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hermes_fsm.contracts.states import Intent, Response
from hermes_fsm.errors import GraphError, HermesError
from hermes_fsm.graph.loader import default_graph_path, load_graph, parse_graph
from hermes_fsm.graph.machine import GraphMachine
from hermes_fsm.graph.model import Graph
from tests import graph_handlers

GRAPHS = Path(__file__).parent / "graphs"
BAD = GRAPHS / "bad"
SUPPORT_GRAPH = GRAPHS / "good" / "support_turn.yaml"

BUNDLED_STATES = ["IDLE", "INTENT", "PLANNING", "CLARIFY", "APPROVAL", "APPROVED",
                  "EXECUTION", "RESULT", "RESPONSE", "MEMORY_COMMIT"]

# (file, line of the mistake, what the message must say)
BAD_GRAPHS = [
    ("yaml_syntax_error.yaml", 6, "mapping values are not allowed here"),
    ("yaml_unclosed_flow_mapping.yaml", 11, "mapping opened on this line is never closed"),
    ("duplicate_state.yaml", 10, "duplicate key 'ANSWER' (first at line 7)"),
    ("top_level_list.yaml", 3, "a graph file must be a mapping"),
    ("unknown_state_field.yaml", 9, "unknown field 'states.ANSWER.retyr'"),
    ("missing_initial.yaml", 2, "missing required field 'initial'"),
    ("initial_not_declared.yaml", 3, "initial state 'WAITING' is not declared"),
    ("dangling_dest.yaml", 13, "dest 'IDEL' is not a declared state"),
    ("unknown_source.yaml", 13, "source 'ANSWR' is not a declared state"),
    ("transition_missing_dest.yaml", 13, "missing required field 'transitions.2.dest'"),
    ("unreachable_state.yaml", 10, "state 'ORPHAN' is unreachable from the initial state"),
    ("no_way_back.yaml", 10, "from state 'TRAP' the turn can never get back to 'IDLE'"),
    ("unknown_contract.yaml", 9, "unknown contract 'answer@1'"),
    ("unknown_contract_version.yaml", 9, "contract 'intent' has no version matching '9'"),
    ("retry_zero_attempts.yaml", 10, "max_attempts: Input should be greater than or equal to 1"),
    ("retry_negative_backoff.yaml", 11, "backoff_s: Input should be greater than or equal to 0"),
    ("retry_string_attempts.yaml", 11, "valid integer (got 'three')"),
    ("timeout_zero.yaml", 9, "timeout_s: Input should be greater than 0 (got 0)"),
    ("timeout_negative.yaml", 10, "timeout_s: Input should be greater than 0 (got -3)"),
    ("handler_missing_module.yaml", 9, "No module named 'tests.no_such_module'"),
    ("handler_missing_attribute.yaml", 9, "has no attribute 'no_such_handler'"),
    ("handler_not_callable.yaml", 9, "'tests.graph_handlers.NOT_CALLABLE' is not callable"),
    ("handler_module_raises.yaml", 10, "raised RuntimeError"),
    ("condition_not_importable.yaml", 16, "has no attribute 'is_very_urgent'"),
    ("condition_malformed.yaml", 14, "condition 'output.needs-more' is malformed"),
    ("on_failure_unknown.yaml", 9, "on_failure names unknown state 'ERROR'"),
    ("missing_on_failure.yaml", 7, "state 'ANSWER' has no on_failure route"),
    ("unknown_trigger.yaml", 13, "unknown trigger 'finished'"),
    ("start_not_from_initial.yaml", 14, "use trigger 'start' from the initial state"),
    ("only_conditional.yaml", 13, "every transition out of 'ANSWER' has a condition"),
    ("shadowed_transition.yaml", 16, "transition 3 out of 'ANSWER' can never be taken"),
    ("initial_with_handler.yaml", 7, "'IDLE' waits for a message and cannot have a handler"),
    ("no_handler_no_contract.yaml", 7, "state 'ANSWER' has neither a handler nor a contract"),
    ("contract_not_a_contract.yaml", 6, "is not a Contract subclass"),
    ("contract_key_mismatch.yaml", 5, "is named 'clarification'"),
    ("contract_module_raises.yaml", 6, "raised RuntimeError"),
    ("recall_unknown.yaml", 11, "recall lists unknown 'past_outcome'; list any of memory, "
                                "past_outcomes"),
    ("recall_twice.yaml", 10, "recall lists 'memory' twice; list it once"),
    ("recall_not_a_list.yaml", 9, "recall is a list, even of one item; write recall: [memory]"),
    ("recall_on_initial.yaml", 7, "'IDLE' waits for a message and recalls nothing"),
    ("nested_too_deep.yaml", 8, "nested more than 64 levels deep"),
]


def _bad_rows() -> list[Any]:
    return [pytest.param(BAD / name, line, phrase, id=name.removesuffix(".yaml"))
            for name, line, phrase in BAD_GRAPHS]


def _load_error(path: Path) -> GraphError:
    with pytest.raises(GraphError) as caught:
        load_graph(path)
    return caught.value


# --- bad graphs ---------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "line", "phrase"), _bad_rows())
def test_bad_graph_error_names_the_line_of_the_mistake(path: Path, line: int, phrase: str) -> None:
    error = _load_error(path)
    source_line = path.read_text(encoding="utf-8").splitlines()[(error.line or 0) - 1]
    assert error.line == line, f"reported line {error.line}: {source_line!r}"


@pytest.mark.parametrize(("path", "line", "phrase"), _bad_rows())
def test_bad_graph_error_names_the_file(path: Path, line: int, phrase: str) -> None:
    error = _load_error(path)
    assert str(path) in str(error)
    assert str(error).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize(("path", "line", "phrase"), _bad_rows())
def test_bad_graph_error_says_what_is_wrong(path: Path, line: int, phrase: str) -> None:
    assert phrase in str(_load_error(path))


@pytest.mark.parametrize(("path", "line", "phrase"), _bad_rows())
def test_parse_graph_reports_the_same_line_as_load_graph(
    path: Path, line: int, phrase: str
) -> None:
    with pytest.raises(GraphError) as caught:
        parse_graph(path.read_text(encoding="utf-8"), name="inline.yaml")
    assert caught.value.line == line
    assert str(caught.value).startswith(f"inline.yaml:{line}: ")


def test_every_bad_graph_file_has_an_expectation() -> None:
    listed = {name for name, _, _ in BAD_GRAPHS}
    on_disk = {p.name for p in BAD.glob("*.yaml")}
    assert on_disk == listed
    assert len(on_disk) >= 12


def test_graph_error_is_a_hermes_error() -> None:
    assert isinstance(_load_error(BAD / "dangling_dest.yaml"), HermesError)


def test_missing_graph_file_is_a_graph_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.yaml"
    error = _load_error(path)
    assert error.line is None
    assert str(path) in str(error)
    assert "cannot read the file" in str(error)


def test_unclosed_quote_is_reported_where_the_quote_opens() -> None:
    text = 'name: g\ninitial: IDLE\ndescription: "never closed\nstates: {}\ntransitions: []\n'
    with pytest.raises(GraphError) as caught:
        parse_graph(text, "quote.yaml")
    assert caught.value.line == 3
    assert "quoted string opened on this line is never closed" in str(caught.value)


def test_tab_indentation_is_reported_on_its_line_with_a_fix() -> None:
    text = "name: g\ninitial: IDLE\nstates:\n\tIDLE: {}\ntransitions: []\n"
    with pytest.raises(GraphError) as caught:
        parse_graph(text, "tabs.yaml")
    assert caught.value.line == 4
    assert "indent with spaces, not tabs" in str(caught.value)


# --- the bundled graph --------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled() -> Graph:
    return load_graph(default_graph_path())


@pytest.fixture(scope="module")
def bundled_edges(bundled: Graph) -> list[tuple[str, str, str | None]]:
    return GraphMachine(bundled).edges()


def test_bundled_graph_has_its_states_in_order(bundled: Graph) -> None:
    assert list(bundled.states) == BUNDLED_STATES
    assert bundled.initial == "IDLE"


def test_bundled_graph_is_the_checked_in_states_file(bundled: Graph) -> None:
    checked_in = load_graph(Path(__file__).parent.parent / "states" / "agent_turn.yaml")
    assert checked_in.content_hash == bundled.content_hash


def test_bundled_graph_retries_intent_into_itself(
    bundled_edges: list[tuple[str, str, str]]
) -> None:
    assert ("retry", "INTENT", "INTENT") in bundled_edges


def test_bundled_graph_routes_a_failed_planning_to_response(
    bundled_edges: list[tuple[str, str, str]]
) -> None:
    assert ("fail", "PLANNING", "RESPONSE") in bundled_edges


@pytest.mark.parametrize("state", BUNDLED_STATES)
def test_bundled_graph_aborts_every_state_to_idle(
    bundled_edges: list[tuple[str, str, str]], state: str
) -> None:
    assert ("abort", state, "IDLE") in bundled_edges


def test_bundled_graph_resolves_contract_refs_to_classes(bundled: Graph) -> None:
    assert bundled.states["INTENT"].contract is Intent
    assert bundled.states["RESPONSE"].contract is Response


def test_bundled_graph_retry_policy_is_read_from_the_file(bundled: Graph) -> None:
    retry = bundled.states["INTENT"].retry
    assert (retry.max_attempts, retry.backoff_s, retry.max_backoff_s) == (3, 0.05, 1.0)
    assert bundled.states["RESULT"].retry.max_attempts == 1


def test_bundled_graph_contract_states_without_handler_ask_the_brain(bundled: Graph) -> None:
    assert bundled.states["PLANNING"].handler is None  # a contract alone: the engine asks the brain
    assert bundled.states["INTENT"].working and not bundled.states["IDLE"].working
    assert bundled.states["IDLE"].handler is None


def test_bundled_graph_gives_planning_past_outcomes_and_the_other_brain_states_memory(
        bundled: Graph) -> None:
    recall = {name: set(state.recall) for name, state in bundled.states.items()}
    assert recall["PLANNING"] == {"memory", "past_outcomes"}
    assert recall["INTENT"] == recall["RESPONSE"] == recall["MEMORY_COMMIT"] == {"memory"}


def test_a_state_without_recall_recalls_memory_and_an_empty_recall_nothing() -> None:
    text = default_graph_path().read_text(encoding="utf-8")
    text = text.replace("    recall: [memory]\n    on_failure: MEMORY_COMMIT\n",
                        "    recall: []\n    on_failure: MEMORY_COMMIT\n")
    graph = parse_graph(text, "recall.yaml")
    assert graph.states["RESPONSE"].recall == frozenset()
    assert graph.states["RESULT"].recall == frozenset({"memory"})  # not given: the default
    assert graph.states["IDLE"].recall == frozenset()


# --- a user graph with its own states, handlers and contracts ----------------------------


@pytest.fixture(scope="module")
def support() -> Graph:
    return load_graph(SUPPORT_GRAPH)


def test_user_graph_keeps_its_own_states(support: Graph) -> None:
    assert list(support.states) == ["IDLE", "CLARIFY", "APPROVAL", "RESPONSE"]


def test_user_graph_handlers_are_resolved_from_dotted_paths(support: Graph) -> None:
    assert support.states["CLARIFY"].handler is graph_handlers.ask_clarifying_question
    assert support.states["APPROVAL"].handler is graph_handlers.request_approval
    assert support.states["CLARIFY"].handler_path == "tests.graph_handlers.ask_clarifying_question"


def test_user_graph_registers_its_contracts_section(support: Graph) -> None:
    assert support.states["CLARIFY"].contract is graph_handlers.Clarification
    assert support.states["APPROVAL"].contract is graph_handlers.Approval  # approval@2 -> 2.1.0
    assert "clarification@1.0.0" in support.contracts.refs()


def test_user_graph_can_still_use_the_bundled_contracts(support: Graph) -> None:
    assert support.states["RESPONSE"].contract is Response


def test_user_graph_contracts_do_not_leak_into_other_graphs(support: Graph) -> None:
    assert "clarification@1" not in load_graph(default_graph_path()).contracts


def test_user_graph_machine_derives_retry_fail_and_abort(support: Graph) -> None:
    edges = GraphMachine(support).edges()
    assert ("retry", "CLARIFY", "CLARIFY") in edges
    assert ("fail", "APPROVAL", "CLARIFY") in edges
    assert {("abort", s, "IDLE") for s in support.states} <= set(edges)


def test_user_graph_callable_condition_is_resolved(support: Graph) -> None:
    to_approval = support.transitions[1]
    assert [c.text for c in to_approval.conditions] == ["output.ready",
                                                       "tests.graph_handlers.is_urgent"]
    assert to_approval.conditions[1].check is graph_handlers.is_urgent


def test_parse_graph_of_the_user_graph_matches_load_graph(support: Graph) -> None:
    parsed = parse_graph(SUPPORT_GRAPH.read_text(encoding="utf-8"), name="support.yaml")
    assert parsed.path == "support.yaml"
    assert parsed.content_hash == support.content_hash
    assert list(parsed.states) == list(support.states)
    assert ([(t.trigger, t.source, t.dest, t.limit) for t in parsed.transitions]
            == [(t.trigger, t.source, t.dest, t.limit) for t in support.transitions])
    assert parsed.states["APPROVAL"].contract is graph_handlers.Approval


def test_transitions_remember_their_line(support: Graph) -> None:
    lines = SUPPORT_GRAPH.read_text(encoding="utf-8").splitlines()
    first = support.transitions[0]
    assert "{trigger: start, source: IDLE, dest: CLARIFY}" in lines[(first.line or 0) - 1]


# --- output conditions --------------------------------------------------------------------


def _intent(needs_tools: bool) -> Intent:
    return Intent(intent_type="inventory_query", parameters={}, confidence=0.9,
                  needs_tools=needs_tools)


def test_output_field_condition_is_true_when_the_field_is_truthy(bundled: Graph) -> None:
    condition = bundled.transitions[1].conditions[0]
    assert condition.text == "output.needs_tools"
    assert condition.check(SimpleNamespace(output=_intent(True))) is True


def test_output_field_condition_is_false_when_the_field_is_falsy(bundled: Graph) -> None:
    condition = bundled.transitions[1].conditions[0]
    assert condition.check(SimpleNamespace(output=_intent(False))) is False


def test_output_field_condition_reads_mapping_outputs(bundled: Graph) -> None:
    condition = bundled.transitions[1].conditions[0]
    assert condition.check(SimpleNamespace(output={"needs_tools": True})) is True
    assert condition.check(SimpleNamespace(output={"needs_tools": False})) is False


def test_output_field_condition_is_false_when_the_field_is_absent(bundled: Graph) -> None:
    condition = bundled.transitions[1].conditions[0]
    assert condition.check(SimpleNamespace(output={})) is False
    assert condition.check(SimpleNamespace(output=None)) is False


def test_not_output_field_condition_negates_the_field() -> None:
    text = default_graph_path().read_text(encoding="utf-8").replace(
        "conditions: [output.needs_tools]", "conditions: [not output.needs_tools]")
    graph = parse_graph(text, "negated.yaml")
    condition = graph.transitions[1].conditions[0]
    assert condition.text == "not output.needs_tools"
    assert condition.check(SimpleNamespace(output=_intent(False))) is True
    assert condition.check(SimpleNamespace(output=_intent(True))) is False


def test_unless_condition_checks_the_field_itself(support: Graph) -> None:
    # the machine negates `unless`; the resolved condition reports the field's truth
    again = support.transitions[2]
    assert [c.text for c in again.unless] == ["output.ready"]
    assert again.unless[0].check(SimpleNamespace(output={"ready": True})) is True
